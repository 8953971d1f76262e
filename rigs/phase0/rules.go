package phase0

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/netns"
)

// Ruleset is one nftables table (family ip) the rig installs in a namespace.
// It is the rig's own, deliberately independent of the CNI's rule builder:
// Phase 0 re-establishes the kernel facts the product rests on, so it must
// not inherit the product's mistakes.
type Ruleset struct {
	Table  string
	Chains []Chain
}

// Chain is a base chain and its rules, in order.
type Chain struct {
	Name     string
	Type     nftables.ChainType
	Hook     nftables.ChainHook
	Priority nftables.ChainPriority
	Rules    [][]expr.Any
}

// rigTable is the table name the rig uses in every namespace it programs.
const rigTable = "aether_phase0"

// DivertRuleset is mark-and-divert as ARCHITECTURE.md states it ("The data
// path"): a route-type output chain (the only hook where a mark change
// re-routes locally originated packets) returns early for the passthrough
// mark and marks udp dport port with the divert mark. The ip rule / local
// route pair that turns the mark into local delivery is installed by
// InstallDivertRoute.
func DivertRuleset(port uint16) Ruleset {
	return Ruleset{Table: rigTable, Chains: []Chain{{
		Name:     "divert",
		Type:     nftables.ChainTypeRoute,
		Hook:     *nftables.ChainHookOutput,
		Priority: *nftables.ChainPriorityMangle,
		Rules: [][]expr.Any{
			append(markEquals(constants.CapturePassthroughFwMark), &expr.Verdict{Kind: expr.VerdictReturn}),
			append(udpDport(port),
				&expr.Counter{},
				&expr.Immediate{Register: 1, Data: binaryutil.NativeEndian.PutUint32(constants.CaptureDivertFwMark)},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
			),
		},
	}}}
}

// RedirectRuleset is the control C2 needs: a nat output REDIRECT of udp
// dport port, which rewrites the destination to 127.0.0.1. The counter sits
// before the redirect on purpose: redirect is terminal, and the seed's first
// run lost C2 to a statement placed after it.
func RedirectRuleset(port uint16) Ruleset {
	return Ruleset{Table: rigTable, Chains: []Chain{{
		Name:     "redirect",
		Type:     nftables.ChainTypeNAT,
		Hook:     *nftables.ChainHookOutput,
		Priority: *nftables.ChainPriorityNATDest,
		Rules: [][]expr.Any{
			append(udpDport(port), &expr.Counter{}, &expr.Redir{}),
		},
	}}}
}

// MaskedDropRuleset is a node-like output filter that drops every packet
// whose mark matches m (mark & m.Mask == m.Value), the shape of kube-proxy's
// KUBE-FIREWALL drop rule.
func MaskedDropRuleset(m constants.Mark) Ruleset {
	return Ruleset{Table: rigTable, Chains: []Chain{{
		Name:     "firewall",
		Type:     nftables.ChainTypeFilter,
		Hook:     *nftables.ChainHookOutput,
		Priority: *nftables.ChainPriorityFilter,
		Rules: [][]expr.Any{{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: binaryutil.NativeEndian.PutUint32(m.Mask), Xor: binaryutil.NativeEndian.PutUint32(0)},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(m.Value)},
			&expr.Counter{},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}},
	}}}
}

func markEquals(mark uint32) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.NativeEndian.PutUint32(mark)},
	}
}

func udpDport(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

// withNft runs fn with an nftables connection bound to the namespace.
func withNft(n *netns.NS, fn func(*nftables.Conn) error) error {
	h, err := vnetns.GetFromPath(n.Path)
	if err != nil {
		return fmt.Errorf("failed to open netns %q: %w", n.Path, err)
	}
	defer h.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(h)))
	if err != nil {
		return fmt.Errorf("failed to open nftables in netns %q: %w", n.Name, err)
	}
	return fn(c)
}

// Install adds the ruleset to the namespace in one transaction and lists it
// back; a rule the kernel refused or altered is an error, and the table is
// removed again so no half-installed ruleset is ever measured.
func Install(n *netns.NS, rs Ruleset) error {
	err := withNft(n, func(c *nftables.Conn) error {
		t := c.AddTable(&nftables.Table{Name: rs.Table, Family: nftables.TableFamilyIPv4})
		for _, ch := range rs.Chains {
			policy := nftables.ChainPolicyAccept
			nc := c.AddChain(&nftables.Chain{Name: ch.Name, Table: t, Type: ch.Type,
				Hooknum: nftables.ChainHookRef(ch.Hook), Priority: nftables.ChainPriorityRef(ch.Priority), Policy: &policy})
			for _, r := range ch.Rules {
				c.AddRule(&nftables.Rule{Table: t, Chain: nc, Exprs: r})
			}
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("failed to install nftables table %q in netns %q: %w", rs.Table, n.Name, err)
		}
		return nil
	})
	if err == nil {
		err = Verify(n, rs)
	}
	if err != nil {
		if rerr := Remove(n, rs.Table); rerr != nil {
			return errors.Join(err, rerr)
		}
		return err
	}
	return nil
}

// Remove deletes the rig's table from the namespace; a missing table is not
// an error.
func Remove(n *netns.NS, table string) error {
	return withNft(n, func(c *nftables.Conn) error {
		t, err := findTable(c, n, table)
		if err != nil || t == nil {
			return err
		}
		c.DelTable(t)
		if err := c.Flush(); err != nil {
			return fmt.Errorf("failed to delete nftables table %q in netns %q: %w", table, n.Name, err)
		}
		return nil
	})
}

// findTable returns the ip table named table, or nil when there is none.
func findTable(c *nftables.Conn, n *netns.NS, table string) (*nftables.Table, error) {
	ts, err := c.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return nil, fmt.Errorf("failed to list nftables tables in netns %q: %w", n.Name, err)
	}
	for _, t := range ts {
		if t.Name == table {
			return t, nil
		}
	}
	return nil, nil
}

// VerifyNoTable fails if the namespace holds an nftables table ip named
// table, whatever is in it.
func VerifyNoTable(n *netns.NS, table string) error {
	return withNft(n, func(c *nftables.Conn) error {
		t, err := findTable(c, n, table)
		if err != nil {
			return err
		}
		if t != nil {
			return fmt.Errorf("netns %q already holds nftables table ip %q", n.Name, table)
		}
		return nil
	})
}

// Verify lists the namespace's nftables state back and compares it with rs:
// the table exists, holds exactly rs's chains with their type, hook and
// priority, and each chain holds exactly rs's rules. It is the check the
// seed's first run lacked when C2 silently had no rule.
func Verify(n *netns.NS, rs Ruleset) error {
	return withNft(n, func(c *nftables.Conn) error {
		t, err := c.ListTableOfFamily(rs.Table, nftables.TableFamilyIPv4)
		if err != nil {
			return fmt.Errorf("nftables table ip %q is not installed in netns %q: %w", rs.Table, n.Name, err)
		}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyIPv4)
		if err != nil {
			return fmt.Errorf("failed to list nftables chains in netns %q: %w", n.Name, err)
		}
		got := map[string]*nftables.Chain{}
		for _, ch := range chains {
			if ch.Table.Name == rs.Table {
				got[ch.Name] = ch
			}
		}
		var diffs []string
		for _, want := range rs.Chains {
			ch, ok := got[want.Name]
			if !ok {
				diffs = append(diffs, fmt.Sprintf("chain %q is missing", want.Name))
				continue
			}
			delete(got, want.Name)
			if ch.Type != want.Type || ch.Hooknum == nil || *ch.Hooknum != want.Hook || ch.Priority == nil || *ch.Priority != want.Priority {
				diffs = append(diffs, fmt.Sprintf("chain %q is %s, want %s", want.Name, chainHeader(ch), wantHeader(want)))
				continue
			}
			rules, err := c.GetRules(t, ch)
			if err != nil {
				return fmt.Errorf("failed to list rules of chain %q in netns %q: %w", want.Name, n.Name, err)
			}
			if len(rules) != len(want.Rules) {
				diffs = append(diffs, fmt.Sprintf("chain %q holds %d rule(s), want %d:\n%s", want.Name, len(rules), len(want.Rules), listedRules(rules)))
				continue
			}
			for i, r := range rules {
				if !sameExprs(r.Exprs, want.Rules[i]) {
					diffs = append(diffs, fmt.Sprintf("chain %q rule %d is %q, want %q", want.Name, i, RenderRule(r.Exprs), RenderRule(want.Rules[i])))
				}
			}
		}
		for name := range got {
			diffs = append(diffs, fmt.Sprintf("chain %q is not part of the intended ruleset", name))
		}
		if len(diffs) > 0 {
			return fmt.Errorf("nftables table ip %q in netns %q differs from what the rig meant to install: %s", rs.Table, n.Name, strings.Join(diffs, "; "))
		}
		return nil
	})
}

// sameExprs compares a listed rule with an intended one. A counter's value
// is state, not configuration, so counters compare by presence.
func sameExprs(got, want []expr.Any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if _, ok := want[i].(*expr.Counter); ok {
			if _, ok := got[i].(*expr.Counter); !ok {
				return false
			}
			continue
		}
		if !reflect.DeepEqual(got[i], want[i]) {
			return false
		}
	}
	return true
}

// Packets sums the packet counters of a chain's rules: how many packets the
// counted rule of that chain matched so far.
func Packets(n *netns.NS, table, chain string) (uint64, error) {
	var total uint64
	err := withNft(n, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}
		rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
		if err != nil {
			return fmt.Errorf("failed to read counters of chain %q in netns %q: %w", chain, n.Name, err)
		}
		found := false
		for _, r := range rules {
			for _, e := range r.Exprs {
				if ctr, ok := e.(*expr.Counter); ok {
					total += ctr.Packets
					found = true
				}
			}
		}
		if !found {
			return fmt.Errorf("chain %q in netns %q has no counter", chain, n.Name)
		}
		return nil
	})
	return total, err
}

func wantHeader(c Chain) string {
	return fmt.Sprintf("type %s hook %s priority %d", c.Type, hookName(c.Hook), c.Priority)
}

func chainHeader(c *nftables.Chain) string {
	hook, prio := "none", "none"
	if c.Hooknum != nil {
		hook = hookName(*c.Hooknum)
	}
	if c.Priority != nil {
		prio = fmt.Sprint(*c.Priority)
	}
	return fmt.Sprintf("type %s hook %s priority %s", c.Type, hook, prio)
}

func hookName(h nftables.ChainHook) string {
	switch h {
	case *nftables.ChainHookPrerouting:
		return "prerouting"
	case *nftables.ChainHookInput:
		return "input"
	case *nftables.ChainHookForward:
		return "forward"
	case *nftables.ChainHookOutput:
		return "output"
	case *nftables.ChainHookPostrouting:
		return "postrouting"
	}
	return fmt.Sprintf("hook(%d)", h)
}

func listedRules(rules []*nftables.Rule) string {
	var b strings.Builder
	for i, r := range rules {
		fmt.Fprintf(&b, "  %d: %s\n", i, RenderRule(r.Exprs))
	}
	return b.String()
}

// Render prints a ruleset in nft's list syntax, for error messages and the
// golden file a reviewer reads.
func Render(rs Ruleset) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table ip %s {\n", rs.Table)
	for _, c := range rs.Chains {
		fmt.Fprintf(&b, "\tchain %s {\n\t\t%s; policy accept;\n", c.Name, wantHeader(c))
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "\t\t%s\n", RenderRule(r))
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}

// RenderRule prints the expressions the rig uses in nft syntax, one
// statement per load/compare pair; anything else prints as its Go value so
// an unexpected listed expression is still visible in a diff.
func RenderRule(es []expr.Any) string {
	var out []string
	var reg string // what register 1 holds, in nft words
	for _, e := range es {
		switch x := e.(type) {
		case *expr.Meta:
			if x.SourceRegister {
				out = append(out, fmt.Sprintf("meta %s set %s", metaName(x.Key), reg))
			} else {
				reg = "meta " + metaName(x.Key)
			}
		case *expr.Payload:
			if x.Base == expr.PayloadBaseTransportHeader && x.Offset == 2 && x.Len == 2 {
				reg = "th dport"
			} else {
				reg = fmt.Sprintf("@%d,%d,%d", x.Base, x.Offset*8, x.Len*8)
			}
		case *expr.Bitwise:
			reg = fmt.Sprintf("%s & %#x", reg, hostUint(x.Mask))
		case *expr.Cmp:
			op := "=="
			if x.Op != expr.CmpOpEq {
				op = fmt.Sprintf("op(%d)", x.Op)
			}
			out = append(out, fmt.Sprintf("%s %s %s", reg, op, cmpValue(reg, x.Data)))
		case *expr.Immediate:
			reg = fmt.Sprintf("%#x", hostUint(x.Data))
		case *expr.Counter:
			out = append(out, "counter")
		case *expr.Redir:
			out = append(out, "redirect")
		case *expr.Verdict:
			out = append(out, verdictName(x.Kind))
		default:
			out = append(out, fmt.Sprintf("%#v", e))
		}
	}
	return strings.Join(out, " ")
}

func metaName(k expr.MetaKey) string {
	switch k {
	case expr.MetaKeyMARK:
		return "mark"
	case expr.MetaKeyL4PROTO:
		return "l4proto"
	}
	return fmt.Sprintf("key(%d)", k)
}

func cmpValue(reg string, b []byte) string {
	switch {
	case reg == "th dport" && len(b) == 2:
		return fmt.Sprint(binary.BigEndian.Uint16(b))
	case reg == "meta l4proto" && len(b) == 1 && b[0] == unix.IPPROTO_UDP:
		return "udp"
	case len(b) == 4:
		return fmt.Sprintf("%#x", hostUint(b))
	}
	return fmt.Sprintf("%x", b)
}

// hostUint reads a host-order register value (marks are in host order).
func hostUint(b []byte) uint32 {
	if len(b) != 4 {
		return 0
	}
	return binaryutil.NativeEndian.Uint32(b)
}

func verdictName(k expr.VerdictKind) string {
	switch k {
	case expr.VerdictReturn:
		return "return"
	case expr.VerdictDrop:
		return "drop"
	case expr.VerdictAccept:
		return "accept"
	}
	return fmt.Sprintf("verdict(%d)", k)
}
