package stats

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// XY is one sample of a series: X its time, Y its value.
type XY struct{ X, Y float64 }

// Fit is a Theil–Sen slope with what it was fitted from.
type Fit struct {
	// Slope is the median of the pairwise slopes, in Y per unit of X.
	Slope float64 `json:"slope"`
	// Pairs is how many pairwise slopes it is the median of, Samples how
	// many samples those pairs were drawn from.
	Pairs   int `json:"pairs"`
	Samples int `json:"samples"`
}

// MaxSlopePairs bounds the pairwise slopes one fit holds in memory: a
// group of n samples has n(n-1)/2 of them, so a series sampled every
// second for an hour would hold six million. A caller thins its samples
// first (the soak samples resources every few seconds).
const MaxSlopePairs = 20_000_000

// TheilSen fits a slope to groups of samples: the median of (yj-yi)/(xj-xi)
// over every two samples of the same group with distinct X. The median
// ignores a minority of wild slopes (a GC cycle's sawtooth, one scrape
// taken mid-allocation) that would tilt a least-squares line, which is
// what a growth gate needs: a leak moves most pairs, noise a few.
//
// Pairs never span two groups. A process that restarts is one series in
// several lives, each starting from its own level: fitted as one line,
// every restart would read as a fall and hide growth within each life;
// fitted by groups, only growth within a life counts.
//
// It is an error when no group has two samples with distinct X (nothing
// to fit) or when a sample is not finite.
func TheilSen(groups ...[]XY) (Fit, error) {
	n := 0
	for gi, g := range groups {
		for i, p := range g {
			if math.IsNaN(p.X) || math.IsInf(p.X, 0) || math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
				return Fit{}, fmt.Errorf("group %d, sample %d: (%v, %v) is not finite", gi, i, p.X, p.Y)
			}
		}
		n += len(g) * (len(g) - 1) / 2
	}
	if n > MaxSlopePairs {
		return Fit{}, fmt.Errorf("%d sample pairs exceed the fit's limit of %d: thin the samples", n, MaxSlopePairs)
	}
	slopes := make([]float64, 0, n)
	samples := 0
	for _, g := range groups {
		samples += len(g)
		for i := range g {
			for j := i + 1; j < len(g); j++ {
				if dx := g[j].X - g[i].X; dx != 0 {
					slopes = append(slopes, (g[j].Y-g[i].Y)/dx)
				}
			}
		}
	}
	if len(slopes) == 0 {
		return Fit{Samples: samples}, errors.New("no two samples of one group with distinct times: nothing to fit a slope to")
	}
	slices.Sort(slopes)
	return Fit{Slope: median(slopes), Pairs: len(slopes), Samples: samples}, nil
}
