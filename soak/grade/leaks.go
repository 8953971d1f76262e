package grade

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
	"github.com/aether-mesh/aether/soak/stats"
)

// Leak is the evidence behind one resource growth gate.
type Leak struct {
	Name       string  `json:"name"`
	About      string  `json:"about,omitempty"`
	Unit       string  `json:"unit,omitempty"`
	MaxPerHour float64 `json:"max_per_hour"`
	Settle     string  `json:"settle"`
	MinSamples int     `json:"min_samples"`
	MinSpan    string  `json:"min_span"`
	Source     string  `json:"source"`
	// Processes are the groups fitted, by name, each with its verdict.
	Processes []LeakProcess `json:"processes"`
}

// LeakProcess is one process's (one group's) fit.
type LeakProcess struct {
	// Name is the group's label values joined by "/" (node-a/proxy).
	Name  string `json:"name"`
	Lives int    `json:"lives"`
	// Samples are those fitted: inside the soak, after each life's
	// settling; SpanSeconds is their time from first to last, summed over
	// the lives.
	Samples     int     `json:"samples"`
	SpanSeconds float64 `json:"span_s"`
	// Min and Max are the fitted samples' range, for the reader.
	Min float64 `json:"min"`
	Max float64 `json:"max"`
	// PerHour is the Theil–Sen growth per hour within the lives; absent
	// when the group held too little to fit.
	PerHour *float64 `json:"per_hour,omitempty"`
	Verdict Verdict  `json:"verdict"`
	Reason  string   `json:"reason"`
}

// gradeLeak fits every group's growth and holds the fastest to the bound.
//
// Its inputs are a ratio against 1: the fastest conclusive growth as a
// fraction of the bound, an interval of no width (the fit is a point),
// so the release gate recomputes the verdict from them as it does a
// ratio's: above 1 fails; at most 1 passes, unless a group was too thin
// to fit or not measured, which leaves it unbounded and the gate
// inconclusive. One group over its bound fails the gate whatever the
// others held.
func gradeLeak(m *manifest.Manifest, ev *loader, lg manifest.LeakGate) (Leak, Gate, error) {
	l := Leak{Name: lg.Name, About: lg.About, Unit: lg.Unit, MaxPerHour: lg.MaxPerHour, Settle: lg.Settle.String(),
		MinSamples: lg.MinSamples, MinSpan: lg.MinSpan.String(), Source: "prometheus " + evidence.FormatMatch(lg.Series.Match)}
	series, err := ev.series(lg.Series)
	if err != nil {
		return Leak{}, Gate{}, err
	}
	groups, err := leakGroups(series, lg)
	if err != nil {
		return Leak{}, Gate{}, err
	}
	for _, e := range lg.Expect {
		if _, ok := groups[e]; !ok {
			groups[e] = nil
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		l.Processes = append(l.Processes, fitProcess(m, lg, n, groups[n]))
	}
	return l, leakGate(l), nil
}

// leakGroups sorts the series into groups, and each group's into lives.
func leakGroups(series []evidence.Series, lg manifest.LeakGate) (map[string]map[string]evidence.Series, error) {
	out := map[string]map[string]evidence.Series{}
	for _, s := range series {
		parts := make([]string, len(lg.Group))
		for i, k := range lg.Group {
			if parts[i] = s.Labels[k]; parts[i] == "" {
				return nil, fmt.Errorf("series %s has no label %q to group it by", evidence.FormatMatch(s.Labels), k)
			}
		}
		g, life := strings.Join(parts, "/"), ""
		if lg.Life != "" {
			if life = s.Labels[lg.Life]; life == "" {
				return nil, fmt.Errorf("series %s has no label %q to tell its life", evidence.FormatMatch(s.Labels), lg.Life)
			}
		}
		if out[g] == nil {
			out[g] = map[string]evidence.Series{}
		}
		if _, dup := out[g][life]; dup {
			return nil, fmt.Errorf("series %s: group %s has two series for life %q; which one is the process is a guess", evidence.FormatMatch(s.Labels), g, life)
		}
		out[g][life] = s
	}
	return out, nil
}

// fitProcess fits one group. Each life's settling is counted from its
// first sample, inside the soak or not: a life begun before the soak has
// settled by the time it is graded if its first samples say so.
func fitProcess(m *manifest.Manifest, lg manifest.LeakGate, name string, lives map[string]evidence.Series) LeakProcess {
	p := LeakProcess{Name: name, Lives: len(lives), Verdict: Inconclusive}
	if len(lives) == 0 {
		p.Reason = "not measured: no sample of it in the soak's evidence"
		return p
	}
	var fit [][]stats.XY
	first := true
	for _, s := range lives {
		if len(s.Points) == 0 {
			continue
		}
		from := s.Points[0].T.Add(lg.Settle.Duration)
		var g []stats.XY
		for _, pt := range s.Points {
			if pt.T.Before(from) || pt.T.Before(m.Start) || pt.T.After(m.End) {
				continue
			}
			g = append(g, stats.XY{X: pt.T.Sub(m.Start).Seconds(), Y: pt.V})
			if first || pt.V < p.Min {
				p.Min = pt.V
			}
			if first || pt.V > p.Max {
				p.Max = pt.V
			}
			first = false
		}
		if len(g) > 0 {
			p.Samples += len(g)
			p.SpanSeconds += g[len(g)-1].X - g[0].X
			fit = append(fit, g)
		}
	}
	span := time.Duration(p.SpanSeconds * float64(time.Second))
	switch {
	case p.Samples < lg.MinSamples:
		p.Reason = fmt.Sprintf("%d sample(s) after settling (%s per life), fewer than the %d a slope needs", p.Samples, lg.Settle, lg.MinSamples)
		return p
	case span < lg.MinSpan.Duration:
		p.Reason = fmt.Sprintf("its settled lives span %s, less than the %s a slope per hour needs", span.Round(time.Second), lg.MinSpan)
		return p
	}
	f, err := stats.TheilSen(fit...)
	if err != nil {
		p.Reason = "no slope: " + err.Error()
		return p
	}
	perHour := f.Slope * 3600
	p.PerHour = &perHour
	if perHour > lg.MaxPerHour {
		p.Verdict = Fail
		p.Reason = fmt.Sprintf("grows %s > %s", rate(perHour, lg.Unit), bound(lg.MaxPerHour, lg.Unit))
	} else {
		p.Verdict = Pass
		p.Reason = fmt.Sprintf("grows %s ≤ %s", rate(perHour, lg.Unit), bound(lg.MaxPerHour, lg.Unit))
	}
	p.Reason += fmt.Sprintf(" (%s samples over %s in %d %s)", fmtInt(int64(p.Samples)), span.Round(time.Second), len(fit), plural(len(fit), "life", "lives"))
	return p
}

func leakGate(l Leak) Gate {
	g := Gate{Name: l.Name}
	var over, thin []string
	worst, worstName, fitted := 0.0, "", 0
	for _, p := range l.Processes {
		switch p.Verdict {
		case Fail:
			over = append(over, p.Name+" "+rate(*p.PerHour, l.Unit))
		case Inconclusive:
			thin = append(thin, p.Name+": "+p.Reason)
		}
		if p.PerHour != nil && (fitted == 0 || *p.PerHour > worst) {
			worst, worstName = *p.PerHour, p.Name
		}
		if p.PerHour != nil {
			fitted++
		}
	}
	in := &results.RatioInputs{Max: 1}
	if fitted > 0 {
		in.Estimate = worst / l.MaxPerHour
		lo, hi := in.Estimate, in.Estimate
		in.Lower, in.Upper = &lo, &hi
	}
	in.Bounded = len(over) > 0 || (len(thin) == 0 && fitted > 0)
	g.Inputs.Ratio = in
	n := len(l.Processes)
	if fitted > 0 {
		g.Figure = fmt.Sprintf("fastest %s %s (limit %s); ", worstName, rate(worst, l.Unit), bound(l.MaxPerHour, l.Unit))
	} else {
		g.Figure = fmt.Sprintf("no slope fitted (limit %s); ", bound(l.MaxPerHour, l.Unit))
	}
	g.Figure += fmt.Sprintf("%d process(es): %d within, %d over, %d not decided", n, n-len(over)-len(thin), len(over), len(thin))
	switch {
	case len(over) > 0:
		g.Verdict = Fail
		g.Reason = fmt.Sprintf("%d process(es) grow faster than %s: %s", len(over), bound(l.MaxPerHour, l.Unit), strings.Join(over, ", "))
	case len(thin) > 0 || fitted == 0:
		g.Verdict = Inconclusive
		g.Reason = "not every process decided: " + strings.Join(thin, "; ")
		if n == 0 {
			g.Reason = "no process to fit"
		}
	default:
		g.Verdict = Pass
		g.Reason = fmt.Sprintf("every one of %d process(es) grows at most %s", n, bound(l.MaxPerHour, l.Unit))
	}
	return g
}

// LeakRate renders a growth per hour in a leak gate's unit, as its
// figures do; LeakLevel a gauge's value.
func LeakRate(v float64, unit string) string { return rate(v, unit) }

// LeakLevel renders a gauge's value in a leak gate's unit (bytes in MiB).
func LeakLevel(v float64, unit string) string {
	if unit == "bytes" {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// rate renders a growth per hour in the gauge's unit (bytes in MiB),
// signed: a fit can fall.
func rate(v float64, unit string) string {
	if v < 0 {
		return bound(v, unit)
	}
	return "+" + bound(v, unit)
}

// bound renders a bound per hour, or with rate a growth.
func bound(v float64, unit string) string {
	switch unit {
	case "bytes":
		return fmt.Sprintf("%.2f MiB/h", v/(1<<20))
	case "":
		return fmt.Sprintf("%.1f/h", v)
	}
	return fmt.Sprintf("%.1f %s/h", v, unit)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
