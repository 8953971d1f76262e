package run

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

func TestMonotonicReadsCountersAsIncrease(t *testing.T) {
	var m Monotonic
	steps := []struct {
		samples map[string]float64
		want    float64
		why     string
	}{
		{map[string]float64{"a": 100, "b": 5}, 0, "the first scrape is the baseline"},
		{map[string]float64{"a": 110, "b": 5}, 10, "growth"},
		{map[string]float64{"a": 110, "b": 5, "c": 3}, 13, "a series first seen grew from zero"},
		{map[string]float64{"a": 4, "b": 5, "c": 3}, 17, "a fall is a reset: the new value is growth"},
		{map[string]float64{"a": 6}, 19, "vanished series add nothing"},
		{map[string]float64{"a": 1, "b": 2}, 22, "a series back after vanishing grew from zero, and a fall is a reset"},
	}
	for _, s := range steps {
		if got := m.Observe(s.samples); got != s.want {
			t.Fatalf("%s: total %v, want %v", s.why, got, s.want)
		}
	}
}

func TestParseTextKeepsEachSeries(t *testing.T) {
	body := `# TYPE aether_proxy_http_requests_total counter
aether_proxy_http_requests_total{cluster="h2:api",code="200",flags="",listener="http-outbound~demo~web-0"} 7
aether_proxy_http_requests_total{cluster="quic:api.demo@web.demo",code="503",flags="NC",listener="http-outbound~demo~web-0"} 2
aether_proxy_http_requests_total_other 9
`
	sc, err := parseText(body, metricHTTPRequests)
	if err != nil {
		t.Fatal(err)
	}
	reqs := sc[metricHTTPRequests]
	if len(reqs) != 2 {
		t.Fatalf("%d series, want 2: %v", len(reqs), reqs)
	}
	nc := where(reqs, func(l string) bool { return label(l, "code") == "503" && label(l, "flags") == "NC" })
	if len(nc) != 1 {
		t.Fatalf("503 NC series %v", nc)
	}
	for _, v := range nc {
		if v != 2 {
			t.Fatalf("503 NC = %v, want 2", v)
		}
	}
	if _, err := parseText("aether_proxy_http_requests_total{code=\"200\"} x\n", metricHTTPRequests); err == nil {
		t.Fatal("a sample that is not a number was read")
	}
}

func TestClipSpansEndsTheSoakAtTheLastTick(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	s := func(k StepKind, from, to int) Span {
		sp := Span{Step: Step{Kind: k}, Start: at.Add(time.Duration(from) * time.Second)}
		if to >= 0 {
			sp.End = at.Add(time.Duration(to) * time.Second)
		}
		return sp
	}
	got := clipSpans([]Span{s(Warmup, 0, 3), s(Measure, 3, 8), s(Switch, 8, -1), s(Measure, 10, 15)}, at.Add(9*time.Second))
	if len(got) != 3 || got[2].Kind != Switch || !got[2].End.Equal(at.Add(9*time.Second)) {
		t.Fatalf("clipped %+v; want the warm-up, the whole window and the switch cut at the end", got)
	}
	got = clipSpans([]Span{s(Measure, 0, 5)}, at.Add(4*time.Second))
	if len(got) != 0 {
		t.Fatalf("a window cut short was kept: %+v", got)
	}
}

// Steps tile the soak: each starts where the last ended, so no span
// between them is graded by accident (a transport switch's errors spilled
// into such a gap once).
func TestStepsAreContiguous(t *testing.T) {
	e := &executor{clk: clock{start: time.Now().Truncate(10 * time.Millisecond), tick: 10 * time.Millisecond}}
	var prev Span
	for i := range 4 {
		sp, err := e.run(context.Background(), Step{Kind: Warmup, Length: 20 * time.Millisecond}, "w")
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && !sp.Start.Equal(prev.End) {
			t.Fatalf("step %d starts at %s, the one before ended at %s", i, sp.Start.Format(time.StampMicro), prev.End.Format(time.StampMicro))
		}
		prev = sp
	}
}

// sameStart reads a process's start as the process collector reports it:
// this test process's own process_start_time_seconds is its start, and a
// second later is another process's.
func TestSameStartMatchesTheProcessCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	start := -1.0
	for _, f := range fams {
		if f.GetName() == metricStart {
			start = f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	if start < 0 {
		t.Fatalf("the process collector exports no %s", metricStart)
	}
	if !sameStart(os.Getpid(), start) {
		t.Errorf("pid %d: start %f not read as its own", os.Getpid(), start)
	}
	if sameStart(os.Getpid(), start+1) {
		t.Errorf("pid %d: start %f read as its own, it started at %f", os.Getpid(), start+1, start)
	}
}
