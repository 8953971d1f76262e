package proxytest

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/rigs/netns"
)

// MarkCounters are two nftables counters in a netns's output path: UDP
// packets to a port that carry a mark, and those that do not.
type MarkCounters struct {
	ns    *netns.NS
	table *nftables.Table
	chain *nftables.Chain
}

const markTable = "aether_proxytest"

// InstallMarkCounters adds an inet table to n (a rig namespace) with one
// output chain counting UDP to dport split by meta mark == mark.
func InstallMarkCounters(n *netns.NS, dport uint16, mark uint32) (*MarkCounters, error) {
	c, closeFn, err := conn(n)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	m := &MarkCounters{ns: n}
	m.table = c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: markTable})
	pol := nftables.ChainPolicyAccept
	m.chain = c.AddChain(&nftables.Chain{
		Name: "out", Table: m.table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookOutput, Priority: nftables.ChainPriorityFilter, Policy: &pol,
	})
	port := binary.BigEndian.AppendUint16(nil, dport)
	mk := binary.NativeEndian.AppendUint32(nil, mark)
	for _, op := range []expr.CmpOp{expr.CmpOpEq, expr.CmpOpNeq} {
		c.AddRule(&nftables.Rule{Table: m.table, Chain: m.chain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_UDP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: port},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: op, Register: 1, Data: mk},
			&expr.Counter{},
		}})
	}
	if err := c.Flush(); err != nil {
		return nil, fmt.Errorf("failed to install mark counters in netns %q: %w", n.Name, err)
	}
	return m, nil
}

// Read returns the marked and unmarked packet counts.
func (m *MarkCounters) Read() (marked, unmarked uint64, err error) {
	c, closeFn, err := conn(m.ns)
	if err != nil {
		return 0, 0, err
	}
	defer closeFn()
	rules, err := c.GetRules(m.table, m.chain)
	if err != nil {
		return 0, 0, fmt.Errorf("failed to list mark counters in netns %q: %w", m.ns.Name, err)
	}
	if len(rules) != 2 {
		return 0, 0, fmt.Errorf("netns %q: %d mark counter rules listed back, want 2", m.ns.Name, len(rules))
	}
	var got [2]uint64
	for i, r := range rules {
		for _, e := range r.Exprs {
			if ctr, ok := e.(*expr.Counter); ok {
				got[i] = ctr.Packets
			}
		}
	}
	return got[0], got[1], nil
}

func conn(n *netns.NS) (*nftables.Conn, func(), error) {
	h, err := vnetns.GetFromPath(n.Path)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open netns %q: %w", n.Path, err)
	}
	c, err := nftables.New(nftables.WithNetNSFd(int(h)), nftables.AsLasting())
	if err != nil {
		h.Close()
		return nil, nil, fmt.Errorf("failed to open nftables in netns %q: %w", n.Name, err)
	}
	return c, func() { _ = c.CloseLasting(); h.Close() }, nil
}
