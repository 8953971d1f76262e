package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Handle opens a netlink handle bound to the namespace, so links, addresses
// and routes can be changed without moving any thread. Close it when done.
func (n *NS) Handle() (*netlink.Handle, error) {
	h, err := vnetns.GetFromPath(n.Path)
	if err != nil {
		return nil, fmt.Errorf("failed to open netns %q: %w", n.Path, err)
	}
	defer h.Close()
	nh, err := netlink.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("failed to open a netlink handle in netns %q: %w", n.Name, err)
	}
	return nh, nil
}

// Retry runs a netlink dump again while the kernel reports it was
// interrupted by a concurrent change (netlink.ErrDumpInterrupted), as
// containernetworking/plugins' netlinksafe does.
func Retry[T any](dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range 10 {
		v, err = dump()
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, fmt.Errorf("netlink dump still interrupted after 10 attempts: %w", err)
}

func linkUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

// Veth creates a veth pair with one end (aName) in a and the other (bName)
// in b, both up. Interface names must fit IFNAMSIZ (15 bytes).
func Veth(a *NS, aName string, b *NS, bName string) error {
	for _, s := range []string{aName, bName} {
		if len(s) > 15 {
			return fmt.Errorf("interface name %q is longer than 15 bytes", s)
		}
	}
	ha, err := a.Handle()
	if err != nil {
		return err
	}
	defer ha.Close()
	bfd, err := vnetns.GetFromPath(b.Path)
	if err != nil {
		return fmt.Errorf("failed to open netns %q: %w", b.Path, err)
	}
	defer bfd.Close()
	veth := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: aName},
		PeerName:      bName,
		PeerNamespace: netlink.NsFd(int(bfd)),
	}
	if err := ha.LinkAdd(veth); err != nil {
		return fmt.Errorf("failed to add veth %s (%s) <-> %s (%s): %w", aName, a.Name, bName, b.Name, err)
	}
	if err := SetUp(a, aName); err != nil {
		return err
	}
	return SetUp(b, bName)
}

// SetUp brings a link up.
func SetUp(n *NS, link string) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("failed to find link %q in netns %q: %w", link, n.Name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("failed to bring up %q in netns %q: %w", link, n.Name, err)
	}
	return nil
}

// Bridge creates a bridge link, up, in the namespace.
func Bridge(n *NS, name string) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	if err := h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name}}); err != nil {
		return fmt.Errorf("failed to add bridge %q in netns %q: %w", name, n.Name, err)
	}
	return SetUp(n, name)
}

// Enslave attaches link to the bridge master, both in n.
func Enslave(n *NS, link, master string) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("failed to find link %q in netns %q: %w", link, n.Name, err)
	}
	m, err := h.LinkByName(master)
	if err != nil {
		return fmt.Errorf("failed to find bridge %q in netns %q: %w", master, n.Name, err)
	}
	if err := h.LinkSetMaster(l, m); err != nil {
		return fmt.Errorf("failed to attach %q to %q in netns %q: %w", link, master, n.Name, err)
	}
	return nil
}

// AddAddr assigns prefix (for example 10.244.1.5/24) to link.
func AddAddr(n *NS, link string, prefix netip.Prefix) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("failed to find link %q in netns %q: %w", link, n.Name, err)
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: prefix.Addr().AsSlice(), Mask: net.CIDRMask(prefix.Bits(), prefix.Addr().BitLen())}}
	if prefix.Addr().Is6() {
		// No duplicate address detection: the rig owns every address.
		addr.Flags = 0x80 // IFA_F_NODAD
	}
	if err := h.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("failed to add %s to %q in netns %q: %w", prefix, link, n.Name, err)
	}
	return nil
}

// Route is a route the rig installs: Dst via Gw (optional) out of Dev.
type Route struct {
	Dst netip.Prefix
	Gw  netip.Addr // zero for an on-link route
	Dev string
	Src netip.Addr // zero for none
}

// AddRoute installs r in the namespace's main table.
func AddRoute(n *NS, r Route) error {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	l, err := h.LinkByName(r.Dev)
	if err != nil {
		return fmt.Errorf("failed to find link %q in netns %q: %w", r.Dev, n.Name, err)
	}
	nr := &netlink.Route{
		LinkIndex: l.Attrs().Index,
		Dst:       &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())},
	}
	if r.Gw.IsValid() {
		nr.Gw = r.Gw.AsSlice()
	} else {
		nr.Scope = netlink.SCOPE_LINK
	}
	if r.Src.IsValid() {
		nr.Src = r.Src.AsSlice()
	}
	if err := h.RouteAdd(nr); err != nil {
		return fmt.Errorf("failed to add route %s via %v dev %s in netns %q: %w", r.Dst, r.Gw, r.Dev, n.Name, err)
	}
	return nil
}

// Links lists the link names in the namespace.
func Links(n *NS) ([]string, error) {
	h, err := n.Handle()
	if err != nil {
		return nil, err
	}
	defer h.Close()
	ls, err := Retry(h.LinkList)
	if err != nil {
		return nil, fmt.Errorf("failed to list links in netns %q: %w", n.Name, err)
	}
	var out []string
	for _, l := range ls {
		out = append(out, l.Attrs().Name)
	}
	return out, nil
}

// Sysctl writes a sysctl inside the namespace, e.g.
// ("net/ipv4/ip_forward", "1").
func Sysctl(n *NS, key, value string) error {
	return n.Do(func() error { return writeSysctl(key, value) })
}
