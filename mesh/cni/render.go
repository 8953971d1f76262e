package cni

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// Render writes the rule set in a stable, nft-like text form: the tables as
// `nft list table` shows them, then the ip rules and routes as `ip rule` and
// `ip route` show them. A built set and the same set listed back from the
// kernel render identically; that is what the golden files and Verify rely
// on, so nothing the kernel assigns (handles, counter values) is rendered.
func Render(rs RuleSet) string {
	rs = rs.canonical()
	var b strings.Builder
	for _, fam := range familiesOf(rs) {
		for _, t := range rs.Tables {
			if t.Family != fam {
				continue
			}
			fmt.Fprintf(&b, "table %s %s {\n", t.Family, t.Name)
			for i, c := range t.Chains {
				if i > 0 {
					b.WriteString("\n")
				}
				fmt.Fprintf(&b, "\tchain %s {\n", c.Name)
				if h := chainHeader(c); h != "" {
					fmt.Fprintf(&b, "\t\t%s\n", h)
				}
				for _, r := range c.Rules {
					fmt.Fprintf(&b, "\t\t%s\n", ruleLine(r))
				}
				b.WriteString("\t}\n")
			}
			b.WriteString("}\n")
		}
		for _, r := range rs.IPRules {
			if r.Family == fam {
				b.WriteString(ipRuleLine(r) + "\n")
			}
		}
		for _, r := range rs.Routes {
			if r.Family == fam {
				b.WriteString(routeLine(r) + "\n")
			}
		}
	}
	return b.String()
}

func familiesOf(rs RuleSet) []Family {
	seen := map[Family]bool{}
	for _, t := range rs.Tables {
		seen[t.Family] = true
	}
	for _, r := range rs.IPRules {
		seen[r.Family] = true
	}
	for _, r := range rs.Routes {
		seen[r.Family] = true
	}
	var out []Family
	for _, f := range []Family{IPv4, IPv6} {
		if seen[f] {
			out = append(out, f)
			delete(seen, f)
		}
	}
	for f := range seen {
		out = append(out, f)
	}
	return out
}

func chainHeader(c Chain) string {
	if c.Type == "" && c.Hook == "" {
		return "" // a regular chain
	}
	prio := fmt.Sprint(c.Priority)
	switch {
	case c.Priority == PriorityMangle:
		prio = "mangle"
	case c.Priority == PriorityDstNAT && c.Type == "nat":
		prio = "dstnat"
	}
	return fmt.Sprintf("type %s hook %s priority %s; policy %s;", c.Type, c.Hook, prio, c.Policy)
}

func ruleLine(r Rule) string {
	if r.Foreign != "" {
		return "# not written by aether: " + r.Foreign
	}
	var parts []string
	if r.Mark != 0 {
		parts = append(parts, fmt.Sprintf("meta mark 0x%08x", r.Mark))
	}
	if r.L4Proto != 0 {
		parts = append(parts, "meta l4proto "+protoName(r.L4Proto))
	}
	if r.DPort != 0 {
		parts = append(parts, fmt.Sprintf("th dport %d", r.DPort))
	}
	if r.Counter {
		parts = append(parts, "counter")
	}
	switch r.Action {
	case ActionAccept:
		parts = append(parts, "accept")
	case ActionSetMark:
		parts = append(parts, fmt.Sprintf("meta mark set 0x%08x", r.Arg))
	case ActionRedirect:
		parts = append(parts, fmt.Sprintf("redirect to :%d", r.Arg))
	}
	return strings.Join(parts, " ")
}

func ipCmd(f Family) string {
	if f == IPv6 {
		return "ip -6"
	}
	return "ip"
}

func ipRuleLine(r IPRule) string {
	s := fmt.Sprintf("%s rule %d: from all", ipCmd(r.Family), r.Priority)
	if r.Mark != 0 || r.Mask != 0 {
		s += fmt.Sprintf(" fwmark %#x", r.Mark)
		if r.Mask != 0xffffffff {
			s += fmt.Sprintf("/%#x", r.Mask)
		}
	}
	if r.Other != "" {
		s += " " + r.Other
	}
	return s + fmt.Sprintf(" lookup %d", r.Table)
}

func routeLine(r Route) string {
	dst := "default"
	if r.Dst.IsValid() && r.Dst.Bits() != 0 {
		dst = r.Dst.String()
	}
	return fmt.Sprintf("%s route %s %s dev %s table %d", ipCmd(r.Family), r.Type, dst, r.Dev, r.Table)
}

// Items flattens the rule set into one self-describing line per object, in
// canonical order: what Drift compares and names.
func Items(rs RuleSet) []string {
	rs = rs.canonical()
	var out []string
	for _, t := range rs.Tables {
		out = append(out, fmt.Sprintf("table %s %s", t.Family, t.Name))
		for _, c := range t.Chains {
			where := fmt.Sprintf("%s %s %s", t.Family, t.Name, c.Name)
			out = append(out, fmt.Sprintf("chain %s {%s}", where, chainHeader(c)))
			for _, r := range c.Rules {
				out = append(out, fmt.Sprintf("rule %s: %s", where, ruleLine(r)))
			}
		}
	}
	for _, r := range rs.IPRules {
		out = append(out, ipRuleLine(r))
	}
	for _, r := range rs.Routes {
		out = append(out, routeLine(r))
	}
	return out
}

// Drift is the difference between a built rule set and what a namespace
// holds. The zero value means no difference.
type Drift struct {
	// Missing are built objects the namespace lacks (or holds out of order).
	Missing []string
	// Unexpected are objects the namespace holds that the build lacks.
	Unexpected []string
	// Diff is the unified diff of the two renderings.
	Diff string
}

// None reports whether there is no drift.
func (d Drift) None() bool { return len(d.Missing) == 0 && len(d.Unexpected) == 0 }

func (d Drift) String() string {
	if d.None() {
		return "no drift"
	}
	var parts []string
	if len(d.Missing) > 0 {
		parts = append(parts, fmt.Sprintf("missing %q", d.Missing))
	}
	if len(d.Unexpected) > 0 {
		parts = append(parts, fmt.Sprintf("unexpected %q", d.Unexpected))
	}
	return strings.Join(parts, "; ")
}

// Compare returns what got lacks or adds relative to want. Order within a
// chain matters (the passthrough accept must come first), so a reordered
// rule shows up as both missing and unexpected.
func Compare(want, got RuleSet) Drift {
	a, b := Items(want), Items(got)
	var d Drift
	m := difflib.NewMatcher(a, b)
	for _, op := range m.GetOpCodes() {
		switch op.Tag {
		case 'd':
			d.Missing = append(d.Missing, a[op.I1:op.I2]...)
		case 'i':
			d.Unexpected = append(d.Unexpected, b[op.J1:op.J2]...)
		case 'r':
			d.Missing = append(d.Missing, a[op.I1:op.I2]...)
			d.Unexpected = append(d.Unexpected, b[op.J1:op.J2]...)
		}
	}
	if !d.None() {
		d.Diff = UnifiedDiff("built", "installed", Render(want), Render(got))
	}
	return d
}

// UnifiedDiff renders a unified diff of two texts.
func UnifiedDiff(fromName, toName, from, to string) string {
	s, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A:        difflib.SplitLines(from),
		B:        difflib.SplitLines(to),
		FromFile: fromName,
		ToFile:   toName,
		Context:  3,
	})
	if err != nil {
		return fmt.Sprintf("(failed to render a diff: %v)", err)
	}
	return s
}
