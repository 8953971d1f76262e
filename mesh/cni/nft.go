package cni

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The nftables register every expression here loads into and reads from.
const reg1 = 1

func nftFamily(f Family) (nftables.TableFamily, error) {
	switch f {
	case IPv4:
		return nftables.TableFamilyIPv4, nil
	case IPv6:
		return nftables.TableFamilyIPv6, nil
	}
	return 0, fmt.Errorf("unknown table family %q", f)
}

func familyOf(f nftables.TableFamily) Family {
	switch f {
	case nftables.TableFamilyIPv4:
		return IPv4
	case nftables.TableFamilyIPv6:
		return IPv6
	case nftables.TableFamilyINet:
		return "inet"
	}
	return Family(fmt.Sprintf("family-%d", f))
}

var hooks = map[string]nftables.ChainHook{
	"prerouting":  *nftables.ChainHookPrerouting,
	"input":       *nftables.ChainHookInput,
	"forward":     *nftables.ChainHookForward,
	"output":      *nftables.ChainHookOutput,
	"postrouting": *nftables.ChainHookPostrouting,
}

func hookName(h nftables.ChainHook) string {
	for n, v := range hooks {
		if v == h {
			return n
		}
	}
	return fmt.Sprintf("hook-%d", h)
}

// nftChain converts a built chain into the google/nftables object.
func nftChain(t *nftables.Table, c Chain) (*nftables.Chain, error) {
	h, ok := hooks[c.Hook]
	if !ok {
		return nil, fmt.Errorf("chain %s: unknown hook %q", c.Name, c.Hook)
	}
	policy := nftables.ChainPolicyAccept
	if c.Policy == "drop" {
		policy = nftables.ChainPolicyDrop
	}
	return &nftables.Chain{
		Name:     c.Name,
		Table:    t,
		Type:     nftables.ChainType(c.Type),
		Hooknum:  &h,
		Priority: nftables.ChainPriorityRef(nftables.ChainPriority(c.Priority)),
		Policy:   &policy,
	}, nil
}

// chainOf converts a chain listed back from the kernel.
func chainOf(c *nftables.Chain) Chain {
	out := Chain{Name: c.Name, Type: string(c.Type)}
	if c.Hooknum != nil {
		out.Hook = hookName(*c.Hooknum)
	}
	if c.Priority != nil {
		out.Priority = int32(*c.Priority)
	}
	if c.Policy != nil {
		out.Policy = "accept"
		if *c.Policy == nftables.ChainPolicyDrop {
			out.Policy = "drop"
		}
	}
	return out
}

// Exprs compiles a rule into nftables expressions, in the order nft itself
// would emit them for the rendered text.
func Exprs(r Rule) ([]expr.Any, error) {
	if r.Foreign != "" {
		return nil, fmt.Errorf("cannot compile a foreign rule (%s)", r.Foreign)
	}
	var out []expr.Any
	if r.Mark != 0 {
		out = append(out,
			&expr.Meta{Key: expr.MetaKeyMARK, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.NativeEndian.PutUint32(r.Mark)},
		)
	}
	if r.L4Proto != 0 {
		out = append(out,
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: []byte{r.L4Proto}},
		)
	}
	if r.DPort != 0 {
		if r.L4Proto == 0 {
			// th dport reads bytes 2-3 of whatever transport header is
			// there; without a protocol match it is meaningless.
			return nil, fmt.Errorf("rule matches dport %d without a transport protocol", r.DPort)
		}
		out = append(out,
			&expr.Payload{DestRegister: reg1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: reg1, Data: binaryutil.BigEndian.PutUint16(r.DPort)},
		)
	}
	if r.Counter {
		out = append(out, &expr.Counter{})
	}
	switch r.Action {
	case ActionAccept:
		out = append(out, &expr.Verdict{Kind: expr.VerdictAccept})
	case ActionSetMark:
		out = append(out,
			&expr.Immediate{Register: reg1, Data: binaryutil.NativeEndian.PutUint32(r.Arg)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg1},
		)
	case ActionRedirect:
		if r.Arg == 0 || r.Arg > 0xffff {
			return nil, fmt.Errorf("redirect to port %d is out of range", r.Arg)
		}
		out = append(out,
			&expr.Immediate{Register: reg1, Data: binaryutil.BigEndian.PutUint16(uint16(r.Arg))},
			&expr.Redir{RegisterProtoMin: reg1},
		)
	default:
		return nil, fmt.Errorf("rule has no action (%q)", r.Action)
	}
	return out, nil
}

// RuleOf decodes expressions listed back from the kernel into the rule
// vocabulary. Anything outside it comes back as a Foreign rule that names
// its expressions, so Verify can say what it found.
func RuleOf(es []expr.Any) Rule {
	var r Rule
	i := 0
	foreign := func() Rule { return Rule{Foreign: describe(es)} }
	for i < len(es) {
		switch e := es[i].(type) {
		case *expr.Meta:
			if e.SourceRegister || i+1 >= len(es) {
				return foreign()
			}
			c, ok := es[i+1].(*expr.Cmp)
			if !ok || c.Op != expr.CmpOpEq || c.Register != e.Register {
				return foreign()
			}
			switch {
			case e.Key == expr.MetaKeyMARK && len(c.Data) == 4 && r.Mark == 0:
				r.Mark = binaryutil.NativeEndian.Uint32(c.Data)
			case e.Key == expr.MetaKeyL4PROTO && len(c.Data) == 1 && r.L4Proto == 0:
				r.L4Proto = c.Data[0]
			default:
				return foreign()
			}
			i += 2
		case *expr.Payload:
			if i+1 >= len(es) || e.OperationType != expr.PayloadLoad || e.Base != expr.PayloadBaseTransportHeader || e.Offset != 2 || e.Len != 2 || r.DPort != 0 {
				return foreign()
			}
			c, ok := es[i+1].(*expr.Cmp)
			if !ok || c.Op != expr.CmpOpEq || c.Register != e.DestRegister || len(c.Data) != 2 {
				return foreign()
			}
			r.DPort = binary.BigEndian.Uint16(c.Data)
			i += 2
		case *expr.Counter:
			if r.Counter {
				return foreign()
			}
			r.Counter = true
			i++
		case *expr.Verdict:
			if e.Kind != expr.VerdictAccept || i != len(es)-1 {
				return foreign()
			}
			r.Action = ActionAccept
			i++
		case *expr.Immediate:
			if i+2 != len(es) {
				return foreign()
			}
			switch next := es[i+1].(type) {
			case *expr.Meta:
				if !next.SourceRegister || next.Key != expr.MetaKeyMARK || next.Register != e.Register || len(e.Data) != 4 {
					return foreign()
				}
				r.Action, r.Arg = ActionSetMark, binaryutil.NativeEndian.Uint32(e.Data)
			case *expr.Redir:
				if next.RegisterProtoMin != e.Register || len(e.Data) != 2 || (next.RegisterProtoMax != 0 && next.RegisterProtoMax != e.Register) || next.Flags&^unix.NF_NAT_RANGE_PROTO_SPECIFIED != 0 {
					return foreign()
				}
				r.Action, r.Arg = ActionRedirect, uint32(binary.BigEndian.Uint16(e.Data))
			default:
				return foreign()
			}
			i += 2
		default:
			return foreign()
		}
	}
	if r.Action == "" || (r.DPort != 0 && r.L4Proto == 0) {
		return foreign()
	}
	return r
}

func describe(es []expr.Any) string {
	if len(es) == 0 {
		return "(no expressions the library can decode)"
	}
	parts := make([]string, 0, len(es))
	for _, e := range es {
		name := strings.TrimPrefix(fmt.Sprintf("%T", e), "*expr.")
		parts = append(parts, fmt.Sprintf("%s%+v", strings.ToLower(name), strings.TrimPrefix(fmt.Sprintf("%+v", e), "&")))
	}
	return strings.Join(parts, " ")
}
