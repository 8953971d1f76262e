// Package netfault puts network faults on the links of a rig's own
// namespaces: a netem qdisc (loss, delay with jitter, reordering,
// duplication, or loss of everything for a partition) and a link taken
// down and brought back up. Every fault returns its undo, and a fault that
// fails half-way undoes what it had done before it returns the error, so
// no qdisc or downed link outlives the step that made it.
//
// Faults go through netlink handles bound to the namespace (rigs/netns),
// so no thread changes namespace and nothing shells out to tc.
package netfault

import (
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/aether-mesh/aether/rigs/netns"
)

// Link is one end of a veth the rig made: its namespace and its name there.
type Link struct {
	NS   *netns.NS
	Name string
}

func (l Link) String() string { return l.NS.Name + "/" + l.Name }

// Netem is what a netem qdisc does to the packets a link sends.
type Netem struct {
	// LossPct is the share of packets dropped, in percent (100: all).
	LossPct float64 `json:"loss_pct,omitempty"`
	// Delay is added to every packet, Jitter spreads it uniformly by ±Jitter.
	Delay  time.Duration `json:"delay,omitempty"`
	Jitter time.Duration `json:"jitter,omitempty"`
	// ReorderPct of packets are sent at once, ahead of the delayed ones
	// (netem needs a delay to reorder against).
	ReorderPct float64 `json:"reorder_pct,omitempty"`
	// DuplicatePct of packets are sent twice.
	DuplicatePct float64 `json:"duplicate_pct,omitempty"`
}

func (n Netem) String() string {
	s := fmt.Sprintf("loss %g%%", n.LossPct)
	if n.Delay > 0 {
		s += fmt.Sprintf(", delay %s ± %s", n.Delay, n.Jitter)
	}
	if n.ReorderPct > 0 {
		s += fmt.Sprintf(", reorder %g%%", n.ReorderPct)
	}
	if n.DuplicatePct > 0 {
		s += fmt.Sprintf(", duplicate %g%%", n.DuplicatePct)
	}
	return s
}

// Check refuses what netem would take wrongly or not at all.
func (n Netem) Check() error {
	for _, p := range []struct {
		what string
		v    float64
	}{{"loss", n.LossPct}, {"reorder", n.ReorderPct}, {"duplicate", n.DuplicatePct}} {
		if p.v < 0 || p.v > 100 {
			return fmt.Errorf("netem %s %g%%: not in [0, 100]", p.what, p.v)
		}
	}
	if n.Delay < 0 || n.Jitter < 0 || n.Jitter > n.Delay {
		return fmt.Errorf("netem delay %s ± %s: the jitter must lie in [0, delay]", n.Delay, n.Jitter)
	}
	if n.ReorderPct > 0 && n.Delay == 0 {
		return errors.New("netem reorder without a delay: netem reorders only against delayed packets")
	}
	return nil
}

// rootHandle is the handle of the root qdisc a fault adds, so the undo
// deletes that qdisc and nothing the link had before.
var rootHandle = netlink.MakeHandle(0xae7, 0)

// ApplyNetem adds a netem root qdisc with n to every link and returns the
// undo, which deletes them. A link that already has a root qdisc other than
// the kernel's default is refused: the undo would not restore it.
func ApplyNetem(n Netem, links ...Link) (undo func() error, err error) {
	if err := n.Check(); err != nil {
		return nil, err
	}
	var undos []func() error
	undo = func() error {
		var errs []error
		for i := len(undos) - 1; i >= 0; i-- {
			errs = append(errs, undos[i]())
		}
		undos = nil
		return errors.Join(errs...)
	}
	for _, l := range links {
		u, err := addNetem(l, n)
		if err != nil {
			return nil, errors.Join(err, undo())
		}
		undos = append(undos, u)
	}
	return undo, nil
}

func addNetem(l Link, n Netem) (func() error, error) {
	h, err := l.NS.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	if err != nil {
		return nil, fmt.Errorf("netem on %s: %w", l, err)
	}
	if q, err := rootQdisc(h, link); err != nil {
		return nil, fmt.Errorf("netem on %s: %w", l, err)
	} else if q != nil {
		return nil, fmt.Errorf("netem on %s: the link already has root qdisc %s %s, which removing ours would not restore", l, q.Type(), netlink.HandleStr(q.Attrs().Handle))
	}
	q := netlink.NewNetem(netlink.QdiscAttrs{LinkIndex: link.Attrs().Index, Handle: rootHandle, Parent: netlink.HANDLE_ROOT},
		netlink.NetemQdiscAttrs{
			Loss: float32(n.LossPct), Latency: uint32(n.Delay.Microseconds()), Jitter: uint32(n.Jitter.Microseconds()),
			ReorderProb: float32(n.ReorderPct), Duplicate: float32(n.DuplicatePct),
		})
	if err := h.QdiscAdd(q); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("netem (%s) on %s: %w (%w)", n, l, ErrNoNetem, err)
		}
		return nil, fmt.Errorf("netem (%s) on %s: %w", n, l, err)
	}
	return func() error { return delNetem(l) }, nil
}

// delNetem deletes the fault's qdisc from l; one already gone (its
// namespace deleted, the link removed) is not an error.
func delNetem(l Link) error {
	h, err := l.NS.Handle()
	if err != nil {
		return fmt.Errorf("removing netem from %s: %w", l, err)
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) {
			return nil
		}
		return fmt.Errorf("removing netem from %s: %w", l, err)
	}
	q, err := rootQdisc(h, link)
	if err != nil {
		return fmt.Errorf("removing netem from %s: %w", l, err)
	}
	if q == nil || q.Attrs().Handle != rootHandle {
		return nil
	}
	if err := h.QdiscDel(q); err != nil {
		return fmt.Errorf("removing netem from %s: %w", l, err)
	}
	return nil
}

// rootQdisc is the link's root qdisc unless it is the kernel's default
// (noqueue on a veth, handle 0), or nil.
func rootQdisc(h *netlink.Handle, link netlink.Link) (netlink.Qdisc, error) {
	qs, err := netns.Retry(func() ([]netlink.Qdisc, error) { return h.QdiscList(link) })
	if err != nil {
		return nil, fmt.Errorf("listing qdiscs: %w", err)
	}
	for _, q := range qs {
		if q.Attrs().Parent == netlink.HANDLE_ROOT && q.Attrs().Handle != 0 {
			return q, nil
		}
	}
	return nil, nil
}

// Netems lists the netem qdiscs on l, each as "netem <handle>": what a
// test or a run looks for after an undo.
func Netems(l Link) ([]string, error) {
	h, err := l.NS.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	if err != nil {
		return nil, fmt.Errorf("qdiscs of %s: %w", l, err)
	}
	qs, err := netns.Retry(func() ([]netlink.Qdisc, error) { return h.QdiscList(link) })
	if err != nil {
		return nil, fmt.Errorf("qdiscs of %s: %w", l, err)
	}
	var out []string
	for _, q := range qs {
		if q.Type() == "netem" {
			out = append(out, "netem "+netlink.HandleStr(q.Attrs().Handle))
		}
	}
	return out, nil
}

// Down takes l down and returns the undo, which brings it back up.
//
// The rig's faults take down the bridge's end of a node's veth, never the
// node's own eth0: the node's end then loses its carrier, and its routes
// stay (marked linkdown) to carry traffic again once the carrier returns,
// whereas a link set down administratively loses every route through it
// for good.
func Down(l Link) (undo func() error, err error) {
	if err := setLink(l, false); err != nil {
		return nil, errors.Join(err, setLink(l, true))
	}
	return func() error { return setLink(l, true) }, nil
}

func setLink(l Link, up bool) error {
	h, err := l.NS.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	if err != nil {
		return fmt.Errorf("link %s: %w", l, err)
	}
	if up {
		err = h.LinkSetUp(link)
	} else {
		err = h.LinkSetDown(link)
	}
	if err != nil {
		return fmt.Errorf("setting link %s up=%v: %w", l, up, err)
	}
	return nil
}

// IsUp says whether l is administratively up.
func IsUp(l Link) (bool, error) {
	h, err := l.NS.Handle()
	if err != nil {
		return false, err
	}
	defer h.Close()
	link, err := h.LinkByName(l.Name)
	if err != nil {
		return false, fmt.Errorf("link %s: %w", l, err)
	}
	return link.Attrs().Flags&net.FlagUp != 0, nil
}
