package grade

import (
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
)

// Liveness is the evidence behind the liveness SLO gate.
type Liveness struct {
	SLO    string `json:"slo"`
	Total  int64  `json:"total"`
	Failed int64  `json:"failed"`
	// Allowed is the most failures the SLO admits over Total probes.
	Allowed int64 `json:"allowed"`
	// Timeline is failed probes per sample step.
	Timeline []TimePoint `json:"timeline"`
	// LeftOut are the network faults' spans (each with its allowance),
	// whose probes the fault gates grade instead; Total and Failed are
	// what lies outside them.
	LeftOut []LeftOut `json:"left_out,omitempty"`
}

// LeftOut is a span the liveness SLO leaves out, with its probes.
type LeftOut struct {
	Name   string    `json:"name"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Total  int64     `json:"total"`
	Failed int64     `json:"failed"`
}

// TimePoint is one step of a timeline.
type TimePoint struct {
	T time.Time `json:"t"`
	V float64   `json:"v"`
}

// The liveness SLO is judged over the whole soak, excluded windows
// included: a chaos step is part of what the mesh must survive (the
// 2026-09-30 re-soak failed on 9 probes inside its TRIPLE).
func gradeLiveness(m *manifest.Manifest, ev *loader) (*Liveness, Gate, error) {
	slo, err := manifest.ParseSLO(m.Gates.Liveness.SLO)
	if err != nil {
		return nil, Gate{}, err
	}
	totalS, err := ev.series(m.Sources.ProbesTotal)
	if err != nil {
		return nil, Gate{}, fmt.Errorf("sources.probes_total: %w", err)
	}
	failedS, err := ev.series(m.Sources.ProbesFailed)
	if err != nil {
		return nil, Gate{}, fmt.Errorf("sources.probes_failed: %w", err)
	}
	total, err := counter(totalS, m.Start, m.End, "sources.probes_total")
	if err != nil {
		return nil, Gate{}, err
	}
	failed, err := counter(failedS, m.Start, m.End, "sources.probes_failed")
	if err != nil {
		return nil, Gate{}, err
	}
	l := &Liveness{SLO: m.Gates.Liveness.SLO, Total: total, Failed: failed}
	if l.Timeline, err = timeline(failedS, m, "sources.probes_failed"); err != nil {
		return nil, Gate{}, err
	}
	spans := faultSpans(m)
	for i, sp := range spans {
		if i > 0 && sp.Start.Before(spans[i-1].End) {
			return nil, Gate{}, fmt.Errorf("network fault %s (with its allowance) overlaps %s: a probe would be left out twice", sp.Name, spans[i-1].Name)
		}
		if sp.Total, err = counter(totalS, sp.Start, sp.End, "sources.probes_total in "+sp.Name); err != nil {
			return nil, Gate{}, err
		}
		if sp.Failed, err = counter(failedS, sp.Start, sp.End, "sources.probes_failed in "+sp.Name); err != nil {
			return nil, Gate{}, err
		}
		l.Total -= sp.Total
		l.Failed -= sp.Failed
		l.LeftOut = append(l.LeftOut, sp)
	}
	total, failed = l.Total, l.Failed
	gate := Gate{Name: GateLiveness}
	if failed > total {
		return nil, Gate{}, fmt.Errorf("the prober counted %d failures in %d probes", failed, total)
	}
	// allowed = floor(total × (1 − slo)), in integers.
	budget := new(big.Rat).Sub(big.NewRat(1, 1), slo)
	budget.Mul(budget, new(big.Rat).SetInt64(total))
	l.Allowed = new(big.Int).Quo(budget.Num(), budget.Denom()).Int64()
	gate.Figure = fmt.Sprintf("%s / %s failed, SLO %s%% allows %s", fmtInt(failed), fmtInt(total), l.SLO, fmtInt(l.Allowed))
	if len(l.LeftOut) > 0 {
		var in, inFailed int64
		for _, sp := range l.LeftOut {
			in += sp.Total
			inFailed += sp.Failed
		}
		gate.Figure += fmt.Sprintf(" outside %d network fault(s) and their allowances (inside them %s / %s failed, graded by %q)",
			len(l.LeftOut), fmtInt(inFailed), fmtInt(in), GateFaultFailures)
	}
	if total == 0 {
		gate.Verdict = Inconclusive
		gate.Reason = "the prober recorded no probes"
		return l, gate, nil
	}
	// good/total ≥ slo ⇔ good × den ≥ total × num.
	good := new(big.Int).Mul(big.NewInt(total-failed), slo.Denom())
	need := new(big.Int).Mul(big.NewInt(total), slo.Num())
	succ := new(big.Rat).SetFrac64(total-failed, total)
	if good.Cmp(need) >= 0 {
		gate.Verdict = Pass
		gate.Reason = fmt.Sprintf("success %s%% ≥ %s%%", succ.Mul(succ, big.NewRat(100, 1)).FloatString(5), l.SLO)
	} else {
		gate.Verdict = Fail
		gate.Reason = fmt.Sprintf("success %s%% < %s%%: %d failure(s) over the budget", succ.Mul(succ, big.NewRat(100, 1)).FloatString(5), l.SLO, failed-l.Allowed)
	}
	return l, gate, nil
}

// timeline is the series' increase per sample step over the soak.
func timeline(series []evidence.Series, m *manifest.Manifest, what string) ([]TimePoint, error) {
	steps, err := evidence.Steps(series, m.Start, m.End, sampleStep(series))
	if err != nil {
		return nil, fmt.Errorf("%s timeline: %w", what, err)
	}
	out := make([]TimePoint, len(steps))
	for i, p := range steps {
		out[i] = TimePoint{T: p.T, V: p.V}
	}
	return out, nil
}

// sampleStep is the median spacing of the series' samples.
func sampleStep(series []evidence.Series) time.Duration {
	var d []time.Duration
	for _, s := range series {
		for i := 1; i < len(s.Points); i++ {
			d = append(d, s.Points[i].T.Sub(s.Points[i-1].T))
		}
	}
	if len(d) == 0 {
		return time.Minute
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

// Count is the evidence behind one count gate.
type Count struct {
	Name  string `json:"name"`
	About string `json:"about,omitempty"`
	Count int64  `json:"count"`
	Limit int64  `json:"limit"`
	// Seen is everything the source recorded; Count is what remains after
	// leaving out the excluded windows and anything outside the soak.
	Seen       int64            `json:"seen"`
	InExcluded map[string]int64 `json:"in_excluded,omitempty"`
	OutsideRun int64            `json:"outside_soak,omitempty"`
	Source     string           `json:"source"`
	Note       string           `json:"note,omitempty"`
	// Timeline, when the source is time-resolved, is the counted events per
	// step (excluded spans shown separately by the report).
	Timeline []TimePoint `json:"timeline,omitempty"`
}

func gradeCount(m *manifest.Manifest, ev *loader, c manifest.CountGate) (Count, Gate, error) {
	cnt := Count{Name: c.Name, About: c.About, Limit: c.Limit}
	if c.LoadGenErrors {
		if err := countLoadGen(m, ev, &cnt); err != nil {
			return Count{}, Gate{}, err
		}
	} else {
		series, err := ev.series(c.Series)
		if err != nil {
			return Count{}, Gate{}, err
		}
		cnt.Source = "prometheus " + evidence.FormatMatch(c.Series.Match)
		if cnt.Seen, err = counter(series, m.Start, m.End, c.Name); err != nil {
			return Count{}, Gate{}, err
		}
		cnt.Count = cnt.Seen
		if c.ApplyExclusions {
			for _, x := range m.Excluded {
				from, to := clip(x.Start, m.Start, m.End), clip(x.End, m.Start, m.End)
				if !to.After(from) {
					continue
				}
				n, err := counter(series, from, to, c.Name+" in "+x.Name)
				if err != nil {
					return Count{}, Gate{}, err
				}
				if n > 0 {
					if cnt.InExcluded == nil {
						cnt.InExcluded = map[string]int64{}
					}
					cnt.InExcluded[x.Name] += n
					cnt.Count -= n
				}
			}
		}
		if cnt.Timeline, err = timeline(series, m, c.Name); err != nil {
			return Count{}, Gate{}, err
		}
	}
	gate := Gate{Name: c.Name, Figure: fmt.Sprintf("%s (limit %s)", fmtInt(cnt.Count), fmtInt(c.Limit))}
	var parts []string
	if cnt.Seen != cnt.Count {
		parts = append(parts, fmt.Sprintf("%s recorded", fmtInt(cnt.Seen)))
		if cnt.OutsideRun > 0 {
			parts = append(parts, fmt.Sprintf("%s outside the soak", fmtInt(cnt.OutsideRun)))
		}
		names := make([]string, 0, len(cnt.InExcluded))
		for n := range cnt.InExcluded {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			parts = append(parts, fmt.Sprintf("%s in excluded %s", fmtInt(cnt.InExcluded[n]), n))
		}
	}
	if cnt.Count <= c.Limit {
		gate.Verdict = Pass
		gate.Reason = fmt.Sprintf("%s ≤ %s", fmtInt(cnt.Count), fmtInt(c.Limit))
	} else {
		gate.Verdict = Fail
		gate.Reason = fmt.Sprintf("%s > %s", fmtInt(cnt.Count), fmtInt(c.Limit))
	}
	if len(parts) > 0 {
		gate.Reason += " (" + strings.Join(parts, ", ") + ")"
	}
	if cnt.Note != "" {
		gate.Reason += "; " + cnt.Note
	}
	return cnt, gate, nil
}

func countLoadGen(m *manifest.Manifest, ev *loader, cnt *Count) error {
	lg := m.Sources.LoadGen
	var run evidence.LoadRun
	var err error
	switch {
	case lg.Vegeta != "":
		if run, err = evidence.LoadVegeta(ev.file(lg.Vegeta)); err != nil {
			return err
		}
	default:
		if run, err = evidence.LoadK6Summary(ev.file(lg.K6Summary)); err != nil {
			return err
		}
		if lg.K6Events != "" {
			events, err := evidence.LoadK6JSONLines(ev.file(lg.K6Events))
			if err != nil {
				return err
			}
			if run, err = run.WithTimeline(events); err != nil {
				return err
			}
		}
	}
	cnt.Source = run.Shape
	cnt.Seen = run.Failed
	if !run.Timed {
		cnt.Count = run.Failed
		cnt.Note = "the load generator's summary has no timestamps, so excluded windows could not be applied and every failure counts"
		return nil
	}
	step := time.Minute
	if d := m.End.Sub(m.Start); d > 4*time.Hour {
		step = 5 * time.Minute
	}
	buckets := map[time.Time]float64{}
	for _, f := range run.Failures {
		if f.Time.Before(m.Start) || !f.Time.Before(m.End) {
			cnt.OutsideRun++
			continue
		}
		if x, ok := m.InExcluded(f.Time); ok {
			if cnt.InExcluded == nil {
				cnt.InExcluded = map[string]int64{}
			}
			cnt.InExcluded[x.Name]++
			continue
		}
		cnt.Count++
		buckets[m.Start.Add(f.Time.Sub(m.Start).Truncate(step)+step)]++
	}
	for t := m.Start.Add(step); !t.After(m.End.Add(step - 1)); t = t.Add(step) {
		cnt.Timeline = append(cnt.Timeline, TimePoint{T: t, V: buckets[t]})
	}
	return nil
}

func clip(t, lo, hi time.Time) time.Time {
	if t.Before(lo) {
		return lo
	}
	if t.After(hi) {
		return hi
	}
	return t
}
