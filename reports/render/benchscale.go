package render

import (
	"bytes"
	"fmt"
	"html/template"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/aether-mesh/aether/soak/bench"
)

// The scale curves' charts: one line per HTTP row, in the row's colour
// of every bench chart.

// scaleSeries is, per row in first-seen order, the points of one sweep as
// (x, y) pairs; a point y gives no value for is left out.
func scaleSeries(s *bench.Scale, sweep bench.Sweep, x, y func(bench.ScalePoint) float64) ([]string, map[string]plotter.XYs) {
	var names []string
	series := map[string]plotter.XYs{}
	for _, p := range s.Points {
		if p.Sweep != sweep {
			continue
		}
		v := y(p)
		if v <= 0 || math.IsNaN(v) {
			continue
		}
		if _, ok := series[p.Row]; !ok {
			names = append(names, p.Row)
		}
		series[p.Row] = append(series[p.Row], plotter.XY{X: x(p), Y: v})
	}
	return names, series
}

// scaleChart draws one sweep's figure against x on a log axis (the
// sweeps double), "" when no row has a value.
func scaleChart(title, xlabel, ylabel string, s *bench.Scale, sweep bench.Sweep, x, y func(bench.ScalePoint) float64, logY bool) (string, error) {
	names, series := scaleSeries(s, sweep, x, y)
	if len(names) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	top := 0.0
	for _, n := range names {
		l, pts, err := plotter.NewLinePoints(series[n])
		if err != nil {
			return "", fmt.Errorf("scale chart %q, row %s: %w", title, n, err)
		}
		l.Color, pts.Color, l.Width = benchColour(n), benchColour(n), vg.Points(1.5)
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
		for _, xy := range series[n] {
			top = math.Max(top, xy.Y)
		}
	}
	// Room above the highest point for the legend.
	if logY {
		p.Y.Max = top * 10
	} else {
		p.Y.Min, p.Y.Max = 0, top*1.4
	}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 9*vg.Centimeter)
}

// benchScaleCharts: p99 latency and the proxies' cost per request against
// the offered rate, and the closed loop's rate against connections.
func benchScaleCharts(s *bench.Scale) ([]template.HTML, error) {
	if s == nil {
		return nil, nil
	}
	target := func(p bench.ScalePoint) float64 { return p.Run.TargetRPS }
	conns := func(p bench.ScalePoint) float64 { return float64(p.Conns) }
	charts := []struct {
		title, x, y string
		sweep       bench.Sweep
		fx, fy      func(bench.ScalePoint) float64
		log         bool
	}{
		{fmt.Sprintf("p99 latency against the offered rate (paced, %d conns)", s.Plan.RateConns), "offered rps (log)", "p99, µs (log)",
			bench.SweepRate, target, func(p bench.ScalePoint) float64 { return p.Run.Latency.P99 }, true},
		{"achieved against offered rate: where each path stops keeping up", "offered rps (log)", "achieved / offered",
			bench.SweepRate, target, func(p bench.ScalePoint) float64 { return p.Run.AchievedRPS / p.Run.TargetRPS }, false},
		{"both proxies' vCPU per 1000 rps against the offered rate", "offered rps (log)", "vCPU per 1000 rps",
			bench.SweepRate, target, bench.ScalePoint.PerThousand, false},
		{"closed loop: achieved rps against connections", "connections (log)", "achieved rps",
			bench.SweepConns, conns, func(p bench.ScalePoint) float64 { return p.Run.AchievedRPS }, false},
	}
	var out []template.HTML
	for _, c := range charts {
		svg, err := scaleChart(c.title, c.x, c.y, s, c.sweep, c.fx, c.fy, c.log)
		if err != nil {
			return nil, err
		}
		if svg != "" {
			out = append(out, template.HTML(svg)) //nolint:gosec // produced by vgsvg from numbers
		}
	}
	return out, nil
}

// scaleCells is the scale table's cells: per row, one per point of a
// sweep in the plan's order.
type scaleRow struct {
	Row        string
	Rate       []*bench.ScalePoint
	Conns      []*bench.ScalePoint
	Saturation bench.Saturation
}

func scaleRows(s *bench.Scale) []scaleRow {
	if s == nil {
		return nil
	}
	find := func(row string, sw bench.Sweep, conns int, rps float64) *bench.ScalePoint {
		for i := range s.Points {
			p := &s.Points[i]
			if p.Row == row && p.Sweep == sw && p.Conns == conns && p.Run.TargetRPS == rps {
				return p
			}
		}
		return nil
	}
	var out []scaleRow
	for _, sat := range s.Saturation {
		r := scaleRow{Row: sat.Row, Saturation: sat}
		for _, rps := range s.Plan.Rates {
			r.Rate = append(r.Rate, find(sat.Row, bench.SweepRate, s.Plan.RateConns, float64(rps)))
		}
		for _, c := range s.Plan.Conns {
			r.Conns = append(r.Conns, find(sat.Row, bench.SweepConns, c, 0))
		}
		out = append(out, r)
	}
	return out
}

var benchScaleTmpl = template.Must(template.New("benchscale").Funcs(benchFuncs).Parse(`<h2>Scale curves</h2>
<p>Every HTTP row again: paced at {{range $i, $r := .S.Plan.Rates}}{{if $i}}, {{end}}{{$r}}{{end}} rps over {{.S.Plan.RateConns}} connections, and closed loop over {{range $i, $c := .S.Plan.Conns}}{{if $i}}, {{end}}{{$c}}{{end}} connections, {{.S.Plan.Seconds}} s a point; at each point the rows ran one after another. A cell: achieved rps; p50 / p99 µs (added over direct's at the same point, where direct ran it); both proxies' vCPU per 1000 rps. <em>Held</em> is the highest rate a row kept up with (98 % of it achieved, nothing failed) with every lower rate held too.</p>
<table><tr><th>row</th>{{range .S.Plan.Rates}}<th>{{.}} rps</th>{{end}}<th>held</th></tr>
{{range .Rows}}<tr><td>{{.Row}}</td>{{range .Rate}}<td>{{with .}}{{f0 .Run.AchievedRPS}}; {{with .Run.Added}}{{sf .P50}} / {{sf .P99}}{{else}}{{f0 .Run.Latency.P50}} / {{f0 .Run.Latency.P99}}{{end}}{{if .PerThousand}}; {{f3 .PerThousand}}{{end}}{{if .Run.Failed}}; {{.Run.Failed}} failed{{end}}{{else}}—{{end}}</td>{{end}}<td>{{.Saturation.HeldRPS}}{{with .Saturation.FirstMissed}} (missed {{.}}){{end}}</td></tr>
{{end}}</table>
<table><tr><th>row</th>{{range .S.Plan.Conns}}<th>{{.}} conns</th>{{end}}<th>max rps</th></tr>
{{range .Rows}}<tr><td>{{.Row}}</td>{{range .Conns}}<td>{{with .}}{{f0 .Run.AchievedRPS}}; {{with .Run.Added}}{{sf .P50}} / {{sf .P99}}{{else}}{{f0 .Run.Latency.P50}} / {{f0 .Run.Latency.P99}}{{end}}{{if .PerThousand}}; {{f3 .PerThousand}}{{end}}{{if .Run.Failed}}; {{.Run.Failed}} failed{{end}}{{else}}—{{end}}</td>{{end}}<td>{{f0 .Saturation.MaxRPS}} at {{.Saturation.MaxConns}}</td></tr>
{{end}}</table>
{{range .Charts}}<figure>{{.}}</figure>
{{end}}`))

// benchScaleSection is the scale curves' tables and charts, "" when the
// run skipped them.
func benchScaleSection(s *bench.Scale) (template.HTML, error) {
	if s == nil {
		return "", nil
	}
	charts, err := benchScaleCharts(s)
	if err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if err := benchScaleTmpl.Execute(&buf, struct {
		S      *bench.Scale
		Rows   []scaleRow
		Charts []template.HTML
	}{s, scaleRows(s), charts}); err != nil {
		return "", fmt.Errorf("failed to render the scale curves: %w", err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // html/template's own output
}
