package phase0

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/netns"
)

// divertRule is `ip rule add fwmark 0xae71 lookup CaptureRouteTable`.
func divertRule() *netlink.Rule {
	r := netlink.NewRule()
	r.Family = netlink.FAMILY_V4
	r.Mark = constants.CaptureDivertFwMark
	r.Table = constants.CaptureRouteTable
	r.Priority = constants.CaptureRulePriority
	return r
}

// divertRoute is `ip route add local default dev lo table
// CaptureRouteTable`: every marked packet is delivered locally with its
// destination untouched.
func divertRoute(lo int) *netlink.Route {
	return &netlink.Route{
		Family:    netlink.FAMILY_V4,
		Dst:       &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)},
		LinkIndex: lo,
		Table:     constants.CaptureRouteTable,
		Type:      unix.RTN_LOCAL,
		Scope:     netlink.SCOPE_HOST,
	}
}

// InstallDivertRoute adds the ip rule and the local route that turn the
// divert mark into local delivery, then lists both back. On any failure it
// removes what it added.
func InstallDivertRoute(n *netns.NS) (err error) {
	h, err := n.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("failed to find lo in netns %q: %w", n.Name, err)
	}
	rule := divertRule()
	if err := h.RuleAdd(rule); err != nil {
		return fmt.Errorf("failed to add ip rule fwmark %#x lookup %d in netns %q: %w", rule.Mark, rule.Table, n.Name, err)
	}
	defer func() {
		if err != nil {
			_ = h.RuleDel(rule)
		}
	}()
	route := divertRoute(lo.Attrs().Index)
	if err := h.RouteAdd(route); err != nil {
		return fmt.Errorf("failed to add local default route dev lo table %d in netns %q: %w", route.Table, n.Name, err)
	}
	defer func() {
		if err != nil {
			_ = h.RouteDel(route)
		}
	}()
	return VerifyDivertRoute(n)
}

// listDivert lists the namespace's ip rules that point at the capture
// table, the routes in that table, and lo's index.
func listDivert(n *netns.NS) ([]netlink.Rule, []netlink.Route, int, error) {
	h, err := n.Handle()
	if err != nil {
		return nil, nil, 0, err
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err != nil {
		return nil, nil, 0, fmt.Errorf("failed to find lo in netns %q: %w", n.Name, err)
	}
	rules, err := netns.Retry(func() ([]netlink.Rule, error) {
		return h.RuleListFiltered(netlink.FAMILY_V4, &netlink.Rule{Table: constants.CaptureRouteTable}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("failed to list ip rules in netns %q: %w", n.Name, err)
	}
	routes, err := netns.Retry(func() ([]netlink.Route, error) {
		return h.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: constants.CaptureRouteTable}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, nil, 0, fmt.Errorf("failed to list routes of table %d in netns %q: %w", constants.CaptureRouteTable, n.Name, err)
	}
	return rules, routes, lo.Attrs().Index, nil
}

// VerifyNoDivertRoute fails if the namespace holds any ip rule or route
// for the capture table.
func VerifyNoDivertRoute(n *netns.NS) error {
	rules, routes, _, err := listDivert(n)
	if err != nil {
		return err
	}
	if len(rules) > 0 || len(routes) > 0 {
		return fmt.Errorf("netns %q already holds ip rules %v and routes %v for table %d", n.Name, rules, routes, constants.CaptureRouteTable)
	}
	return nil
}

// VerifyDivertRoute lists the namespace's policy rules and the capture table
// and fails unless they hold exactly the divert rule and the local default
// route.
func VerifyDivertRoute(n *netns.NS) error {
	rules, routes, lo, err := listDivert(n)
	if err != nil {
		return err
	}
	want := divertRule()
	if len(rules) != 1 {
		return fmt.Errorf("netns %q has %d ip rule(s) for table %d, want exactly one (fwmark %#x, priority %d): %v",
			n.Name, len(rules), want.Table, want.Mark, want.Priority, rules)
	}
	got := rules[0]
	// The kernel reports an unmasked fwmark with the full mask.
	fullMask := got.Mask == nil || *got.Mask == 0xffffffff
	if got.Mark != want.Mark || !fullMask || got.Priority != want.Priority || got.Invert {
		return fmt.Errorf("netns %q ip rule for table %d is %v (fwmark %#x), want fwmark %#x priority %d",
			n.Name, want.Table, got, got.Mark, want.Mark, want.Priority)
	}
	if len(routes) != 1 {
		return fmt.Errorf("netns %q table %d holds %d route(s), want exactly the local default route: %v",
			n.Name, constants.CaptureRouteTable, len(routes), routes)
	}
	r := routes[0]
	isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && maskBits(r.Dst) == 0)
	if r.Type != unix.RTN_LOCAL || !isDefault || r.LinkIndex != lo {
		return fmt.Errorf("netns %q table %d route is %v (type %d), want local default dev lo",
			n.Name, constants.CaptureRouteTable, r, r.Type)
	}
	return nil
}

func maskBits(n *net.IPNet) int {
	ones, _ := n.Mask.Size()
	return ones
}
