package evidence

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

func TestK6SummaryShapes(t *testing.T) {
	for _, tc := range []struct {
		file          string
		shape         string
		total, failed int64
	}{
		// Each file has far fewer failures than successes, so reading
		// "passes" as successes would give a wildly different Failed.
		{"testdata/k6-handlesummary.json", ShapeK6HandleSummary, 1200, 3},
		{"testdata/k6-summary-export.json", ShapeK6SummaryExport, 5000, 12},
		{"testdata/k6-versioned.json", ShapeK6Versioned, 2000, 1},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			run, err := LoadK6Summary(tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if run.Shape != tc.shape || run.Total != tc.total || run.Failed != tc.failed || run.Timed {
				t.Errorf("got shape %q total %d failed %d timed %v, want %q %d %d untimed", run.Shape, run.Total, run.Failed, run.Timed, tc.shape, tc.total, tc.failed)
			}
		})
	}
}

func TestK6SummaryRejects(t *testing.T) {
	for _, tc := range []struct {
		name, doc, field, reason string
	}{
		{"not json", `{"metrics": `, "(document)", "not a JSON object"},
		{"no metrics", `{"root_group": {}}`, "metrics", "not a k6 summary"},
		{"no http_reqs", `{"metrics": {"http_req_failed": {"passes": 1, "fails": 2}}}`, "metrics.http_reqs", "missing"},
		{"passes not a number", `{"metrics": {"http_reqs": {"count": 3}, "http_req_failed": {"passes": "1", "fails": 2}}}`, "metrics.http_req_failed.passes", "not a number"},
		{"passes fractional", `{"metrics": {"http_reqs": {"count": 3}, "http_req_failed": {"passes": 1.5, "fails": 2}}}`, "metrics.http_req_failed.passes", "not a count"},
		{"totals disagree", `{"metrics": {"http_reqs": {"count": 10}, "http_req_failed": {"passes": 1, "fails": 2}}}`, "metrics.http_req_failed", "http_reqs.count = 10"},
		{"handleSummary without values", `{"metrics": {"http_reqs": {"type": "counter", "values": {"count": 3}}, "http_req_failed": {"type": "rate"}}}`, "metrics.http_req_failed.values", "missing"},
		{"versioned 2.x", `{"version": "2.0.0", "results": {"metrics": []}}`, "version", "not supported"},
		{"versioned without results", `{"version": "1.0.0"}`, "results", "missing"},
		{"versioned without failed", `{"version": "1.0.0", "results": {"metrics": [{"name": "http_reqs", "type": "counter", "values": {"count": 1}}]}}`, "results.metrics[http_req_failed]", "missing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseK6Summary("summary.json", []byte(tc.doc))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError", err)
			}
			if fe.File != "summary.json" || fe.Field != tc.field || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("got %q (field %q), want field %q and reason containing %q", err, fe.Field, tc.field, tc.reason)
			}
		})
	}
}

func TestK6JSONLines(t *testing.T) {
	run, err := LoadK6JSONLines("testdata/k6-out.json")
	if err != nil {
		t.Fatal(err)
	}
	// Four http_req_failed points, three of them failures; the http_reqs
	// and duration points are not failures whatever their value.
	if run.Total != 4 || run.Failed != 3 || len(run.Failures) != 3 || !run.Timed {
		t.Fatalf("got total %d failed %d failures %d timed %v, want 4, 3, 3, true", run.Total, run.Failed, len(run.Failures), run.Timed)
	}
	want := []Failure{
		{Time: time.Date(2026, 9, 30, 7, 55, 0, 200e6, time.UTC), Status: 503},
		{Time: time.Date(2026, 9, 30, 12, 3, 41, 270e6, time.UTC), Status: 504, Error: "1504"},
		{Time: time.Date(2026, 9, 30, 12, 3, 42, 0, time.UTC), Status: 0, Error: "1211"},
	}
	for i, w := range want {
		got := run.Failures[i]
		if !got.Time.Equal(w.Time) || got.Status != w.Status || got.Error != w.Error {
			t.Errorf("failure %d: got %+v, want %+v", i, got, w)
		}
	}
}

func TestK6JSONLinesRejects(t *testing.T) {
	for _, tc := range []struct {
		name, doc, field string
		line             int
	}{
		{"garbage", "{\"type\":\"Metric\"}\nnot json\n", "(line)", 2},
		{"unknown type", `{"type":"Sample","metric":"http_req_failed","data":{}}`, "type", 1},
		{"no time", `{"type":"Point","metric":"http_req_failed","data":{"value":1}}`, "data.time", 1},
		{"rate value", `{"type":"Point","metric":"http_req_failed","data":{"time":"2026-09-30T08:00:00Z","value":0.5}}`, "data.value", 1},
		{"bad status", `{"type":"Point","metric":"http_req_failed","data":{"time":"2026-09-30T08:00:00Z","value":1,"tags":{"status":"five"}}}`, "data.tags.status", 1},
		{"no requests", `{"type":"Point","metric":"http_reqs","data":{"time":"2026-09-30T08:00:00Z","value":1}}`, "http_req_failed", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "out.json")
			if err := os.WriteFile(p, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadK6JSONLines(p)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError", err)
			}
			if fe.File != p || fe.Field != tc.field || fe.Line != tc.line {
				t.Errorf("got %q (line %d field %q), want line %d field %q", err, fe.Line, fe.Field, tc.line, tc.field)
			}
		})
	}
}

func TestWithTimelineMustAgree(t *testing.T) {
	sum, err := LoadK6Summary("testdata/k6-handlesummary.json")
	if err != nil {
		t.Fatal(err)
	}
	events, err := LoadK6JSONLines("testdata/k6-out.json")
	if err != nil {
		t.Fatal(err)
	}
	merged, err := sum.WithTimeline(events)
	if err != nil {
		t.Fatalf("3 failures in both: %v", err)
	}
	if !merged.Timed || merged.Total != 1200 || len(merged.Failures) != 3 {
		t.Errorf("merged = %+v", merged)
	}
	sum.Failed = 4
	if _, err := sum.WithTimeline(events); err == nil || !strings.Contains(err.Error(), "lists 3 failed request(s)") {
		t.Errorf("a timeline missing a failure must be refused, got %v", err)
	}
}

func TestVegeta(t *testing.T) {
	for _, tc := range []struct {
		file, shape   string
		total, failed int64
	}{
		{"testdata/vegeta.json", ShapeVegetaJSON, 4, 2},
		{"testdata/vegeta.csv", ShapeVegetaCSV, 3, 1},
	} {
		run, err := LoadVegeta(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		if run.Shape != tc.shape || run.Total != tc.total || run.Failed != tc.failed || !run.Timed {
			t.Errorf("%s: got %q %d/%d, want %q %d/%d", tc.file, run.Shape, run.Failed, run.Total, tc.shape, tc.failed, tc.total)
		}
		if got := run.Failures[0]; got.Status != 503 || !got.Time.Equal(time.Date(2026, 9, 30, 8, 0, 0, 10000001, time.UTC)) {
			t.Errorf("%s: first failure %+v", tc.file, got)
		}
	}
}

func TestVegetaRejects(t *testing.T) {
	for _, tc := range []struct {
		name, doc, field string
		line             int
	}{
		{"empty", "\n", "(document)", 0},
		{"json without code", `{"timestamp":"2026-09-30T08:00:00Z","error":""}`, "code", 1},
		{"json without timestamp", "{\"code\":200,\"timestamp\":\"2026-09-30T08:00:00Z\"}\n{\"code\":200}", "timestamp", 2},
		{"csv short", "1790755200000000001,200,3911000\n", "(record)", 1},
		{"csv bad time", "yesterday,200,3911000,0,12,,b2s=,mesh,0,GET,http://x,\n", "timestamp", 1},
		{"csv bad code", "1790755200000000001,ok,3911000,0,12,,b2s=,mesh,0,GET,http://x,\n", "code", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "results")
			if err := os.WriteFile(p, []byte(tc.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := LoadVegeta(p)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError", err)
			}
			if fe.Field != tc.field || fe.Line != tc.line {
				t.Errorf("got %q (line %d field %q), want line %d field %q", err, fe.Line, fe.Field, tc.line, tc.field)
			}
		})
	}
}

func TestPromIncreaseAcrossReset(t *testing.T) {
	m, err := LoadPromMatrix("testdata/prom-reset.json")
	if err != nil {
		t.Fatal(err)
	}
	rq, err := m.Select(map[string]string{"__name__": "envoy_http_downstream_rq_total"})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 9, 30, 8, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	// node-1 resets between t2 (2200) and t3 (150): the 150 are new
	// requests. A naive last-minus-first gives 750-1000 = -250.
	for _, tc := range []struct {
		from, to int
		want     float64
	}{{0, 4, 600 + 600 + 150 + 600 + 40}, {1, 3, 600 + 150 + 20}, {3, 4, 600 + 10}, {0, 0, 0}} {
		if got, err := Increase(rq, at(tc.from), at(tc.to)); err != nil || got != tc.want {
			t.Errorf("increase over (t%d, t%d] = %v, %v; want %v", tc.from, tc.to, got, err, tc.want)
		}
	}
	cpu, err := m.Select(map[string]string{"container": "proxy"})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Increase(cpu, at(0), at(4)); err != nil || got != 20.5 {
		t.Errorf("cpu increase = %v, %v; want 20.5", got, err)
	}
	steps, err := Steps(rq, at(0), at(4), time.Minute)
	if err != nil || len(steps) != 4 || steps[2].V != 150+10 {
		t.Errorf("steps = %+v, %v", steps, err)
	}
	if _, err := m.Select(map[string]string{"__name__": "nope"}); err == nil || !strings.Contains(err.Error(), `{__name__="nope"}`) {
		t.Errorf("a selector matching nothing must be an error naming it, got %v", err)
	}
}

// Increase answers only for what the samples saw. node-3's counter first
// appears at t2 with 5000 on it, after it had counted unobserved: over
// (t0, t4] its growth is unknown, and over (t2, t4] it is 5100-5000. A
// boundary at t1+30s lies between samples.
func TestPromIncreaseRefusesWhatItDidNotSee(t *testing.T) {
	m, err := ParsePromMatrix("late.json", []byte(`{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"rq","pod":"node-1"},"values":[[1790755200,"0"],[1790755260,"60"],[1790755320,"120"],[1790755380,"180"],[1790755440,"240"]]},
{"metric":{"__name__":"rq","pod":"node-3"},"values":[[1790755320,"5000"],[1790755380,"5050"],[1790755440,"5100"]]}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 9, 30, 8, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }
	if got, err := Increase(m.Series, at(2), at(4)); err != nil || got != 120+100 {
		t.Errorf("over (t2, t4]: %v, %v; want 220", got, err)
	}
	_, err = Increase(m.Series, at(0), at(4))
	var cov *CoverageError
	if !errors.As(err, &cov) || cov.Series != `{__name__="rq",pod="node-3"}` || !cov.First.Equal(at(2)) {
		t.Errorf("over (t0, t4]: got %v, want a CoverageError for node-3 starting at t2", err)
	}
	_, err = Increase(m.Series, at(2), at(5))
	if !errors.As(err, &cov) {
		t.Errorf("past the last sample: got %v, want a CoverageError", err)
	}
	_, err = Increase(m.Series, at(1).Add(30*time.Second), at(2))
	var grid *GridError
	if !errors.As(err, &grid) || !grid.Before.Equal(at(1)) || !grid.After.Equal(at(2)) {
		t.Errorf("off the grid: got %v, want a GridError between t1 and t2", err)
	}
	if _, err := Steps(m.Series, at(2), at(4), 90*time.Second); !errors.As(err, &grid) {
		t.Errorf("steps off the grid: got %v, want a GridError", err)
	}
}

func TestPromRejects(t *testing.T) {
	for _, tc := range []struct {
		name, doc, field string
	}{
		{"error answer", `{"status":"error","errorType":"bad_data","error":"parse error"}`, "status"},
		{"instant vector", `{"status":"success","data":{"resultType":"vector","result":[]}}`, "data.resultType"},
		{"no data", `{"status":"success"}`, "data"},
		{"NaN", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"NaN"]]}]}}`, "data.result[0].values[0][1]"},
		{"number value", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,2]]}]}}`, "data.result[0].values[0][1]"},
		{"short pair", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1]]}]}}`, "data.result[0].values[0]"},
		{"time goes back", `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[2,"1"],[1,"2"]]}]}}`, "data.result[0].values[1][0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParsePromMatrix("q.json", []byte(tc.doc))
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FieldError", err)
			}
			if fe.Field != tc.field || !strings.HasPrefix(err.Error(), "q.json: ") {
				t.Errorf("got %q (field %q), want field %q", err, fe.Field, tc.field)
			}
		})
	}
}

func writeProfile(t *testing.T, p *profile.Profile) string {
	t.Helper()
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cpu.pb.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCPUProfile(t *testing.T) {
	fn := &profile.Function{ID: 1, Name: "quic::QuicConnection::ProcessUdpPacket"}
	loc := &profile.Location{ID: 1, Line: []profile.Line{{Function: fn}}}
	start := time.Date(2026, 9, 28, 6, 0, 0, 0, time.UTC)
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        1e7,
		TimeNanos:     start.UnixNano(),
		DurationNanos: int64(40 * time.Minute),
		Function:      []*profile.Function{fn},
		Location:      []*profile.Location{loc},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{loc}, Value: []int64{150, 1_500_000_000}},
			{Location: []*profile.Location{loc}, Value: []int64{25, 250_000_000}},
		},
	}
	got, err := LoadCPUProfile(writeProfile(t, p))
	if err != nil {
		t.Fatal(err)
	}
	// The cpu/nanoseconds column, not the sample count.
	if got.CPUSeconds != 1.75 || !got.Start.Equal(start) || got.Duration != 40*time.Minute {
		t.Errorf("got %+v, want 1.75 s from %s for 40m", got, start)
	}

	heap := p.Copy()
	heap.SampleType = []*profile.ValueType{{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"}}
	if _, err := LoadCPUProfile(writeProfile(t, heap)); err == nil || !strings.Contains(err.Error(), `field "sample_type"`) {
		t.Errorf("a heap profile must be refused naming sample_type, got %v", err)
	}
	untimed := p.Copy()
	untimed.TimeNanos = 0
	if _, err := LoadCPUProfile(writeProfile(t, untimed)); err == nil || !strings.Contains(err.Error(), "time_nanos") {
		t.Errorf("a profile without its span must be refused, got %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.pb.gz")
	if err := os.WriteFile(junk, []byte("not a profile"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCPUProfile(junk); err == nil || !strings.Contains(err.Error(), junk) {
		t.Errorf("junk must be refused naming the file, got %v", err)
	}
}

// The fixture soaks' profiles are read by the same importer the grader
// uses; a stack file from a real collector would parse the same way.
func TestFixtureProfilesParse(t *testing.T) {
	files, _ := filepath.Glob("../../fixtures/soaks/*/pprof/*.pb.gz")
	if len(files) == 0 {
		t.Fatal("no fixture profiles found")
	}
	for _, f := range files {
		p, err := LoadCPUProfile(f)
		if err != nil {
			t.Fatal(err)
		}
		if p.CPUSeconds <= 0 || p.Duration != 40*time.Minute {
			t.Errorf("%s: %+v", f, p)
		}
	}
}
