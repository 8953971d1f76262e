package run

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/soak/netfault"
)

// TestHoldFaultRemovesItWhenTheStepIsCut: a fault step stopped a moment
// into its hold (Ctrl-C) still removes its fault: no netem qdisc and no
// nftables fault table is left on either end, and a flapped link is up.
// The witness that the fault was there: it is listed while it holds.
func TestHoldFaultRemovesItWhenTheStepIsCut(t *testing.T) {
	privileged.Require(t, privileged.NetAdmin, privileged.SysAdmin)
	t.Cleanup(func() {
		if err := netns.Cleanup(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	a, err := netns.Create("hf-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := netns.Create("hf-b")
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Veth(a, "eth0", b, "n1"); err != nil {
		t.Fatal(err)
	}
	links := []netfault.Link{{NS: a, Name: "eth0"}, {NS: b, Name: "n1"}}
	left := func() int {
		n := 0
		for _, l := range links {
			q, err := netfault.Netems(l)
			if err != nil {
				t.Fatal(err)
			}
			f, err := netfault.Filters(l)
			if err != nil {
				t.Fatal(err)
			}
			n += len(q) + len(f)
		}
		return n
	}
	for _, k := range NetworkKinds() {
		s := Step{Kind: k, Node: "node-a", Fault: Fault{Hold: 4 * time.Second, Allowance: time.Second, Netem: netfault.Netem{LossPct: 3, DuplicatePct: 2}}}
		if k == Partition {
			s.Fault.Netem = netfault.Netem{LossPct: 100}
		}
		if k == LinkFlap {
			s.Fault.Netem = netfault.Netem{}
		}
		ctx, cancel := context.WithCancel(context.Background())
		seen := make(chan bool, 1)
		go func() {
			time.Sleep(300 * time.Millisecond)
			up, _ := netfault.IsUp(links[1])
			seen <- left() > 0 || !up
			cancel()
		}()
		_, ft, err := holdFault(ctx, s, links, time.Now())
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s cut short: %v, want context.Canceled", k, err)
		}
		if !<-seen {
			t.Fatalf("%s: nothing of the fault was on the links while it held", k)
		}
		if n := left(); n != 0 {
			t.Fatalf("%s: %d fault(s) left on the links after the cut step", k, n)
		}
		if up, err := netfault.IsUp(links[1]); err != nil || !up {
			t.Fatalf("%s: the bridge's end is not up after the cut step (%v)", k, err)
		}
		if ft.Removed.Before(ft.Applied) {
			t.Fatalf("%s: removed %s before applied %s", k, ft.Removed, ft.Applied)
		}
	}
}
