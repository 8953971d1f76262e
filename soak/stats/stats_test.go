package stats

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The exact null distribution against brute force over every sign
// assignment of ranks 1..n.
func TestSignedRankCDFMatchesEnumeration(t *testing.T) {
	for n := 1; n <= 12; n++ {
		m := n * (n + 1) / 2
		counts := make([]int, m+1)
		for mask := uint(0); mask < 1<<n; mask++ {
			s := 0
			for r := 1; r <= n; r++ {
				if mask&(1<<(r-1)) != 0 {
					s += r
				}
			}
			counts[s]++
		}
		cdf := SignedRankCDF(n)
		acc := 0
		for k := 0; k <= m; k++ {
			acc += counts[k]
			want := float64(acc) / float64(uint(1)<<n)
			if math.Abs(cdf[k]-want) > 1e-15 {
				t.Fatalf("n=%d: P(T+ <= %d) = %v, enumeration says %v", n, k, cdf[k], want)
			}
		}
	}
}

// Published two-sided 5% critical values of the signed-rank statistic
// (largest c with P(T+ <= c) <= 0.025).
func TestCriticalValues(t *testing.T) {
	for n, c := range map[int]int{6: 0, 7: 2, 8: 3, 9: 5, 10: 8, 12: 13, 15: 25, 20: 52} {
		cdf := SignedRankCDF(n)
		if !(cdf[c] <= 0.025 && cdf[c+1] > 0.025) {
			t.Errorf("n=%d: P(T<=%d)=%v, P(T<=%d)=%v; want the 0.025 boundary between them", n, c, cdf[c], c+1, cdf[c+1])
		}
	}
}

func TestHodgesLehmann(t *testing.T) {
	iv, err := HodgesLehmann([]float64{1, 2, 3, 4, 5, 6}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	// Six pairs: only the extreme Walsh averages bound a 95% interval, at
	// exact coverage 1 - 2/64.
	if iv.Estimate != 3.5 || iv.Lower != 1 || iv.Upper != 6 || iv.Confidence != 1-2.0/64 || !iv.Bounded {
		t.Errorf("got %+v", iv)
	}
	iv, err = HodgesLehmann([]float64{0.1, -0.2, 0.3, 0.05, 0.15}, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if iv.Bounded || !math.IsInf(iv.Lower, -1) || !math.IsInf(iv.Upper, 1) {
		t.Errorf("five pairs cannot bound a 95%% interval, got %+v", iv)
	}
	if MinPairs(0.95) != 6 || MinPairs(0.99) != 8 {
		t.Errorf("MinPairs = %d, %d; want 6, 8", MinPairs(0.95), MinPairs(0.99))
	}
	// The estimate moves with a shift of the data and ignores an outlier's
	// size, which a mean would not.
	a, _ := HodgesLehmann([]float64{0.10, 0.12, 0.15, 0.17, 0.20, 0.21, 0.22, 0.25}, 0.95)
	b, _ := HodgesLehmann([]float64{0.10, 0.12, 0.15, 0.17, 0.20, 0.21, 0.22, 25}, 0.95)
	if math.Abs(a.Estimate-b.Estimate) > 0.02 {
		t.Errorf("one wild pair moved the estimate from %v to %v", a.Estimate, b.Estimate)
	}
	for _, bad := range [][]float64{nil, {math.NaN()}, {math.Inf(1)}} {
		if _, err := HodgesLehmann(bad, 0.95); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
}

// Seeded coverage check: the interval contains the true centre at least at
// its stated level, within simulation noise.
func TestCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const reps, n, centre = 2000, 10, 0.165
	hit := 0
	conf := 0.0
	for r := 0; r < reps; r++ {
		d := make([]float64, n)
		for i := range d {
			d[i] = centre + 0.03*rng.NormFloat64()
		}
		iv, err := HodgesLehmann(d, 0.95)
		if err != nil {
			t.Fatal(err)
		}
		conf = iv.Confidence
		if iv.Lower <= centre && centre <= iv.Upper {
			hit++
		}
	}
	got := float64(hit) / reps
	// Binomial sd at 0.95 over 2000 reps is 0.005.
	if got < conf-0.02 {
		t.Errorf("coverage %.3f below the exact level %.3f", got, conf)
	}
}
