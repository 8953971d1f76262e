package run

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/soak/netfault"
)

func budget(d time.Duration, seed uint64) Budget {
	return Budget{Duration: d, Tick: time.Second, Warmup: 3 * time.Second, SwitchCost: 4 * time.Second, ChaosCost: 6 * time.Second,
		Nodes: []string{"node-a", "node-b"}, Chaos: []StepKind{AgentRestart, PodChurn, ProxyHotRestart, AgentInHotRestart}, Network: NetworkKinds(), Seed: seed}
}

func TestPlanIsABBAWithASwitchAndWarmupBeforeEveryChange(t *testing.T) {
	steps, err := Plan(budget(10*time.Minute, 7))
	if err != nil {
		t.Fatal(err)
	}
	var protos []string
	proto := ""
	for i, s := range steps {
		switch s.Kind {
		case Measure:
			if proto != "" && s.Protocol != proto {
				t.Fatalf("step %d: window %s follows a %s window with no switch between", i, s.Protocol, proto)
			}
			protos = append(protos, s.Protocol)
			proto = s.Protocol
		case Switch:
			if next := steps[i+1]; next.Kind != Warmup || next.Protocol != s.Protocol {
				t.Fatalf("step %d: switch to %s is followed by %+v, want its warm-up", i, s.Protocol, next)
			}
			proto = s.Protocol
		}
	}
	want := strings.Split(strings.Repeat("h2,h3,h3,h2,", 5), ",")[:20]
	if !slices.Equal(protos, want) {
		t.Fatalf("windows %v, want %v", protos, want)
	}
	if steps[0].Kind != Warmup {
		t.Fatalf("the soak starts with %s, want a discarded warm-up", steps[0].Kind)
	}
}

func TestPlanChaosIsSeededBoundedAndCoversEveryKind(t *testing.T) {
	a, _ := Plan(budget(10*time.Minute, 7))
	b, _ := Plan(budget(10*time.Minute, 7))
	c, _ := Plan(budget(10*time.Minute, 8))
	if !slices.Equal(a, b) {
		t.Fatal("the same seed gave two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	kinds := map[StepKind]int{}
	chaos := 0
	for i, s := range a {
		if s.Kind == Measure || s.Kind == Switch || s.Kind == Warmup {
			continue
		}
		if s.Kind.IsNetwork() {
			continue
		}
		chaos++
		kinds[s.Kind]++
		// A chaos step sits between two windows of the same protocol, a
		// network fault at most before it.
		before := a[i-1]
		if before.Kind.IsNetwork() {
			before = a[i-2]
		}
		if before.Kind != Measure || a[i+1].Kind != Measure || before.Protocol != a[i+1].Protocol {
			t.Fatalf("chaos step %d (%s) is not between two windows of one protocol: %+v, %+v", i, s.Kind, before, a[i+1])
		}
	}
	// Ten pairs leave nine gaps; every kind runs before any repeats.
	if chaos != 9 || len(kinds) != 4 {
		t.Fatalf("%d chaos steps of %d kinds (%v), want 9 of all 4", chaos, len(kinds), kinds)
	}
}

func TestPlanRefusesADurationTooShortForSixPairs(t *testing.T) {
	_, err := Plan(budget(80*time.Second, 1))
	if err == nil || !strings.Contains(err.Error(), "at least 3s") {
		t.Fatalf("80 s soak planned (err %v), want a refusal naming the minimum window", err)
	}
	steps, err := Plan(budget(2*time.Minute, 1))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range steps {
		if s.Kind == Measure {
			n++
		}
	}
	if n != 2*MinPairs {
		t.Fatalf("a 2 min soak has %d windows, want %d", n, 2*MinPairs)
	}
}

func TestExcludedKinds(t *testing.T) {
	for k, want := range map[StepKind]bool{Warmup: true, Switch: true, ProxyHotRestart: true, AgentInHotRestart: true,
		AgentRestart: false, PodChurn: false, Measure: false} {
		if k.Excluded() != want {
			t.Errorf("%s excluded %v, want %v", k, k.Excluded(), want)
		}
	}
}

// networkSteps are the plan's network fault steps, in order.
func networkSteps(steps []Step) []Step {
	var out []Step
	for _, s := range steps {
		if s.Kind.IsNetwork() {
			out = append(out, s)
		}
	}
	return out
}

// TestPlanNetworkFaultsAreSeededBoundedAndDeterministic: the same seed
// gives the same faults (kinds, nodes, netem figures); another seed other
// ones; a soak of n gaps runs max(1, n/3) faults, every kind once before
// any repeats, the first a netem window; each sits in a gap, before its
// chaos step, and every netem figure lies in its stated range.
func TestPlanNetworkFaultsAreSeededBoundedAndDeterministic(t *testing.T) {
	a, _ := Plan(budget(10*time.Minute, 7))
	b, _ := Plan(budget(10*time.Minute, 7))
	if !slices.EqualFunc(networkSteps(a), networkSteps(b), func(x, y Step) bool { return x.Kind == y.Kind && x.Node == y.Node && x.Fault == y.Fault }) {
		t.Fatal("the same seed gave two sets of network faults")
	}
	differ := false
	for seed := uint64(8); seed < 12 && !differ; seed++ {
		c, _ := Plan(budget(10*time.Minute, seed))
		differ = !slices.EqualFunc(networkSteps(a), networkSteps(c), func(x, y Step) bool { return x.Node == y.Node && x.Fault == y.Fault })
	}
	if !differ {
		t.Fatal("seeds 7 to 11 gave the same network faults")
	}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{2 * time.Minute, 1}, {10 * time.Minute, 3}, {30 * time.Minute, 9}} {
		for seed := uint64(1); seed <= 20; seed++ {
			steps, err := Plan(budget(tc.d, seed))
			if err != nil {
				t.Fatalf("%s seed %d: %v", tc.d, seed, err)
			}
			net := networkSteps(steps)
			if len(net) != tc.want {
				t.Fatalf("%s seed %d: %d network faults, want %d", tc.d, seed, len(net), tc.want)
			}
			if net[0].Kind != NetemFault {
				t.Fatalf("%s seed %d: the first network fault is %s, want a netem (loss) window", tc.d, seed, net[0].Kind)
			}
			seen := map[StepKind]int{}
			for j, f := range net {
				seen[f.Kind]++
				if round := j / len(NetworkKinds()); seen[f.Kind] > round+1 {
					t.Fatalf("%s seed %d: %s repeats before every kind ran: %v", tc.d, seed, f.Kind, net)
				}
				checkFault(t, f)
			}
			for i, s := range steps {
				if s.Kind.IsNetwork() && (steps[i-1].Kind != Measure || steps[i+1].Kind == Switch || steps[i+1].Kind == Warmup) {
					t.Fatalf("%s seed %d: network fault %d (%s) is not in a gap between pairs: after %s, before %s", tc.d, seed, i, s.Kind, steps[i-1].Kind, steps[i+1].Kind)
				}
			}
		}
	}
}

func checkFault(t *testing.T, s Step) {
	t.Helper()
	f := s.Fault
	if f.Hold != Holds[s.Kind] || f.Allowance <= 0 || (s.Node != "node-a" && s.Node != "node-b") {
		t.Fatalf("%s on %q: fault %+v, want its kind's hold, an allowance and a node", s.Kind, s.Node, f)
	}
	n := f.Netem
	switch s.Kind {
	case NetemFault:
		if n.LossPct < 1 || n.LossPct > 5 || n.Delay < 5*time.Millisecond || n.Delay > 30*time.Millisecond ||
			n.Jitter < time.Millisecond || n.Jitter > n.Delay/2 || n.ReorderPct < 5 || n.ReorderPct > 25 || n.DuplicatePct < 1 || n.DuplicatePct > 5 {
			t.Fatalf("netem %s: a figure out of its range", n)
		}
		if err := n.Check(); err != nil {
			t.Fatal(err)
		}
	case Partition:
		if n.LossPct != 100 {
			t.Fatalf("partition %s, want loss 100%%", n)
		}
	case LinkFlap:
		if n != (netfault.Netem{}) {
			t.Fatalf("link flap with netem %s", n)
		}
	}
}

// TestPlanNetworkFaultsLeaveOtherChaosAsItWas: adding network faults does
// not move the process chaos a seed draws.
func TestPlanNetworkFaultsLeaveOtherChaosAsItWas(t *testing.T) {
	with := budget(10*time.Minute, 7)
	without := with
	without.Network = nil
	a, _ := Plan(with)
	b, _ := Plan(without)
	chaos := func(steps []Step) []Step {
		return slices.DeleteFunc(slices.Clone(steps), func(s Step) bool {
			return s.Kind == Measure || s.Kind == Switch || s.Kind == Warmup || s.Kind.IsNetwork()
		})
	}
	if !slices.EqualFunc(chaos(a), chaos(b), func(x, y Step) bool { return x.Kind == y.Kind && x.Node == y.Node }) {
		t.Fatalf("network faults moved the chaos steps:\n%v\n%v", chaos(a), chaos(b))
	}
	if len(networkSteps(b)) != 0 {
		t.Fatal("a budget without network kinds planned network faults")
	}
}

// PairEvery sizes the pairs by the soak's length, never below MinPairs:
// the long soak's hour at one pair per 5 minutes has 12, its 10-minute
// trial the 6 an interval needs.
func TestPlanPairEvery(t *testing.T) {
	for _, tc := range []struct {
		d     time.Duration
		every time.Duration
		want  int
	}{{time.Hour, 5 * time.Minute, 12}, {10 * time.Minute, 5 * time.Minute, MinPairs}, {10 * time.Minute, 0, 10}} {
		b := budget(tc.d, 1)
		b.PairEvery = tc.every
		steps, err := Plan(b)
		if err != nil {
			t.Fatal(err)
		}
		if n := countWindows(steps); n != 2*tc.want {
			t.Errorf("%s at a pair every %s: %d windows, want %d", tc.d, tc.every, n, 2*tc.want)
		}
	}
}
