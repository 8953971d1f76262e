package render

import (
	"html"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/soak/bench"
)

func benchFixture() *bench.Report {
	q := func(base float64) []float64 {
		var out []float64
		for i := range bench.QuantileLevels {
			out = append(out, base+float64(i))
		}
		return out
	}
	lat := func(base float64) bench.Latency {
		return bench.Latency{Samples: 30000, P50: base, P90: base * 1.5, P99: base * 3, Quantiles: q(base)}
	}
	two := func(a, b float64) []bench.ProxyCost {
		return []bench.ProxyCost{{Name: "p", Node: "node-a", PerThousand: a, VCPU: a, RSSMiB: 30}, {Name: "p", Node: "node-b", PerThousand: b, VCPU: b, RSSMiB: 31}}
	}
	return &bench.Report{Run: "r1", Start: time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC), End: time.Date(2026, 12, 1, 16, 7, 0, 0, time.UTC),
		CPUs: 2, LoadBefore: [3]float64{6.75, 11, 12.7}, Method: bench.Method{Generator: "h2load --h1", Conns: 4, RPS: 1000, PayloadBytes: 1024},
		Order: []string{"direct", "mesh-h2", "tcp-mesh", "tcp-mesh", "mesh-h2", "direct"},
		Rows: []bench.Row{
			{Name: "direct", Kind: bench.KindHTTP, Path: "web-0 -> api-0", Paced: &bench.HTTPRun{AchievedRPS: 999.9, Latency: lat(200)}, Closed: &bench.HTTPRun{AchievedRPS: 5000}},
			{Name: "mesh-h2", Kind: bench.KindHTTP, Path: "web-0 -> proxy -> proxy -> api-0", Paced: &bench.HTTPRun{AchievedRPS: 998.7, Latency: lat(760), Added: &bench.Added{P50: 560, P90: 840, P99: 1680}},
				Closed: &bench.HTTPRun{AchievedRPS: 2000}, Proxies: two(0.137, 0.141)},
			{Name: "tcp-mesh", Kind: bench.KindTCP, Path: "iperf3", Stream: &bench.StreamRow{Mbps: 4014, OfDirect: 0.59}, Proxies: two(0.9, 0.1)},
		}}
}

func TestBenchHTMLHasTheTableAndCharts(t *testing.T) {
	page, err := BenchHTML(benchFixture())
	if err != nil {
		t.Fatal(err)
	}
	s := html.UnescapeString(string(page))
	if n := strings.Count(s, "<svg"); n != 2 {
		t.Errorf("bench page has %d charts, want 2 (latency distributions, CPU per request)", n)
	}
	for _, want := range []string{"load average 6.75 11.00 12.70", "+560 / +840 / +1680", "node-a: 0.137", "node-b: 0.141", "4014", "0.59", "baseline", "direct, mesh-h2, tcp-mesh, tcp-mesh, mesh-h2, direct"} {
		if !strings.Contains(s, want) {
			t.Errorf("bench page lacks %q", want)
		}
	}
}

func TestIndexWithBenchShowsTheTrend(t *testing.T) {
	r1 := benchFixture()
	r2 := benchFixture()
	r2.Run, r2.Start = "r2", r2.Start.Add(24*time.Hour)
	page, err := IndexWithBench(nil, nil, []bench.HistoryEntry{r2.Entry(), r1.Entry()})
	if err != nil {
		t.Fatal(err)
	}
	s := html.UnescapeString(string(page))
	if n := strings.Count(s, "<svg"); n != 1 {
		t.Errorf("index has %d charts, want the bench trend", n)
	}
	i1, i2 := strings.Index(s, `href="bench/r1/report.html"`), strings.Index(s, `href="bench/r2/report.html"`)
	if i1 < 0 || i2 < 0 || i1 > i2 {
		t.Errorf("bench runs not linked oldest first under bench/: r1 at %d, r2 at %d", i1, i2)
	}
	// Both proxies together: 0.137 + 0.141.
	if !strings.Contains(s, "mesh-h2: 0.278, +840 / +1680") {
		t.Errorf("index lacks mesh-h2's headline figures")
	}
	plain, err := Index(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "Benchmark") {
		t.Error("an index without bench history has a bench section")
	}
}

func TestBenchHTMLHasTheScaleCurves(t *testing.T) {
	r := benchFixture()
	pt := func(row string, sw bench.Sweep, conns int, target, achieved, p99 float64, cost ...float64) bench.ScalePoint {
		p := bench.ScalePoint{Row: row, Sweep: sw, Conns: conns, Run: bench.HTTPRun{TargetRPS: target, AchievedRPS: achieved,
			Latency: bench.Latency{P50: p99 / 3, P99: p99}}}
		for _, c := range cost {
			p.Proxies = append(p.Proxies, bench.ProxyCost{PerThousand: c})
		}
		return p
	}
	plan := bench.ScalePlan{Rates: []int{252, 4000}, RateConns: 4, Conns: []int{1, 64}, Seconds: 5}
	pts := []bench.ScalePoint{
		pt("direct", bench.SweepRate, 4, 252, 252, 400), pt("direct", bench.SweepRate, 4, 4000, 3999, 700),
		pt("mesh-h2", bench.SweepRate, 4, 252, 252, 1400, 0.2, 0.1), pt("mesh-h2", bench.SweepRate, 4, 4000, 2710, 90000, 0.3, 0.2),
		pt("direct", bench.SweepConns, 1, 0, 4100, 300), pt("direct", bench.SweepConns, 64, 0, 9100, 9000),
		pt("mesh-h2", bench.SweepConns, 1, 0, 1100, 1300, 0.3, 0.2), pt("mesh-h2", bench.SweepConns, 64, 0, 2900, 40000, 0.4, 0.3),
	}
	r.Scale = &bench.Scale{Plan: plan, Points: pts, Saturation: bench.Saturate([]string{"direct", "mesh-h2"}, pts)}
	page, err := BenchHTML(r)
	if err != nil {
		t.Fatal(err)
	}
	s := html.UnescapeString(string(page))
	if n := strings.Count(s, "<svg"); n != 6 {
		t.Errorf("bench page has %d charts, want 6 (latency, CPU, and the four scale charts)", n)
	}
	for _, want := range []string{"Scale curves", "252 rps", "64 conns", "2710;", "0.500", "252 (missed 4000)", "2900 at 64", "9100 at 64"} {
		if !strings.Contains(s, want) {
			t.Errorf("bench page lacks %q", want)
		}
	}
	r.Scale = nil
	page, err = BenchHTML(r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(page), "Scale curves") {
		t.Error("a run without scale curves shows a scale section")
	}
}
