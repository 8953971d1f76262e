package grade

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/manifest"
)

// leakStart is the synthetic soaks' start.
var leakStart = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// sampled is one gauge series: its labels and a value per sample.
type sampled struct {
	labels map[string]string
	from   time.Duration // first sample, from the soak's start
	every  time.Duration
	values []float64
}

// flatRSS is a process's resident memory holding level with a GC
// sawtooth of 4 MiB: flat, not growing.
func flatRSS(n int, level float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = level + float64(i%8)*512*1024
	}
	return out
}

// growing is level plus perHour of growth per hour, sampled every every.
func growing(n int, every time.Duration, level, perHour float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = level + perHour*(time.Duration(i)*every).Hours()
	}
	return out
}

func proc(node, component, life string, from time.Duration, values []float64) sampled {
	l := map[string]string{"__name__": "rss", "node": node, "component": component}
	if life != "" {
		l["life"] = life
	}
	return sampled{labels: l, from: from, every: 5 * time.Second, values: values}
}

// leakSoak writes a soak of length d whose one gate is the leak gate lg
// over the series, and loads its manifest.
func leakSoak(t *testing.T, d time.Duration, lg manifest.LeakGate, series ...sampled) *manifest.Manifest {
	t.Helper()
	dir := t.TempDir()
	type result struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	var res []result
	for _, s := range series {
		r := result{Metric: s.labels}
		for i, v := range s.values {
			ts := leakStart.Add(s.from + time.Duration(i)*s.every)
			r.Values = append(r.Values, [2]any{json.Number(fmt.Sprintf("%.3f", float64(ts.UnixMilli())/1000)), fmt.Sprint(v)})
		}
		res = append(res, r)
	}
	b, err := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": res}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "prometheus"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus", "resources.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	lg.Series = &manifest.Series{Prometheus: "prometheus/resources.json", Match: map[string]string{"__name__": "rss"}}
	m := manifest.Manifest{Name: "leaks", Builds: []string{"abc1234"}, Start: leakStart, End: leakStart.Add(d),
		Gates: manifest.Gates{Leaks: []manifest.LeakGate{lg}}}
	y, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(path, y, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return loaded
}

// rssGate is a resident-memory gate as the long soak states it: 64 MiB/h,
// 30 s of settling per life, 20 samples and 5 minutes at least.
func rssGate(expect ...string) manifest.LeakGate {
	return manifest.LeakGate{Name: "leak: RSS", Group: []string{"node", "component"}, Life: "life", MaxPerHour: 64 << 20, Unit: "bytes",
		Settle: manifest.Duration{Duration: 30 * time.Second}, MinSamples: 20, MinSpan: manifest.Duration{Duration: 5 * time.Minute}, Expect: expect}
}

// gradeLeaks grades m and checks what the release gate would: every
// gate's verdict follows from its inputs alone.
func gradeLeaks(t *testing.T, m *manifest.Manifest) (*Grade, Gate, Leak) {
	t.Helper()
	g, err := Run(m)
	if err != nil {
		t.Fatal(err)
	}
	gt := gate(t, g, "leak: RSS")
	if v, err := gt.Inputs.Decide(); err != nil || v != gt.Verdict {
		t.Fatalf("gate graded %s, its inputs decide %s (%v): %+v", gt.Verdict, v, err, gt.Inputs.Ratio)
	}
	if problems := results.CheckSoak("grade.json", results.SoakGrade{Soak: g.Soak, Builds: g.Builds, Verdict: g.Verdict, Gates: g.Gates}); len(problems) > 0 {
		t.Fatalf("the release gate's check disagrees: %v", problems)
	}
	if len(g.Leaks) != 1 {
		t.Fatalf("%d leak evidences, want 1", len(g.Leaks))
	}
	return g, gt, g.Leaks[0]
}

func process(t *testing.T, l Leak, name string) LeakProcess {
	t.Helper()
	for _, p := range l.Processes {
		if p.Name == name {
			return p
		}
	}
	t.Fatalf("no process %s in %+v", name, l.Processes)
	return LeakProcess{}
}

// An hour of flat processes passes, each fitted near zero.
func TestLeakGateFlatPasses(t *testing.T) {
	m := leakSoak(t, time.Hour, rssGate("node-a/agent", "node-a/proxy"),
		proc("node-a", "proxy", "1", 0, flatRSS(720, 40<<20)),
		proc("node-a", "agent", "1", 0, flatRSS(720, 25<<20)))
	g, gt, l := gradeLeaks(t, m)
	if gt.Verdict != Pass || g.Verdict != Pass {
		t.Fatalf("flat processes: %s (%s; %s)", gt.Verdict, gt.Reason, gt.Figure)
	}
	for _, p := range l.Processes {
		if p.PerHour == nil || math.Abs(*p.PerHour) > 1<<20 || p.Samples < 700 {
			t.Errorf("%s: %+v, want a fit near 0 from ~714 settled samples", p.Name, p)
		}
	}
}

// One process growing beyond the bound fails the gate although the other
// passes, and the failure names it with its rate.
func TestLeakGateGrowthBeyondTheBoundFails(t *testing.T) {
	m := leakSoak(t, time.Hour, rssGate(),
		proc("node-a", "proxy", "1", 0, flatRSS(720, 40<<20)),
		proc("node-b", "proxy", "1", 0, growing(720, 5*time.Second, 40<<20, 100<<20)))
	_, gt, l := gradeLeaks(t, m)
	if gt.Verdict != Fail || !strings.Contains(gt.Reason, "node-b/proxy +100.00 MiB/h") {
		t.Fatalf("a 100 MiB/h process against 64 MiB/h: %s (%s)", gt.Verdict, gt.Reason)
	}
	if p := process(t, l, "node-a/proxy"); p.Verdict != Pass {
		t.Errorf("the flat process: %s (%s)", p.Verdict, p.Reason)
	}
	// The positive witness of the bound: the same growth under it passes.
	m = leakSoak(t, time.Hour, rssGate(), proc("node-b", "proxy", "1", 0, growing(720, 5*time.Second, 40<<20, 50<<20)))
	if _, gt, _ := gradeLeaks(t, m); gt.Verdict != Pass {
		t.Fatalf("50 MiB/h against 64 MiB/h: %s (%s)", gt.Verdict, gt.Reason)
	}
}

// Too few samples, too short a span, or a process not measured at all
// leaves the gate inconclusive, not passed, although every sample there
// is flat; a growth beyond the bound elsewhere still fails it.
func TestLeakGateTooLittleIsInconclusive(t *testing.T) {
	for _, tc := range []struct {
		name   string
		d      time.Duration
		gate   manifest.LeakGate
		series []sampled
		want   string
	}{
		{"few samples", time.Hour, rssGate(), []sampled{proc("node-a", "proxy", "1", 0, flatRSS(15, 40<<20))}, "fewer than the 20 a slope needs"},
		{"short span", time.Hour, rssGate(), []sampled{{labels: proc("node-a", "proxy", "1", 0, nil).labels, every: time.Second, values: flatRSS(200, 40<<20)}},
			"less than the 5m0s a slope per hour needs"},
		{"all settling", time.Hour, rssGate(), []sampled{proc("node-a", "proxy", "1", 0, flatRSS(6, 40<<20)), proc("node-a", "proxy", "2", time.Minute, flatRSS(6, 40<<20))},
			"0 sample(s) after settling"},
		{"not measured", time.Hour, rssGate("node-a/proxy", "node-c/agent"), []sampled{proc("node-a", "proxy", "1", 0, flatRSS(720, 40<<20))}, "node-c/agent: not measured"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, gt, _ := gradeLeaks(t, leakSoak(t, tc.d, tc.gate, tc.series...))
			if gt.Verdict != Inconclusive || !strings.Contains(gt.Reason, tc.want) {
				t.Fatalf("got %s (%s), want INCONCLUSIVE saying %q", gt.Verdict, gt.Reason, tc.want)
			}
			if gt.Inputs.Ratio == nil || gt.Inputs.Ratio.Bounded {
				t.Fatalf("an inconclusive gate's inputs must be unbounded: %+v", gt.Inputs.Ratio)
			}
		})
	}
	m := leakSoak(t, time.Hour, rssGate("node-c/agent"), proc("node-b", "proxy", "1", 0, growing(720, 5*time.Second, 40<<20, 100<<20)))
	if _, gt, _ := gradeLeaks(t, m); gt.Verdict != Fail {
		t.Fatalf("a leak beside a process not measured: %s (%s), want FAIL", gt.Verdict, gt.Reason)
	}
}

// A process that restarts is fitted within its lives: growth inside each
// life fails although every restart drops it back, and lives that each
// hold level pass although each starts where it starts.
func TestLeakGateFitsWithinLives(t *testing.T) {
	var leaky, steady []sampled
	for i := range 6 {
		from := time.Duration(i) * 10 * time.Minute
		leaky = append(leaky, proc("node-a", "agent", fmt.Sprint(i+1), from, growing(120, 5*time.Second, 20<<20, 200<<20)))
		steady = append(steady, proc("node-a", "agent", fmt.Sprint(i+1), from, flatRSS(120, float64((20+5*i)<<20))))
	}
	if _, gt, _ := gradeLeaks(t, leakSoak(t, time.Hour, rssGate(), leaky...)); gt.Verdict != Fail {
		t.Fatalf("200 MiB/h within each of six lives: %s (%s)", gt.Verdict, gt.Reason)
	}
	_, gt, l := gradeLeaks(t, leakSoak(t, time.Hour, rssGate(), steady...))
	if gt.Verdict != Pass {
		t.Fatalf("six level lives at rising levels: %s (%s)", gt.Verdict, gt.Reason)
	}
	if p := process(t, l, "node-a/agent"); p.Lives != 6 {
		t.Errorf("lives %d, want 6", p.Lives)
	}
	// The control: the same steady lives as one series (no life label)
	// read the restarts' rising levels as growth.
	var joined []float64
	for i := range 6 {
		joined = append(joined, flatRSS(120, float64((20+20*i)<<20))...)
	}
	if _, gt, _ := gradeLeaks(t, leakSoak(t, time.Hour, rssGate(), proc("node-a", "agent", "1", 0, joined))); gt.Verdict != Fail {
		t.Fatalf("the lives joined into one at rising levels: %s (%s); the control should fail", gt.Verdict, gt.Reason)
	}
}

// A life's first settle of samples are left out: start-up growth is not a
// leak. The control: with no settling the same samples fail.
func TestLeakGateSettlesEachLife(t *testing.T) {
	var values []float64
	for i := range 720 {
		v := float64(60 << 20)
		if i < 6 { // 30 s climbing from 10 MiB to 60 MiB
			v = float64(10<<20) + float64(i)*float64(10<<20)
		}
		values = append(values, v)
	}
	// A short life: over an hour the median would ignore five climbing
	// samples among 720 (Theil–Sen's robustness), over 70 s it cannot.
	short := values[:14]
	lg := rssGate()
	lg.MinSamples, lg.MinSpan = 6, manifest.Duration{Duration: 30 * time.Second}
	if _, gt, _ := gradeLeaks(t, leakSoak(t, time.Hour, lg, proc("node-a", "agent", "1", 0, short))); gt.Verdict != Pass {
		t.Fatalf("settled: %s (%s)", gt.Verdict, gt.Reason)
	}
	lg.Settle = manifest.Duration{}
	if _, gt, _ := gradeLeaks(t, leakSoak(t, time.Hour, lg, proc("node-a", "agent", "1", 0, short))); gt.Verdict != Fail {
		t.Fatalf("unsettled: %s (%s); the control should fail", gt.Verdict, gt.Reason)
	}
}

// The grade binds the resources file to the leak gate, and a changed file
// is refused naming it and the gate.
func TestLeakGateEvidenceIsBound(t *testing.T) {
	m := leakSoak(t, time.Hour, rssGate(), proc("node-a", "proxy", "1", 0, flatRSS(720, 40<<20)))
	g, _, _ := gradeLeaks(t, m)
	if len(g.Evidence) != 1 || g.Evidence[0].Path != "prometheus/resources.json" || strings.Join(g.Evidence[0].Gates, ",") != "leak: RSS" {
		t.Fatalf("evidence %+v, want prometheus/resources.json read by the leak gate", g.Evidence)
	}
	if re, problems := Regrade("grade.json", roundTrip(t, g)); re == nil || len(problems) > 0 {
		t.Fatalf("a genuine grade is refused: %v", problems)
	}
	grown := leakSoak(t, time.Hour, rssGate(), proc("node-a", "proxy", "1", 0, growing(720, 5*time.Second, 40<<20, 100<<20)))
	b, err := os.ReadFile(grown.Resolve("prometheus/resources.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.Resolve("prometheus/resources.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, problems := Regrade("grade.json", roundTrip(t, g))
	if len(problems) != 1 || !strings.Contains(problems[0], "resources.json (read by gate \"leak: RSS\")") || !strings.Contains(problems[0], "altered") {
		t.Fatalf("an altered resources file: %v", problems)
	}
}

// A manifest's leak gate that could decide nothing is refused with its
// field.
func TestLeakGateManifestIsChecked(t *testing.T) {
	for _, tc := range []struct {
		edit func(*manifest.LeakGate)
		want string
	}{
		{func(g *manifest.LeakGate) { g.MaxPerHour = 0 }, "max_per_hour: 0 must be positive"},
		{func(g *manifest.LeakGate) { g.MinSamples = 2 }, "min_samples: 2: at least 3"},
		{func(g *manifest.LeakGate) { g.MinSpan = manifest.Duration{} }, "min_span: must be positive"},
		{func(g *manifest.LeakGate) { g.Group = nil }, "group: empty"},
		{func(g *manifest.LeakGate) { g.Life = "node" }, `life: "node" is also a group label`},
	} {
		lg := rssGate()
		lg.Series = &manifest.Series{Prometheus: "r.json", Match: map[string]string{"__name__": "rss"}}
		tc.edit(&lg)
		m := manifest.Manifest{Name: "x", Builds: []string{"a"}, Start: leakStart, End: leakStart.Add(time.Hour), Gates: manifest.Gates{Leaks: []manifest.LeakGate{lg}}}
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
