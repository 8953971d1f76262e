package render

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/aether-mesh/aether/soak/grade"
)

var (
	colH2      = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colH3      = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	colLimit   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colBand    = color.NRGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0x50}
	colExclude = color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0x50}
	colInvalid = color.RGBA{R: 0x7f, G: 0x7f, B: 0x7f, A: 0xff}
)

// renderChart is svg; tests that look at the pictures swap it.
var renderChart = svg

// svg renders a plot as an inline <svg> element: the XML declaration is
// dropped (it is not allowed inside HTML) and fonts are not embedded, so a
// browser uses its own; nothing is fetched.
func svg(p *plot.Plot, w, h vg.Length) (string, error) {
	c := vgsvg.New(w, h)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", fmt.Errorf("failed to render chart %q: %w", p.Title.Text, err)
	}
	b := buf.Bytes()
	if i := bytes.Index(b, []byte("<svg")); i >= 0 {
		b = b[i:]
	}
	return string(b), nil
}

func hline(y, x0, x1 float64, c color.Color, dashed bool) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x0, Y: y}, {X: x1, Y: y}})
	if err != nil {
		return nil, err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	}
	return l, nil
}

// cpuChart: proxy CPU per request per window, h2 and h3, invalid windows
// in grey; a window whose CPU per request was not measured has no point.
func cpuChart(c *grade.CPURatio) (string, error) {
	p := plot.New()
	p.Title.Text = "Proxy CPU per request, by window"
	p.X.Label.Text = "window"
	p.Y.Label.Text = "ms CPU / request (both proxies)"
	var h2, h3, bad plotter.XYs
	maxY := 0.0
	for i, w := range c.Windows {
		if w.CPUPerRequestMS == nil {
			continue
		}
		pt := plotter.XY{X: float64(i + 1), Y: *w.CPUPerRequestMS}
		maxY = math.Max(maxY, pt.Y)
		switch {
		case !w.Valid:
			bad = append(bad, pt)
		case w.Protocol == "h3":
			h3 = append(h3, pt)
		default:
			h2 = append(h2, pt)
		}
	}
	for _, s := range []struct {
		xy    plotter.XYs
		name  string
		col   color.Color
		shape draw.GlyphDrawer
	}{{h2, "h2", colH2, draw.CircleGlyph{}}, {h3, "h3", colH3, draw.TriangleGlyph{}}, {bad, "invalid window", colInvalid, draw.CrossGlyph{}}} {
		if len(s.xy) == 0 {
			continue
		}
		sc, err := plotter.NewScatter(s.xy)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = s.col, s.shape, vg.Points(4)
		p.Add(sc)
		p.Legend.Add(s.name, sc)
	}
	p.Y.Min, p.Y.Max = 0, math.Max(1, maxY*1.25)
	p.X.Min, p.X.Max = 0.5, float64(len(c.Windows))+0.5
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 9*vg.Centimeter)
}

// ratioChart: h3/h2 per pair, the estimate with its interval as a band,
// against the gate's limit.
func ratioChart(c *grade.CPURatio) (string, error) {
	p := plot.New()
	p.Title.Text = "h3/h2 per-request CPU, by pair"
	p.X.Label.Text = "pair"
	p.Y.Label.Text = "ratio h3/h2"
	n := float64(len(c.Pairs))
	x0, x1 := 0.5, n+0.5
	maxY := c.Max
	if c.Ratio > 0 {
		if c.Bounded {
			band, err := plotter.NewPolygon(plotter.XYs{{X: x0, Y: c.Lower}, {X: x1, Y: c.Lower}, {X: x1, Y: c.Upper}, {X: x0, Y: c.Upper}})
			if err != nil {
				return "", err
			}
			band.Color, band.LineStyle.Width = colBand, 0
			p.Add(band)
			p.Legend.Add(fmt.Sprintf("%.1f%% interval [%.2f, %.2f]", c.Confidence*100, c.Lower, c.Upper), band)
			maxY = math.Max(maxY, c.Upper)
		}
		est, err := hline(c.Ratio, x0, x1, color.Black, false)
		if err != nil {
			return "", err
		}
		p.Add(est)
		p.Legend.Add(fmt.Sprintf("estimate %.2f×", c.Ratio), est)
	}
	// A left-out pair has no ratio to plot; its slot on the axis stays
	// empty, and the table below the chart says why.
	var used plotter.XYs
	for i, pr := range c.Pairs {
		if pr.Used {
			maxY = math.Max(maxY, pr.Ratio)
			used = append(used, plotter.XY{X: float64(i + 1), Y: pr.Ratio})
		}
	}
	if len(used) > 0 {
		sc, err := plotter.NewScatter(used)
		if err != nil {
			return "", err
		}
		sc.GlyphStyle.Color, sc.GlyphStyle.Shape, sc.GlyphStyle.Radius = colH3, draw.CircleGlyph{}, vg.Points(4)
		p.Add(sc)
		p.Legend.Add("pair", sc)
	}
	lim, err := hline(c.Max, x0, x1, colLimit, true)
	if err != nil {
		return "", err
	}
	p.Add(lim)
	p.Legend.Add(fmt.Sprintf("gate %.2f×", c.Max), lim)
	// Headroom above the data keeps the legend off the points.
	p.Y.Min, p.Y.Max = 0, maxY*1.6
	p.X.Min, p.X.Max = x0, x1
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 9*vg.Centimeter)
}

// timelineChart: events per step over the soak (hours from its start, or
// minutes for a soak under two hours: a 2-minute soak's axis read 0 to
// 0.025 hours), the excluded windows shaded.
func timelineChart(title, ylabel string, g *grade.Grade, pts []grade.TimePoint) (string, error) {
	p := plot.New()
	p.Title.Text = title
	unit, name := time.Hour, "hours"
	if g.End.Sub(g.Start) < 2*time.Hour {
		unit, name = time.Minute, "minutes"
	}
	p.X.Label.Text = name + " since soak start " + g.Start.Format("2006-01-02 15:04:05 MST")
	p.Y.Label.Text = ylabel
	hours := func(t time.Time) float64 { return float64(t.Sub(g.Start)) / float64(unit) }
	maxY := 1.0
	xy := plotter.XYs{{X: 0, Y: 0}}
	for _, pt := range pts {
		xy = append(xy, plotter.XY{X: hours(pt.T), Y: pt.V})
		maxY = math.Max(maxY, pt.V)
	}
	top := maxY * 1.2
	for _, x := range g.Excluded {
		a, b := math.Max(0, hours(x.Start)), math.Min(hours(g.End), hours(x.End))
		if b <= a {
			continue
		}
		// A shaded span narrower than a pixel would vanish; widen it to
		// stay visible at the plot's scale.
		if min := hours(g.End) / 200; b-a < min {
			b = a + min
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: a, Y: 0}, {X: b, Y: 0}, {X: b, Y: top}, {X: a, Y: top}})
		if err != nil {
			return "", err
		}
		poly.Color, poly.LineStyle.Width = colExclude, 0
		p.Add(poly)
		p.Legend.Add("excluded: "+x.Name, poly)
	}
	l, err := plotter.NewLine(xy)
	if err != nil {
		return "", err
	}
	l.StepStyle = plotter.PreStep
	l.Color = colLimit
	p.Add(l)
	p.Legend.Add(ylabel, l)
	p.Y.Min, p.Y.Max = 0, top
	p.X.Min, p.X.Max = 0, hours(g.End)
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 8*vg.Centimeter)
}

// countsChart: each count gate's count beside its limit.
func countsChart(cs []grade.Count) (string, error) {
	p := plot.New()
	p.Title.Text = "Counts per gate (counted vs limit)"
	p.Y.Label.Text = "count"
	counts := make(plotter.Values, len(cs))
	limits := make(plotter.Values, len(cs))
	names := make([]string, len(cs))
	maxY := 1.0
	for i, c := range cs {
		counts[i], limits[i], names[i] = float64(c.Count), float64(c.Limit), c.Name
		maxY = math.Max(maxY, math.Max(counts[i], limits[i]))
	}
	w := vg.Points(18)
	bc, err := plotter.NewBarChart(counts, w)
	if err != nil {
		return "", err
	}
	bc.Color, bc.Offset = colH2, -w/2
	lc, err := plotter.NewBarChart(limits, w)
	if err != nil {
		return "", err
	}
	lc.Color, lc.Offset = colLimit, w/2
	p.Add(bc, lc)
	// Zero-height bars draw nothing; the figures are written above them.
	var xys plotter.XYLabels
	for i := range cs {
		xys.XYs = append(xys.XYs, plotter.XY{X: float64(i), Y: math.Max(counts[i], limits[i])})
		xys.Labels = append(xys.Labels, fmt.Sprintf("%s / %s", grade.FormatCount(cs[i].Count), grade.FormatCount(cs[i].Limit)))
	}
	labels, err := plotter.NewLabels(xys)
	if err != nil {
		return "", err
	}
	for i := range labels.TextStyle {
		labels.TextStyle[i].XAlign = draw.XCenter
		labels.TextStyle[i].YAlign = draw.YBottom
	}
	p.Add(labels)
	p.Legend.Add("counted", bc)
	p.Legend.Add("limit", lc)
	p.Legend.Top = true
	p.NominalX(names...)
	p.Y.Min, p.Y.Max = 0, maxY*1.25
	return renderChart(p, 16*vg.Centimeter, 8*vg.Centimeter)
}

// trendChart: the h3/h2 estimate of each graded run, with its interval,
// against the limit.
func trendChart(gs []*grade.Grade) (string, error) {
	p := plot.New()
	p.Title.Text = "h3/h2 per-request CPU across runs"
	p.Y.Label.Text = "ratio h3/h2"
	p.X.Tick.Marker = plot.TimeTicks{Format: "2006-01-02"}
	var pts errXYs
	limit := 0.0
	maxY := 1.0
	for _, g := range gs {
		if g.CPU == nil || g.CPU.Ratio == 0 {
			continue
		}
		lo, hi := g.CPU.Ratio, g.CPU.Ratio
		if g.CPU.Bounded {
			lo, hi = g.CPU.Lower, g.CPU.Upper
		}
		pts = append(pts, errXY{x: float64(g.Start.Unix()), y: g.CPU.Ratio, lo: g.CPU.Ratio - lo, hi: hi - g.CPU.Ratio})
		limit = math.Max(limit, g.CPU.Max)
		maxY = math.Max(maxY, hi)
	}
	if len(pts) == 0 {
		return "", nil
	}
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return "", err
	}
	sc.GlyphStyle.Color, sc.GlyphStyle.Radius = colH3, vg.Points(4)
	eb, err := plotter.NewYErrorBars(pts)
	if err != nil {
		return "", err
	}
	p.Add(sc, eb)
	p.Legend.Add("estimate with interval", sc)
	x0, x1 := pts[0].x, pts[0].x
	for _, e := range pts {
		x0, x1 = math.Min(x0, e.x), math.Max(x1, e.x)
	}
	pad := math.Max(86400, (x1-x0)*0.1)
	x0, x1 = x0-pad, x1+pad
	lim, err := hline(limit, x0, x1, colLimit, true)
	if err != nil {
		return "", err
	}
	p.Add(lim)
	p.Legend.Add(fmt.Sprintf("gate %.2f×", limit), lim)
	p.X.Min, p.X.Max = x0, x1
	p.Y.Min, p.Y.Max = 0, math.Max(maxY, limit)*1.2
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return renderChart(p, 16*vg.Centimeter, 8*vg.Centimeter)
}

type errXY struct{ x, y, lo, hi float64 }
type errXYs []errXY

func (e errXYs) Len() int                        { return len(e) }
func (e errXYs) XY(i int) (float64, float64)     { return e[i].x, e[i].y }
func (e errXYs) YError(i int) (float64, float64) { return e[i].lo, e[i].hi }
