package render

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/aether-mesh/aether/soak/bench"
)

// benchColours gives each bench row its colour in every chart.
var benchColours = map[string]color.Color{
	"direct":  color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff},
	"mesh-h2": colH2,
	"mesh-h3": colH3,
	"haproxy": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"nginx":   color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
}

func benchColour(name string) color.Color {
	if c, ok := benchColours[name]; ok {
		return c
	}
	return colInvalid
}

// benchLatencyChart: each HTTP row's paced latency distribution (latency
// against percentile, log scale), so the tails are seen side by side.
func benchLatencyChart(r *bench.Report) (string, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("latency at %d rps (h2load, HTTP/1.1, %d B)", r.Method.RPS, r.Method.PayloadBytes)
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency, µs (log)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	n, top := 0, 0.0
	for _, row := range r.Rows {
		if row.Paced == nil || len(row.Paced.Latency.Quantiles) != len(bench.QuantileLevels) {
			continue
		}
		var xy plotter.XYs
		for i, q := range bench.QuantileLevels {
			if v := row.Paced.Latency.Quantiles[i]; v > 0 {
				xy = append(xy, plotter.XY{X: q * 100, Y: v})
				top = math.Max(top, v)
			}
		}
		if len(xy) == 0 {
			continue
		}
		l, err := plotter.NewLine(xy)
		if err != nil {
			return "", err
		}
		l.Color, l.Width = benchColour(row.Name), vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(row.Name, l)
		n++
	}
	if n == 0 {
		return "", nil
	}
	p.X.Min, p.X.Max = 0, 100
	// A decade above the slowest tail, for the legend.
	p.Y.Max = top * 10
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 9*vg.Centimeter)
}

// benchCPUChart: each proxied HTTP row's vCPU per 1,000 rps, one bar per
// proxy (the source node's, then the destination's), paced load.
func benchCPUChart(r *bench.Report) (string, error) {
	p := plot.New()
	p.Title.Text = "CPU per request: vCPU per 1000 rps, each proxy, paced load"
	p.Y.Label.Text = "vCPU per 1000 rps"
	var names []string
	var a, b plotter.Values
	top := 0.0
	for _, row := range r.Rows {
		if row.Paced == nil || len(row.Proxies) != 2 {
			continue
		}
		names = append(names, row.Name)
		a = append(a, row.Proxies[0].PerThousand)
		b = append(b, row.Proxies[1].PerThousand)
		top = math.Max(top, math.Max(row.Proxies[0].PerThousand, row.Proxies[1].PerThousand))
	}
	if len(names) == 0 {
		return "", nil
	}
	w := vg.Points(18)
	ba, err := plotter.NewBarChart(a, w)
	if err != nil {
		return "", err
	}
	ba.Color, ba.Offset = colH2, -w/2
	bb, err := plotter.NewBarChart(b, w)
	if err != nil {
		return "", err
	}
	bb.Color, bb.Offset = colH3, w/2
	p.Add(ba, bb)
	p.Legend.Add("source node's proxy", ba)
	p.Legend.Add("destination node's proxy", bb)
	p.Legend.Top = true
	// Room above the tallest bar for the legend.
	p.Y.Min, p.Y.Max = 0, top*1.4
	p.NominalX(names...)
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 8*vg.Centimeter)
}

// benchTrendChart: across runs, each proxied HTTP row's vCPU per 1,000
// rps (both proxies together).
func benchTrendChart(h []bench.HistoryEntry) (string, error) {
	series := map[string]plotter.XYs{}
	for _, e := range h {
		for _, row := range e.Rows {
			if row.PerThousand > 0 && row.AchievedRPS > 0 {
				series[row.Name] = append(series[row.Name], plotter.XY{X: float64(e.Start.Unix()), Y: row.PerThousand})
			}
		}
	}
	if len(series) == 0 {
		return "", nil
	}
	p := plot.New()
	p.Title.Text = "bench: both proxies' vCPU per 1000 rps across runs"
	p.Y.Label.Text = "vCPU per 1000 rps"
	p.X.Tick.Marker = plot.TimeTicks{Format: "01-02 15:04"}
	var names []string
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	x0, x1 := math.Inf(1), math.Inf(-1)
	for _, n := range names {
		xy := series[n]
		l, s, err := plotter.NewLinePoints(xy)
		if err != nil {
			return "", err
		}
		l.Color, s.Color = benchColour(n), benchColour(n)
		p.Add(l, s)
		p.Legend.Add(n, l, s)
		for _, pt := range xy {
			x0, x1 = math.Min(x0, pt.X), math.Max(x1, pt.X)
		}
	}
	pad := math.Max(3600, (x1-x0)*0.1)
	p.X.Min, p.X.Max = x0-pad, x1+pad
	p.Y.Min = 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 8*vg.Centimeter)
}

// BenchHTML renders one bench run: the table of every row and the charts.
func BenchHTML(r *bench.Report) ([]byte, error) {
	lat, err := benchLatencyChart(r)
	if err != nil {
		return nil, err
	}
	cpu, err := benchCPUChart(r)
	if err != nil {
		return nil, err
	}
	scale, err := benchScaleSection(r.Scale)
	if err != nil {
		return nil, err
	}
	d := struct {
		R                   *bench.Report
		Latency, CPU, Scale template.HTML
	}{R: r, Latency: template.HTML(lat), CPU: template.HTML(cpu), Scale: scale} //nolint:gosec // produced by vgsvg from numbers
	var buf bytes.Buffer
	if err := benchPage.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("failed to render the bench page: %w", err)
	}
	return buf.Bytes(), nil
}

// BenchIndex renders the bench history (reports/bench/index.html): every
// run with its headline figures and the trend.
func BenchIndex(h []bench.HistoryEntry) ([]byte, error) {
	sec, err := benchSection(h, "")
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := benchIndexPage.Execute(&buf, sec); err != nil {
		return nil, fmt.Errorf("failed to render the bench index: %w", err)
	}
	return buf.Bytes(), nil
}

// benchSection is the history's table and trend chart, its links to the
// run pages under prefix.
func benchSection(h []bench.HistoryEntry, prefix string) (template.HTML, error) {
	if len(h) == 0 {
		return "", nil
	}
	h = append([]bench.HistoryEntry(nil), h...)
	sort.SliceStable(h, func(i, j int) bool { return h[i].Start.Before(h[j].Start) })
	trend, err := benchTrendChart(h)
	if err != nil {
		return "", err
	}
	d := struct {
		Prefix string
		H      []bench.HistoryEntry
		Trend  template.HTML
	}{Prefix: prefix, H: h, Trend: template.HTML(trend)} //nolint:gosec // produced by vgsvg from numbers
	var buf bytes.Buffer
	if err := benchSectionTmpl.Execute(&buf, d); err != nil {
		return "", fmt.Errorf("failed to render the bench history: %w", err)
	}
	return template.HTML(buf.String()), nil //nolint:gosec // html/template's own output
}

var benchFuncs = template.FuncMap{
	"f0": func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"f1": fixed1,
	"f2": func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"f3": fixed3,
	"sf": func(v float64) string { return fmt.Sprintf("%+.0f", v) },
	"ts": func(v interface{ Format(string) string }) string { return v.Format("2006-01-02 15:04:05") },
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
}

var benchPage = template.Must(template.New("bench").Funcs(benchFuncs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>aether bench {{.R.Run}}</title>
<style>` + style + `</style></head><body>
<h1>aether bench {{.R.Run}}</h1>
<p>{{ts .R.Start}} to {{ts .R.End}} UTC on {{.R.CPUs}} CPUs, load average {{f2 (index .R.LoadBefore 0)}} {{f2 (index .R.LoadBefore 1)}} {{f2 (index .R.LoadBefore 2)}} before, {{f2 (index .R.LoadAfter 0)}} {{f2 (index .R.LoadAfter 1)}} {{f2 (index .R.LoadAfter 2)}} after (the machine is shared).
Build {{with .R.Build.Revision}}{{short .}}{{else}}unknown{{end}}{{if .R.Build.Dirty}} (dirty){{end}}, {{.R.Build.Go}}, kernel {{.R.Build.Kernel}}.
{{with .R.Tools}}Tools: {{range $k, $v := .}}{{$v}}; {{end}}{{end}}</p>
<p>Load: {{.R.Method.Generator}}, {{.R.Method.PayloadBytes}} B POST bodies, {{.R.Method.RPS}} rps paced over {{.R.Method.Conns}} connections for {{.R.Method.PacedSeconds}} s, then closed loop for {{.R.Method.ClosedSeconds}} s, per visit; {{.R.Method.StreamTool}} for {{.R.Method.StreamSeconds}} s per visit (UDP unpaced, {{.R.Method.UDPLen}} B datagrams). Peers run {{.R.Method.Threads}} workers each. Visiting order (ABBA): {{range $i, $o := .R.Order}}{{if $i}}, {{end}}{{$o}}{{end}}.</p>
<h2>HTTP rows</h2>
<table><tr><th>row</th><th>path</th><th>achieved rps</th><th>p50 / p90 / p99 µs</th><th>added p50 / p90 / p99 µs</th><th>closed-loop rps</th><th>vCPU per 1000 rps (each proxy)</th><th>closed loop vCPU per 1000 rps</th><th>RSS MiB</th><th>failed</th></tr>
{{range .R.Rows}}{{if .Paced}}<tr><td>{{.Name}}</td><td>{{.Path}}</td><td>{{f1 .Paced.AchievedRPS}}</td><td>{{f0 .Paced.Latency.P50}} / {{f0 .Paced.Latency.P90}} / {{f0 .Paced.Latency.P99}}</td><td>{{with .Paced.Added}}{{sf .P50}} / {{sf .P90}} / {{sf .P99}}{{else}}baseline{{end}}</td><td>{{f0 .Closed.AchievedRPS}}</td><td>{{range $i, $p := .Proxies}}{{if $i}}<br>{{end}}{{$p.Node}}: {{f3 $p.PerThousand}}{{else}}—{{end}}</td><td>{{range $i, $p := .Proxies}}{{if $i}}<br>{{end}}{{$p.Node}}: {{f3 $p.ClosedPerThousand}}{{else}}—{{end}}</td><td>{{range $i, $p := .Proxies}}{{if $i}}<br>{{end}}{{$p.Node}}: {{f1 $p.RSSMiB}} ({{$p.Procs}} proc){{else}}—{{end}}</td><td>{{.Paced.Failed}} + {{.Closed.Failed}}</td></tr>
{{end}}{{end}}</table>
<h2>Stream rows</h2>
<table><tr><th>row</th><th>path</th><th>Mbit/s received</th><th>loss %</th><th>of direct</th><th>vCPU (each proxy)</th><th>RSS MiB</th></tr>
{{range .R.Rows}}{{if .Stream}}<tr><td>{{.Name}}</td><td>{{.Path}}</td><td>{{f0 .Stream.Mbps}}</td><td>{{f2 .Stream.LossPercent}}</td><td>{{if .Stream.OfDirect}}{{f2 .Stream.OfDirect}}{{else}}—{{end}}</td><td>{{range $i, $p := .Proxies}}{{if $i}}<br>{{end}}{{$p.Node}}: {{f2 $p.VCPU}}{{else}}—{{end}}</td><td>{{range $i, $p := .Proxies}}{{if $i}}<br>{{end}}{{$p.Node}}: {{f1 $p.RSSMiB}}{{else}}—{{end}}</td></tr>
{{end}}{{end}}</table>
<h2>Path witnesses</h2><p>Each mesh row's traffic, counted by the source node's proxy on the path the row names (the run fails when a counter does not move):</p>
<ul>{{range .R.Rows}}{{if .Witness}}<li>{{.Name}}: {{.Witness}}</li>{{end}}{{end}}</ul>
{{if .Latency}}<h2>Latency distributions</h2><figure>{{.Latency}}<figcaption>paced load, both visits pooled</figcaption></figure>{{end}}
{{if .CPU}}<h2>CPU per request</h2><figure>{{.CPU}}<figcaption>from /proc/&lt;pid&gt;/stat over every process of each proxy</figcaption></figure>{{end}}
{{.Scale}}
</body></html>
`))

var benchIndexPage = template.Must(template.New("benchindex").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>aether bench runs</title>
<style>` + style + `</style></head><body>
<h1>aether bench runs</h1>
{{.}}
</body></html>
`))

var benchSectionTmpl = template.Must(template.New("benchsection").Funcs(benchFuncs).Parse(`<table><tr><th>run</th><th>start</th><th>build</th><th>load 1 min</th><th>row: both proxies' vCPU per 1000 rps, added p90 / p99 µs; or Mbit/s (share of direct)</th></tr>
{{range .H}}<tr><td><a href="{{$.Prefix}}{{.Run}}/report.html">{{.Run}}</a></td><td>{{ts .Start}}</td><td>{{short .Revision}}{{if .Dirty}} (dirty){{end}}</td><td>{{f2 .Load1}}</td><td>{{range $i, $r := .Rows}}{{if $i}}; {{end}}{{$r.Name}}: {{if $r.Mbps}}{{f0 $r.Mbps}} Mbit/s{{if $r.OfDirect}} ({{f2 $r.OfDirect}}){{end}}{{else}}{{if $r.PerThousand}}{{f3 $r.PerThousand}}, {{end}}{{sf $r.AddedP90}} / {{sf $r.AddedP99}}{{end}}{{end}}</td></tr>
{{end}}</table>
{{if .Trend}}<figure>{{.Trend}}<figcaption>both proxies' vCPU per 1000 rps at the paced load, per run</figcaption></figure>{{end}}
`))
