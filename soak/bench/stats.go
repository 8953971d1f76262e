package bench

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// ABBA is the visiting order of rows: each row once in order, then once in
// reverse, so a drift of the machine's load over the run (the machine is
// shared) weighs on every row alike instead of on the last ones.
func ABBA(rows []string) ([]string, error) {
	seen := map[string]bool{}
	for _, r := range rows {
		if r == "" {
			return nil, fmt.Errorf("ABBA: a row without a name")
		}
		if seen[r] {
			return nil, fmt.Errorf("ABBA: row %q given twice", r)
		}
		seen[r] = true
	}
	out := slices.Clone(rows)
	for i := len(rows) - 1; i >= 0; i-- {
		out = append(out, rows[i])
	}
	return out, nil
}

// Percentile is the nearest-rank q-quantile (0 < q <= 1) of sorted, as
// HdrHistogram and fortio report it: the smallest sample at or above a
// share q of the samples.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 || q <= 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Latency is a row's latency distribution, in µs.
type Latency struct {
	Samples int     `json:"samples"`
	P50     float64 `json:"p50_us"`
	P90     float64 `json:"p90_us"`
	P99     float64 `json:"p99_us"`
	Mean    float64 `json:"mean_us"`
	// Quantiles are the latencies at QuantileLevels, for the distribution
	// chart.
	Quantiles []float64 `json:"quantiles_us"`
}

// QuantileLevels are the levels Latency.Quantiles holds: every percent,
// then 99.5 and 99.9.
var QuantileLevels = func() []float64 {
	var q []float64
	for i := 1; i <= 99; i++ {
		q = append(q, float64(i)/100)
	}
	return append(q, 0.995, 0.999)
}()

// Summarize sorts lat in place and summarizes it.
func Summarize(lat []time.Duration) Latency {
	slices.Sort(lat)
	l := Latency{Samples: len(lat)}
	if len(lat) == 0 {
		return l
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	l.P50, l.P90, l.P99 = us(Percentile(lat, 0.50)), us(Percentile(lat, 0.90)), us(Percentile(lat, 0.99))
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	l.Mean = us(sum / time.Duration(len(lat)))
	for _, q := range QuantileLevels {
		l.Quantiles = append(l.Quantiles, us(Percentile(lat, q)))
	}
	return l
}

// Added is a row's latency over the direct path's, percentile by
// percentile, in µs.
type Added struct {
	P50 float64 `json:"p50_us"`
	P90 float64 `json:"p90_us"`
	P99 float64 `json:"p99_us"`
}

// AddedOver is l's latency added over base's.
func AddedOver(l, base Latency) Added {
	return Added{P50: l.P50 - base.P50, P90: l.P90 - base.P90, P99: l.P99 - base.P99}
}

// CPUSample is a proxy's CPU time and the wall time it was read over.
type CPUSample struct {
	CPU, Wall time.Duration
}

// VCPU is the average number of CPUs busy.
func (s CPUSample) VCPU() float64 {
	if s.Wall <= 0 {
		return 0
	}
	return s.CPU.Seconds() / s.Wall.Seconds()
}

// PerThousand is vCPU per 1,000 requests per second at rate rps: Istio's
// unit (0.20 for a sidecar at 1,000 rps is 200 µs of CPU per request).
func PerThousand(vcpu, rps float64) float64 {
	if rps <= 0 {
		return 0
	}
	return vcpu / (rps / 1000)
}
