package stats

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func line(n int, step, a, b float64) []XY {
	out := make([]XY, n)
	for i := range out {
		x := float64(i) * step
		out[i] = XY{X: x, Y: a + b*x}
	}
	return out
}

// A straight line's slope comes back exactly, from every pair.
func TestTheilSenOfALine(t *testing.T) {
	f, err := TheilSen(line(10, 5, 100, 0.25))
	if err != nil {
		t.Fatal(err)
	}
	if f.Slope != 0.25 || f.Pairs != 45 || f.Samples != 10 {
		t.Fatalf("got %+v, want slope 0.25 from 45 pairs of 10 samples", f)
	}
}

// A minority of wild samples does not move the median slope, where it
// moves a least-squares line: a flat series with a few spikes (a GC
// sawtooth's top) stays flat.
func TestTheilSenIgnoresAMinorityOfOutliers(t *testing.T) {
	flat := line(60, 1, 50, 0)
	for _, i := range []int{7, 30, 55} {
		flat[i].Y += 1e6
	}
	f, err := TheilSen(flat)
	if err != nil {
		t.Fatal(err)
	}
	if f.Slope != 0 {
		t.Fatalf("a flat series with three spikes fitted slope %v, want 0", f.Slope)
	}
	// The witness that the spikes are large enough to matter: least
	// squares over the same samples is far from flat.
	var sx, sy, sxx, sxy float64
	for _, p := range flat {
		sx, sy, sxx, sxy = sx+p.X, sy+p.Y, sxx+p.X*p.X, sxy+p.X*p.Y
	}
	n := float64(len(flat))
	if ls := (n*sxy - sx*sy) / (n*sxx - sx*sx); math.Abs(ls) < 100 {
		t.Fatalf("least squares slope %v: the spikes would not tilt a line either, so the control shows nothing", ls)
	}
}

// Growth within each life of a process that restarts is found although
// every restart drops the level: pairs stay within a group. Fitted as
// one series the restarts hide the growth.
func TestTheilSenFitsWithinGroups(t *testing.T) {
	var lives [][]XY
	var joined []XY
	for life := 0; life < 4; life++ {
		g := line(20, 1, 10, 2)
		for i := range g {
			g[i].X += float64(life) * 20
		}
		lives = append(lives, g)
		joined = append(joined, g...)
	}
	f, err := TheilSen(lives...)
	if err != nil {
		t.Fatal(err)
	}
	if f.Slope != 2 || f.Pairs != 4*190 {
		t.Fatalf("within lives: %+v, want slope 2 from 760 pairs", f)
	}
	one, err := TheilSen(joined)
	if err != nil {
		t.Fatal(err)
	}
	if one.Slope >= 1 {
		t.Fatalf("the lives joined fit slope %v: the control should show the restarts hiding growth", one.Slope)
	}
}

// Noise around a slope: the estimate lands near it.
func TestTheilSenUnderNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	g := line(200, 5, 1000, 0.1)
	for i := range g {
		g[i].Y += 20 * rng.NormFloat64()
	}
	f, err := TheilSen(g)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(f.Slope-0.1) > 0.02 {
		t.Fatalf("slope %v, want 0.1 ± 0.02", f.Slope)
	}
}

func TestTheilSenRefusesWhatItCannotFit(t *testing.T) {
	for _, tc := range []struct {
		groups [][]XY
		want   string
	}{
		{nil, "nothing to fit"},
		{[][]XY{{{1, 1}}, {{2, 2}}}, "nothing to fit"}, // one sample per group: no pair within one
		{[][]XY{{{1, 1}, {1, 2}}}, "nothing to fit"},   // the same time twice
		{[][]XY{{{1, math.NaN()}, {2, 2}}}, "not finite"},
	} {
		if _, err := TheilSen(tc.groups...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error saying %q", tc.groups, err, tc.want)
		}
	}
}
