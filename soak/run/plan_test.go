package run

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func budget(d time.Duration, seed uint64) Budget {
	return Budget{Duration: d, Tick: time.Second, Warmup: 3 * time.Second, SwitchCost: 4 * time.Second, ChaosCost: 6 * time.Second,
		Nodes: []string{"node-a", "node-b"}, Chaos: []StepKind{AgentRestart, PodChurn, ProxyHotRestart, AgentInHotRestart}, Seed: seed}
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
		chaos++
		kinds[s.Kind]++
		// A chaos step sits between two windows of the same protocol.
		if a[i-1].Kind != Measure || a[i+1].Kind != Measure || a[i-1].Protocol != a[i+1].Protocol {
			t.Fatalf("chaos step %d (%s) is not between two windows of one protocol: %+v, %+v", i, s.Kind, a[i-1], a[i+1])
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
