package bench

import (
	"strings"
	"testing"
)

func TestScalePlanValidateNamesThePoint(t *testing.T) {
	if err := DefaultScalePlan().Validate(); err != nil {
		t.Fatalf("the default plan: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(*ScalePlan)
		want string
	}{
		{"a rate h2load cannot pace", func(p *ScalePlan) { p.Rates = []int{252, 1002} }, "rate 1002 (point 2 of the rate sweep) is not a positive multiple of its 4 connections"},
		{"rates out of order", func(p *ScalePlan) { p.Rates = []int{500, 252} }, "do not rise at point 2"},
		{"no connection", func(p *ScalePlan) { p.Conns = []int{0, 4} }, "0 connections (point 1 of the conns sweep)"},
		{"a fraction of a second", func(p *ScalePlan) { p.Seconds = 2.5 }, "2.5s a point"},
		{"nothing to run", func(p *ScalePlan) { p.Rates, p.Conns = nil, nil }, "no rates and no connection counts"},
	} {
		p := DefaultScalePlan()
		c.edit(&p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestScalePointsRatesThenConns(t *testing.T) {
	p := ScalePlan{Rates: []int{252, 500}, RateConns: 4, Conns: []int{1, 16}, Seconds: 1}
	got := p.points()
	want := []scalePoint{{SweepRate, 4, 252}, {SweepRate, 4, 500}, {SweepConns, 1, 0}, {SweepConns, 16, 0}}
	if len(got) != len(want) {
		t.Fatalf("points %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("point %d: %v, want %v", i, got[i], want[i])
		}
	}
}

func ratePoint(row string, target, achieved float64, failed int) ScalePoint {
	return ScalePoint{Row: row, Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: target, AchievedRPS: achieved, Failed: failed}}
}

func TestSaturateStopsAtTheFirstRateMissed(t *testing.T) {
	pts := []ScalePoint{
		// Out of order on purpose: the summary sorts by target.
		ratePoint("mesh-h2", 2000, 1700, 0),
		ratePoint("mesh-h2", 250, 250, 0),
		ratePoint("mesh-h2", 1000, 999, 0),
		// Held again after a miss: still saturated at the miss.
		ratePoint("mesh-h2", 4000, 3990, 0),
		ratePoint("nginx", 250, 250, 0),
		// Every request answered in time, but some failed: not held.
		ratePoint("nginx", 1000, 1000, 3),
		{Row: "mesh-h2", Sweep: SweepConns, Conns: 1, Run: HTTPRun{AchievedRPS: 900}},
		{Row: "mesh-h2", Sweep: SweepConns, Conns: 16, Run: HTTPRun{AchievedRPS: 2600}},
		{Row: "mesh-h2", Sweep: SweepConns, Conns: 64, Run: HTTPRun{AchievedRPS: 2400}},
	}
	got := Saturate([]string{"mesh-h2", "nginx", "direct"}, pts)
	want := []Saturation{
		{Row: "mesh-h2", HeldRPS: 1000, FirstMissed: 2000, MaxRPS: 2600, MaxConns: 16},
		{Row: "nginx", HeldRPS: 250, FirstMissed: 1000},
		{Row: "direct"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %s: %+v, want %+v", want[i].Row, got[i], want[i])
		}
	}
}

func TestRelateScaleAgainstDirectAtTheSamePoint(t *testing.T) {
	lat := func(p99 float64) Latency { return Latency{P50: p99 / 2, P90: p99 / 1.5, P99: p99} }
	pts := []ScalePoint{
		{Row: "direct", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 250, Latency: lat(300)}},
		{Row: "direct", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 500, Latency: lat(600)}},
		{Row: "mesh-h2", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 500, Latency: lat(900)}},
		{Row: "mesh-h2", Sweep: SweepConns, Conns: 16, Run: HTTPRun{Latency: lat(900)}},
	}
	relateScale(pts)
	if pts[0].Run.Added != nil || pts[1].Run.Added != nil {
		t.Errorf("direct related to itself: %+v %+v", pts[0].Run.Added, pts[1].Run.Added)
	}
	if a := pts[2].Run.Added; a == nil || a.P99 != 300 {
		t.Errorf("mesh-h2 at 500 rps: added %+v, want p99 +300 (over direct's 600 at 500 rps, not its 300 at 250)", a)
	}
	if pts[3].Run.Added != nil {
		t.Errorf("a point direct did not visit got an added latency: %+v", pts[3].Run.Added)
	}
}

func TestTableShowsTheScaleCurves(t *testing.T) {
	plan := ScalePlan{Rates: []int{250, 500}, RateConns: 4, Conns: []int{1, 64}, Seconds: 5}
	pts := []ScalePoint{
		{Row: "direct", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 250, AchievedRPS: 250, Latency: Latency{P99: 310}}},
		{Row: "direct", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 500, AchievedRPS: 500, Latency: Latency{P99: 320}}},
		{Row: "mesh-h2", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 250, AchievedRPS: 249.6, Latency: Latency{P99: 1310}},
			Proxies: []ProxyCost{{PerThousand: 0.25}, {PerThousand: 0.125}}},
		{Row: "mesh-h2", Sweep: SweepRate, Conns: 4, Run: HTTPRun{TargetRPS: 500, AchievedRPS: 420, Latency: Latency{P99: 9000}}},
		{Row: "mesh-h2", Sweep: SweepConns, Conns: 64, Run: HTTPRun{AchievedRPS: 3100, Latency: Latency{P99: 20000}}},
	}
	relateScale(pts)
	r := &Report{Scale: &Scale{Plan: plan, Points: pts, Saturation: Saturate([]string{"direct", "mesh-h2"}, pts)}}
	out := r.Table()
	for _, want := range []string{
		"scale, paced over 4 conns, 5s a point",
		"250 p99 310", // direct: its own p99
		"250 +1000 0.375",
		"420 +8680",
		"scale, closed loop",
		"3100 at 64",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	_, curves, _ := strings.Cut(out, "scale, ")
	for i, line := range strings.Split(curves, "\n") {
		if n := len([]rune(line)); n > 120 {
			t.Errorf("line %d is %d columns wide: %q", i, n, line)
		}
	}
}
