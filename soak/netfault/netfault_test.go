package netfault

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := netns.LeakCheck(); err != nil {
		fmt.Fprintln(os.Stderr, "leak check:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func TestNetemCheckRefusesWhatNetemWouldNotTake(t *testing.T) {
	for _, n := range []Netem{
		{LossPct: -1}, {LossPct: 101}, {DuplicatePct: 200},
		{Delay: 10 * time.Millisecond, Jitter: 20 * time.Millisecond},
		{ReorderPct: 10},
	} {
		if err := n.Check(); err == nil {
			t.Errorf("Check(%+v) = nil, want a refusal", n)
		}
	}
	if err := (Netem{LossPct: 3, Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond, ReorderPct: 10, DuplicatePct: 2}).Check(); err != nil {
		t.Errorf("a loss, delay, reorder and duplicate netem is refused: %v", err)
	}
}

// pair is two namespaces joined by a veth, va (10.244.9.1) in a and vb
// (10.244.9.2) in b: the shape of a node's uplink in the embedded cluster.
type pair struct {
	a, b   *netns.NS
	va, vb Link
}

func newPair(t *testing.T) pair {
	t.Helper()
	privileged.Require(t, privileged.NetAdmin, privileged.SysAdmin)
	t.Cleanup(func() {
		if err := netns.Cleanup(); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	a, err := netns.Create("nf-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := netns.Create("nf-b")
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	for _, x := range []struct {
		ns   *netns.NS
		link string
		p    string
	}{{a, "va", "10.244.9.1/24"}, {b, "vb", "10.244.9.2/24"}} {
		if err := netns.AddAddr(x.ns, x.link, netip.MustParsePrefix(x.p)); err != nil {
			t.Fatal(err)
		}
	}
	return pair{a: a, b: b, va: Link{NS: a, Name: "va"}, vb: Link{NS: b, Name: "vb"}}
}

// datagrams is how many datagrams each measurement sends: at 5% loss
// the chance that none is lost is below e^-100.
const datagrams = 2000

// lost sends datagrams numbered datagrams from a to b and returns how
// many never arrived (and how many arrived twice). The receiver's buffer holds them all, and the
// sender paces itself, so the control (no fault) loses none: a loss is the
// link's.
func (p pair) lost(t *testing.T) int {
	t.Helper()
	n, _ := p.send(t)
	return n
}

func (p pair) send(t *testing.T) (lost, dups int) {
	t.Helper()
	dst := netip.MustParseAddrPort("10.244.9.2:19090")
	rx, err := transparent.ListenUDP(p.b.Path, dst, transparent.Options{RecvBuf: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := transparent.DialUDP(p.a.Path, netip.AddrPort{}, dst, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	got := make(chan map[uint32]int, 1)
	go func() {
		seen := map[uint32]int{}
		buf := make([]byte, 64)
		for {
			// The last datagram sent arrives within the read deadline or
			// counts as lost; nothing is asserted on time.
			_ = rx.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, _, err := rx.ReadDatagram(buf)
			if err != nil {
				got <- seen
				return
			}
			if n >= 4 {
				seen[binary.BigEndian.Uint32(buf)]++
			}
		}
	}()
	msg := make([]byte, 32)
	for i := range uint32(datagrams) {
		binary.BigEndian.PutUint32(msg, i)
		if _, err := tx.Write(msg); err != nil {
			t.Fatalf("datagram %d: %v", i, err)
		}
		if i%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}
	seen := <-got
	for k, n := range seen {
		if k >= datagrams {
			t.Fatalf("received datagram %d, never sent", k)
		}
		dups += n - 1
	}
	return datagrams - len(seen), dups
}

// engine is one way of putting a netem fault on links, and how to see
// what it left behind.
type engine struct {
	name  string
	apply func(Netem, ...Link) (func() error, error)
	left  func(Link) ([]string, error)
}

var engines = []engine{{"netem", ApplyNetem, Netems}, {"nftables", ApplyFilter, Filters}}

// TestLossDropsDatagramsAndIsRemoved, for each engine: with no fault the
// link loses none of 2,000 datagrams (the control); with loss 5% on both
// ends it loses some, counted by the receiver; after the undo nothing of
// the fault is left on either end and the link loses none again. A kernel
// without netem skips the netem engine and says so; the nftables engine
// runs on every kernel with nftables.
func TestLossDropsDatagramsAndIsRemoved(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			p := newPair(t)
			if n := p.lost(t); n != 0 {
				t.Fatalf("control: the link lost %d of %d datagrams without any fault: broken rig", n, datagrams)
			}
			undo, err := e.apply(Netem{LossPct: 5}, p.va, p.vb)
			if errors.Is(err, ErrNoNetem) {
				t.Skipf("%v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			// Removed even if an assertion below stops the test.
			t.Cleanup(func() { _ = undo() })
			for _, l := range []Link{p.va, p.vb} {
				if q, err := e.left(l); err != nil || len(q) != 1 {
					t.Fatalf("%s faults on %s while the fault holds: %v (%v), want one", e.name, l, q, err)
				}
			}
			n := p.lost(t)
			t.Logf("%s loss 5%%: %d of %d datagrams lost", e.name, n, datagrams)
			// Each datagram crosses one fault (va's egress), so about 100
			// are lost; all of them lost would be a broken link, not a loss
			// rate.
			if n == 0 || n > datagrams/2 {
				t.Fatalf("%s loss 5%%: %d of %d datagrams lost, want some and fewer than half", e.name, n, datagrams)
			}
			if err := undo(); err != nil {
				t.Fatal(err)
			}
			assertClean(t, p.va, p.vb)
			if n := p.lost(t); n != 0 {
				t.Fatalf("after the undo the link still lost %d of %d datagrams", n, datagrams)
			}
		})
	}
}

// TestDuplicateSendsDatagramsTwice, for each engine: duplication 5%
// delivers some datagrams twice (the control, no fault, delivers each
// once, as TestLossDropsDatagramsAndIsRemoved's control shows), and loses
// none.
func TestDuplicateSendsDatagramsTwice(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			p := newPair(t)
			if _, d := p.send(t); d != 0 {
				t.Fatalf("control: %d datagrams arrived twice without any fault: broken rig", d)
			}
			undo, err := e.apply(Netem{DuplicatePct: 5}, p.va)
			if errors.Is(err, ErrNoNetem) {
				t.Skipf("%v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = undo() })
			lost, dups := p.send(t)
			t.Logf("%s duplicate 5%%: %d of %d datagrams arrived twice, %d lost", e.name, dups, datagrams, lost)
			if dups == 0 || dups > datagrams/2 || lost != 0 {
				t.Fatalf("%s duplicate 5%%: %d duplicates and %d lost of %d, want some duplicates and no loss", e.name, dups, lost, datagrams)
			}
			if err := undo(); err != nil {
				t.Fatal(err)
			}
			assertClean(t, p.va)
		})
	}
}

// TestPartitionAndFlapLoseEverythingUntilUndone: netem loss 100% and the
// far end taken down each lose every datagram, and their undos give the
// link back whole.
func TestPartitionAndFlapLoseEverythingUntilUndone(t *testing.T) {
	p := newPair(t)
	for _, f := range []struct {
		name  string
		apply func() (func() error, error)
	}{
		{"partition (loss 100%)", func() (func() error, error) {
			undo, _, engine, err := Impair(Netem{LossPct: 100}, p.va, p.vb)
			t.Logf("partition by %s", engine)
			return undo, err
		}},
		{"link down (b's end)", func() (func() error, error) { return Down(p.vb) }},
	} {
		undo, err := f.apply()
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		t.Cleanup(func() { _ = undo() })
		if n := p.lost(t); n != datagrams {
			t.Errorf("%s: %d of %d datagrams lost, want all", f.name, n, datagrams)
		}
		if err := undo(); err != nil {
			t.Fatalf("%s: undo: %v", f.name, err)
		}
		if up, err := IsUp(p.vb); err != nil || !up {
			t.Fatalf("%s: vb up after the undo = %v (%v)", f.name, up, err)
		}
		assertClean(t, p.va, p.vb)
		if n := p.lost(t); n != 0 {
			t.Errorf("%s: after the undo %d of %d datagrams lost, want none", f.name, n, datagrams)
		}
	}
}

// TestHalfAppliedFaultIsUndone, for each engine: a fault whose second
// link does not exist fails naming it and leaves nothing on the first.
func TestHalfAppliedFaultIsUndone(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			p := newPair(t)
			_, err := e.apply(Netem{LossPct: 5}, p.va, Link{NS: p.b, Name: "nosuch0"})
			if errors.Is(err, ErrNoNetem) {
				t.Skipf("%v", err)
			}
			if err == nil || !strings.Contains(err.Error(), "nosuch0") {
				t.Fatalf("a fault on a missing link: %v, want an error naming it", err)
			}
			assertClean(t, p.va)
		})
	}
}

// TestNetemRefusesALinkWithItsOwnQdisc: a link already carrying a root
// qdisc is refused, so the undo never deletes what it did not add.
func TestNetemRefusesALinkWithItsOwnQdisc(t *testing.T) {
	p := newPair(t)
	undo, err := ApplyNetem(Netem{LossPct: 1}, p.va)
	if errors.Is(err, ErrNoNetem) {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = undo() })
	if _, err := ApplyNetem(Netem{LossPct: 2}, p.va); err == nil || !strings.Contains(err.Error(), "already has root qdisc") {
		t.Fatalf("a second netem on va: %v, want a refusal", err)
	}
	if q, _ := Netems(p.va); len(q) != 1 {
		t.Fatalf("netems on va after the refusal: %v, want the first one only", q)
	}
	if err := errors.Join(undo(), undo()); err != nil {
		t.Fatalf("undo twice: %v", err)
	}
	assertClean(t, p.va)
}

// assertClean fails unless no fault of either engine is left on links.
func assertClean(t *testing.T, links ...Link) {
	t.Helper()
	for _, l := range links {
		for _, e := range engines {
			q, err := e.left(l)
			if err != nil {
				t.Fatal(err)
			}
			if len(q) > 0 {
				t.Fatalf("%s still has %s after the undo", l, strings.Join(slices.Sorted(slices.Values(q)), ", "))
			}
		}
	}
}
