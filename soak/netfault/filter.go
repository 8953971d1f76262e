package netfault

import (
	"errors"
	"fmt"
	"math"
	"syscall"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/rigs/netns"
)

// ErrNoNetem says the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM):
// adding one fails with ENOENT, "unknown qdisc kind".
var ErrNoNetem = errors.New("the kernel has no netem qdisc (CONFIG_NET_SCH_NETEM is not set)")

// FilterTable is the nftables table (netdev family) a filter fault adds in
// a link's namespace; its undo deletes the table and nothing else.
const FilterTable = "aether-fault"

// filterScale is the resolution of a filter's percentages: numgen draws in
// [0, filterScale), so 2.5% is 250 draws of 10,000.
const filterScale = 10000

// ApplyFilter is the netem fault's loss and duplication without netem: an
// nftables netdev table on each link's egress hook that drops LossPct of
// the packets the link sends and sends DuplicatePct of them twice (dup to
// the link itself), drawn by numgen random. Delay, jitter and reordering
// need a queue, which a filter does not have: n must have none.
func ApplyFilter(n Netem, links ...Link) (undo func() error, err error) {
	if err := n.Check(); err != nil {
		return nil, err
	}
	if n.Delay > 0 || n.Jitter > 0 || n.ReorderPct > 0 {
		return nil, fmt.Errorf("filter fault (%s): delay, jitter and reordering need netem's queue", n)
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
		if err := addFilter(l, n); err != nil {
			return nil, errors.Join(err, delFilter(l), undo())
		}
		undos = append(undos, func() error { return delFilter(l) })
	}
	return undo, nil
}

func withNft(ns *netns.NS, fn func(*nftables.Conn) error) error {
	h, err := vnetns.GetFromPath(ns.Path)
	if err != nil {
		return fmt.Errorf("failed to open netns %q: %w", ns.Path, err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return fmt.Errorf("failed to open nftables in netns %q: %w", ns.Name, err)
	}
	return fn(c)
}

// chainName is the egress chain of link name in FilterTable.
func chainName(link string) string { return "egress-" + link }

func addFilter(l Link, n Netem) error {
	h, err := l.NS.Handle()
	if err != nil {
		return err
	}
	link, err := h.LinkByName(l.Name)
	h.Close()
	if err != nil {
		return fmt.Errorf("filter fault on %s: %w", l, err)
	}
	return withNft(l.NS, func(c *nftables.Conn) error {
		t := c.AddTable(&nftables.Table{Name: FilterTable, Family: nftables.TableFamilyNetdev})
		policy := nftables.ChainPolicyAccept
		ch := c.AddChain(&nftables.Chain{Name: chainName(l.Name), Table: t, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookEgress, Priority: nftables.ChainPriorityFilter, Device: l.Name, Policy: &policy})
		// Duplicate first, so a duplicated packet's original may still be
		// lost like any other.
		if n.DuplicatePct > 0 {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(draw(n.DuplicatePct),
				&expr.Immediate{Register: 2, Data: binaryutil.NativeEndian.PutUint32(uint32(link.Attrs().Index))},
				&expr.Dup{RegAddr: 2, RegDev: 2, IsRegDevSet: true})})
		}
		if n.LossPct > 0 {
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(draw(n.LossPct), &expr.Verdict{Kind: expr.VerdictDrop})})
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("filter fault (%s) on %s: %w", n, l, err)
		}
		return nil
	})
}

// draw matches pct percent of packets: numgen random mod filterScale,
// turned big-endian (cmp compares bytes), below pct × filterScale / 100.
func draw(pct float64) []expr.Any {
	below := uint32(math.Round(pct * filterScale / 100))
	return []expr.Any{
		&expr.Numgen{Register: 1, Modulus: filterScale, Type: unix.NFT_NG_RANDOM},
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: binaryutil.BigEndian.PutUint32(below)},
	}
}

// delFilter deletes l's chain and, once it holds none, FilterTable; either
// already gone is not an error.
func delFilter(l Link) error {
	err := withNft(l.NS, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: FilterTable, Family: nftables.TableFamilyNetdev}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyNetdev)
		if err != nil {
			return err
		}
		left := 0
		for _, ch := range chains {
			if ch.Table.Name != FilterTable {
				continue
			}
			if ch.Name == chainName(l.Name) {
				c.DelChain(&nftables.Chain{Name: ch.Name, Table: t})
				continue
			}
			left++
		}
		if left == 0 {
			tables, err := c.ListTablesOfFamily(nftables.TableFamilyNetdev)
			if err != nil {
				return err
			}
			for _, tb := range tables {
				if tb.Name == FilterTable {
					c.DelTable(t)
				}
			}
		}
		return c.Flush()
	})
	if err != nil && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("removing the filter fault from %s: %w", l, err)
	}
	return nil
}

// Filters lists the fault chains FilterTable holds for l.
func Filters(l Link) ([]string, error) {
	var out []string
	err := withNft(l.NS, func(c *nftables.Conn) error {
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyNetdev)
		if err != nil {
			return err
		}
		for _, ch := range chains {
			if ch.Table.Name == FilterTable && ch.Name == chainName(l.Name) {
				out = append(out, FilterTable+"/"+ch.Name)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("filter faults on %s: %w", l, err)
	}
	return out, nil
}

// Impair puts n on the links with netem, or, on a kernel without netem,
// as much of it as a filter can (ApplyFilter: loss and duplication). It
// returns the undo, what was applied, and how ("netem" or "nftables"),
// so the soak states what the links really did.
func Impair(n Netem, links ...Link) (undo func() error, applied Netem, engine string, err error) {
	undo, err = ApplyNetem(n, links...)
	if err == nil {
		return undo, n, "netem", nil
	}
	if !errors.Is(err, ErrNoNetem) {
		return nil, Netem{}, "", err
	}
	f := Netem{LossPct: n.LossPct, DuplicatePct: n.DuplicatePct}
	if undo, err = ApplyFilter(f, links...); err != nil {
		return nil, Netem{}, "", err
	}
	return undo, f, "nftables", nil
}
