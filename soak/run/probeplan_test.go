package run

import (
	"strings"
	"testing"
	"time"
)

// The long soak's plan: 300 probes a second over four pods starts more
// than a million probes in an hour, and so does 280/s, the least rate that
// does; the proposal's reference re-soak had 719,984.
func TestProbePlanReachesAMillionInAnHour(t *testing.T) {
	for _, rate := range []float64{280, 300} {
		p, err := PlanProbes(rate, 4)
		if err != nil {
			t.Fatal(err)
		}
		if p.Rate() < rate {
			t.Errorf("%g/s planned as %s: below the rate asked for", rate, p)
		}
		if n := p.In(time.Hour); n < 1_000_000 {
			t.Errorf("%g/s: %s starts %d probes in an hour, want at least 1,000,000", rate, p, n)
		}
	}
	// The witness that the bound is not vacuous: 10/s, the short soak's
	// one prober, starts 36,000.
	p, _ := PlanProbes(10, 1)
	if p.Every != 100*time.Millisecond || p.In(time.Hour) != 35_999 {
		t.Errorf("10/s over one pod: %s, %d in an hour; want every 100ms, 35,999 (the first tick one interval in)", p, p.In(time.Hour))
	}
}

// The interval is rounded down, so the plan never probes slower than
// asked; each pod's ticks are offset by a share of the interval, and In
// counts them so.
func TestProbePlanRoundsTheIntervalDown(t *testing.T) {
	p, err := PlanProbes(280, 4)
	if err != nil {
		t.Fatal(err)
	}
	if p.Every != 14285*time.Microsecond {
		t.Fatalf("280/s over 4 pods: every %s, want 14.285ms", p.Every)
	}
	// Pods offset 0, 1/4, 2/4, 3/4 of 14.285 ms, each first ticking an
	// interval after its offset: none inside the first interval, the
	// first pod's first at its end; in four intervals each pod three
	// times.
	if n := p.In(p.Every); n != 0 {
		t.Errorf("probes in the first interval: %d, want 0", n)
	}
	if n := p.In(p.Every + 1); n != 1 {
		t.Errorf("probes in the first interval and a nanosecond: %d, want 1", n)
	}
	if n := p.In(4 * p.Every); n != 12 {
		t.Errorf("probes in four intervals: %d, want 12", n)
	}
}

func TestProbePlanRefusesWhatAPodCannotKeep(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		pods int
		want string
	}{
		{300, 0, "no prober pod"},
		{0, 4, "must be positive"},
		{-5, 4, "must be positive"},
		{5000, 4, "faster than the 1ms a pod can keep"},
	} {
		if _, err := PlanProbes(tc.rate, tc.pods); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("PlanProbes(%g, %d): %v, want %q", tc.rate, tc.pods, err, tc.want)
		}
	}
}
