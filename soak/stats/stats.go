// Package stats holds the statistics the soak gates use: the
// Hodges–Lehmann estimate of a location shift and its exact
// Wilcoxon-signed-rank confidence interval (paired windows), and the
// Theil–Sen slope of a series sampled over the soak (resource growth).
//
// Exact rather than normal-approximated because a soak yields few pairs
// (an 8 h soak holds six 80-minute ABBA pairs at most), where the
// approximation is poorest and a gate must not claim more confidence than
// it has.
package stats

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
)

// Interval is a location estimate with its confidence interval.
type Interval struct {
	N        int     `json:"n"`
	Estimate float64 `json:"estimate"`
	Lower    float64 `json:"lower"`
	Upper    float64 `json:"upper"`
	// Confidence is the interval's exact coverage, at least the level
	// asked for; it is reported because with few pairs it can be well
	// above it.
	Confidence float64 `json:"confidence"`
	// Bounded is false when there are too few pairs for any interval at
	// the requested level; Lower and Upper are then ±Inf.
	Bounded bool `json:"bounded"`
}

// MaxExactN bounds the exact distribution's size; beyond it the counts
// would overflow nothing (they are big.Int) but the O(n³) table is slow
// for no gain, since a soak never has that many pairs.
const MaxExactN = 1000

// SignedRankCDF returns P(T+ <= k) for k = 0..n(n+1)/2 under the null
// hypothesis, T+ being the Wilcoxon signed-rank statistic of n untied,
// non-zero differences: the number of subsets of {1..n} with sum k, over
// 2^n.
func SignedRankCDF(n int) []float64 {
	m := n * (n + 1) / 2
	counts := make([]*big.Int, m+1)
	for i := range counts {
		counts[i] = new(big.Int)
	}
	counts[0].SetInt64(1)
	for r := 1; r <= n; r++ {
		for s := r * (r + 1) / 2; s >= r; s-- {
			counts[s].Add(counts[s], counts[s-r])
		}
	}
	total := new(big.Float).SetInt(new(big.Int).Lsh(big.NewInt(1), uint(n)))
	cdf := make([]float64, m+1)
	acc := new(big.Int)
	for k := 0; k <= m; k++ {
		acc.Add(acc, counts[k])
		f, _ := new(big.Float).Quo(new(big.Float).SetInt(acc), total).Float64()
		cdf[k] = f
	}
	return cdf
}

// HodgesLehmann returns the one-sample Hodges–Lehmann estimate of the
// centre of d (the median of its Walsh averages) and the exact
// distribution-free confidence interval at level conf, read off the same
// Walsh averages: [W(k), W(M+1-k)] with k-1 the largest value whose lower
// tail P(T+ <= k-1) is at most (1-conf)/2.
func HodgesLehmann(d []float64, conf float64) (Interval, error) {
	n := len(d)
	if n == 0 {
		return Interval{}, errors.New("no differences to estimate from")
	}
	if n > MaxExactN {
		return Interval{}, fmt.Errorf("%d pairs exceed the exact method's limit of %d", n, MaxExactN)
	}
	if conf <= 0 || conf >= 1 {
		return Interval{}, fmt.Errorf("confidence %v is not in (0, 1)", conf)
	}
	for i, x := range d {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return Interval{}, fmt.Errorf("difference %d is %v", i, x)
		}
	}
	walsh := make([]float64, 0, n*(n+1)/2)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			walsh = append(walsh, (d[i]+d[j])/2)
		}
	}
	sort.Float64s(walsh)
	m := len(walsh)
	iv := Interval{N: n, Estimate: median(walsh), Lower: math.Inf(-1), Upper: math.Inf(1)}
	alpha := (1 - conf) / 2
	cdf := SignedRankCDF(n)
	// k is the number of Walsh averages cut from each end.
	k := 0
	for k < len(cdf) && cdf[k] <= alpha+1e-12 {
		k++
	}
	if k == 0 {
		iv.Confidence = 1
		return iv, nil
	}
	iv.Bounded = true
	iv.Lower = walsh[k-1]
	iv.Upper = walsh[m-k]
	iv.Confidence = 1 - 2*cdf[k-1]
	return iv, nil
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// MinPairs returns the fewest pairs for which an exact interval at level
// conf exists: the smallest n with 2/2^n <= 1-conf.
func MinPairs(conf float64) int {
	for n := 1; n < 64; n++ {
		if math.Ldexp(1, -n) <= (1-conf)/2+1e-12 {
			return n
		}
	}
	return 64
}
