// Package cni holds the aether CNI plugin: the capture rule builder (pure,
// no kernel), the installer that applies, lists back and removes a rule set
// in a pod's network namespace, and the chained plugin's ADD/DEL/CHECK/STATUS.
//
// Capture follows proposal 038 as shipped (#947): mark-and-divert for TCP and
// UDP in the pod netns. The REDIRECT rule set stays buildable behind the
// capture-mode parameter (R6) because every selection suite needs it as its
// control: it delivers traffic while losing the original destination.
package cni

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/aether-mesh/aether/mesh/constants"
)

// ParseMode reads the plugin's captureMode key; empty means the default,
// tproxy.
func ParseMode(s string) (constants.CaptureMode, error) {
	if s == "" {
		return constants.CaptureTProxy, nil
	}
	return constants.ParseCaptureMode(s)
}

// Family is an nftables table family, which doubles as the address family
// of the ip rule and route that go with it.
type Family string

const (
	IPv4 Family = "ip"
	IPv6 Family = "ip6"
)

// TableName is the one nftables table the plugin owns in each family.
const TableName = "aether"

// ChainName is the capture chain inside TableName.
const ChainName = "capture"

// Chain priorities as nftables names them. The divert chain runs at mangle
// so the mark is set before the output reroute; the redirect chain is a
// dstnat chain on output.
const (
	PriorityMangle int32 = -150
	PriorityDstNAT int32 = -100
)

// Pod is what the builder needs to know about the pod: its addresses, from
// the previous plugin's result. A family gets rules only when the pod has an
// address of that family.
type Pod struct {
	Addrs []netip.Prefix
}

// Families returns the families the pod has an address in, IPv4 first.
func (p Pod) Families() []Family {
	var v4, v6 bool
	for _, a := range p.Addrs {
		if a.Addr().Unmap().Is4() {
			v4 = true
		} else if a.Addr().Is6() {
			v6 = true
		}
	}
	var out []Family
	if v4 {
		out = append(out, IPv4)
	}
	if v6 {
		out = append(out, IPv6)
	}
	return out
}

// Options change the rule set without changing what it captures.
type Options struct {
	// Counters puts a counter on every capture rule, so an operator can see
	// per-port hits in the ruleset listing. The counter sits before the
	// terminal statement: after a redirect it would invalidate the rule
	// (proposal 038, Phase 0's first run).
	Counters bool
}

// Action is what a rule does to a matching packet.
type Action string

const (
	ActionAccept   Action = "accept"
	ActionSetMark  Action = "setmark"
	ActionRedirect Action = "redirect"
)

// Rule is one nftables rule in the capture chain, in the small vocabulary
// this package writes. A rule listed back from the kernel that does not fit
// the vocabulary keeps its expressions in Foreign and never equals a built
// rule.
type Rule struct {
	// L4Proto is unix.IPPROTO_TCP or IPPROTO_UDP; 0 matches any.
	L4Proto uint8
	// DPort matches the transport destination port; 0 matches any.
	DPort uint16
	// Mark matches the packet mark exactly; 0 matches any.
	Mark    uint32
	Counter bool
	Action  Action
	// Arg is the mark to set (ActionSetMark) or the port to redirect to
	// (ActionRedirect).
	Arg uint32
	// Foreign describes a rule this package does not recognise.
	Foreign string
}

// Chain is a base chain of the capture table.
type Chain struct {
	Name     string
	Type     string // "route" or "nat"
	Hook     string // "output"
	Priority int32
	Policy   string // "accept" or "drop"
	Rules    []Rule
}

// Table is one nftables table.
type Table struct {
	Family Family
	Name   string
	Chains []Chain
}

// IPRule is a policy routing rule.
type IPRule struct {
	Family   Family
	Priority int
	Mark     uint32
	Mask     uint32
	Table    int
	// Other describes selectors this package never sets (iif, src, ...);
	// a rule listed back with any of them is not ours.
	Other string
}

// Route is a route in the capture table.
type Route struct {
	Family Family
	Type   string       // "local", "unicast", ...
	Dst    netip.Prefix // zero value: default
	Dev    string
	Table  int
}

// RuleSet is everything the plugin installs in one pod netns, or everything
// of it found there.
type RuleSet struct {
	Tables  []Table
	IPRules []IPRule
	Routes  []Route
}

// Empty reports whether the set holds nothing.
func (r RuleSet) Empty() bool {
	return len(r.Tables) == 0 && len(r.IPRules) == 0 && len(r.Routes) == 0
}

// Build returns the capture rule set for mode in a pod with the given
// addresses. It touches no kernel.
func Build(mode constants.CaptureMode, pod Pod, opts Options) (RuleSet, error) {
	if _, err := ParseMode(string(mode)); err != nil || mode == "" {
		return RuleSet{}, fmt.Errorf("failed to build capture rules: unknown capture mode %q", mode)
	}
	fams := pod.Families()
	if len(fams) == 0 {
		return RuleSet{}, fmt.Errorf("failed to build capture rules: the pod has no IPv4 or IPv6 address")
	}
	var rs RuleSet
	for _, fam := range fams {
		chain := Chain{Name: ChainName, Hook: "output", Policy: "accept"}
		switch mode {
		case constants.CaptureTProxy:
			chain.Type, chain.Priority = "route", PriorityMangle
		case constants.CaptureRedirect:
			chain.Type, chain.Priority = "nat", PriorityDstNAT
		}
		// The proxy's own egress returns first, in both modes: without this
		// rule its forwarded traffic to a captured port would be captured
		// again, a loop (038 D2).
		chain.Rules = append(chain.Rules, Rule{Mark: constants.CapturePassthroughFwMark, Action: ActionAccept})
		for _, t := range []constants.Transport{constants.TCP, constants.UDP} {
			for _, port := range constants.CapturedPorts()[t] {
				r := Rule{L4Proto: protoNumber(t), DPort: port, Counter: opts.Counters}
				switch mode {
				case constants.CaptureTProxy:
					r.Action, r.Arg = ActionSetMark, constants.CaptureDivertFwMark
				case constants.CaptureRedirect:
					// The same port: the listener binds the dialled port,
					// which is not a free variable (ARCHITECTURE.md, "The
					// data path").
					r.Action, r.Arg = ActionRedirect, uint32(port)
				}
				chain.Rules = append(chain.Rules, r)
			}
		}
		rs.Tables = append(rs.Tables, Table{Family: fam, Name: TableName, Chains: []Chain{chain}})
		if mode == constants.CaptureTProxy {
			rs.IPRules = append(rs.IPRules, IPRule{
				Family:   fam,
				Priority: constants.CaptureRulePriority,
				Mark:     constants.CaptureDivertFwMark,
				Mask:     0xffffffff,
				Table:    constants.CaptureRouteTable,
			})
			rs.Routes = append(rs.Routes, Route{Family: fam, Type: "local", Dev: "lo", Table: constants.CaptureRouteTable})
		}
	}
	return rs, nil
}

func protoNumber(t constants.Transport) uint8 {
	if t == constants.TCP {
		return 6
	}
	return 17
}

func protoName(p uint8) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	}
	return fmt.Sprintf("%d", p)
}

// canonical returns a copy sorted the way Render and Items read it: by
// family, then name or priority, rules within a chain in chain order.
func (r RuleSet) canonical() RuleSet {
	out := RuleSet{
		Tables:  slices.Clone(r.Tables),
		IPRules: slices.Clone(r.IPRules),
		Routes:  slices.Clone(r.Routes),
	}
	slices.SortStableFunc(out.Tables, func(a, b Table) int {
		if a.Family != b.Family {
			return cmpStr(string(a.Family), string(b.Family))
		}
		return cmpStr(a.Name, b.Name)
	})
	slices.SortStableFunc(out.IPRules, func(a, b IPRule) int {
		if a.Family != b.Family {
			return cmpStr(string(a.Family), string(b.Family))
		}
		if a.Priority != b.Priority {
			return a.Priority - b.Priority
		}
		return cmpStr(ipRuleLine(a), ipRuleLine(b))
	})
	slices.SortStableFunc(out.Routes, func(a, b Route) int {
		if a.Family != b.Family {
			return cmpStr(string(a.Family), string(b.Family))
		}
		return cmpStr(routeLine(a), routeLine(b))
	})
	return out
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
