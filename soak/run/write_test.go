package run

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

// synthetic lays out a run by hand: a warm-up, six ABBA pairs of 10 s
// windows with a switch before every change, and an agent restart (graded)
// and a hot restart (excluded) between pairs; it records counters in which
// every h3 window costs cpuH3 CPU seconds per 1,000 requests and every h2
// window 1.0, so the ratio the grader must find is known beforehand.
func synthetic(t *testing.T, cpuH3 float64, nc int) (*Recorder, []Span, time.Time, time.Time) {
	t.Helper()
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := start
	var spans []Span
	add := func(s Step, name string, d time.Duration, detail string) {
		spans = append(spans, Span{Step: s, Name: name, Start: at, End: at.Add(d), Detail: detail})
		at = at.Add(d)
	}
	add(Step{Kind: Warmup, Protocol: manifest.H2}, "s01-warm-up-h2", 3*time.Second, "")
	proto := manifest.H2
	for i := 0; i < 12; i++ {
		p := abba(i)
		if p != proto {
			add(Step{Kind: Switch, Protocol: p}, "switch", 2*time.Second, "agents restarted")
			add(Step{Kind: Warmup, Protocol: p}, "warm", 3*time.Second, "")
			proto = p
		}
		add(Step{Kind: Measure, Protocol: p}, SpanName(Step{Kind: Measure, Protocol: p}, i+1, 0), 10*time.Second, "")
		switch i {
		case 1:
			add(Step{Kind: AgentRestart, Node: "node-a"}, "agent", 2*time.Second, "agent restart on node-a")
		case 3:
			add(Step{Kind: ProxyHotRestart, Node: "node-b"}, "hot", 2*time.Second, "proxy hot restart on node-b")
		case 5:
			f := Step{Kind: NetemFault, Node: "node-b", Fault: Fault{Hold: 4 * time.Second, Allowance: 3 * time.Second}}
			add(f, SpanName(f, 0, 20), 7*time.Second, "loss 3% by nftables on node node-b's link")
		}
	}
	end := at
	rec := NewRecorder()
	var cpu, reqs float64
	node := map[string]string{"node": "node-a"}
	for ts := start; !ts.After(end); ts = ts.Add(time.Second) {
		var perSec float64 = 100
		cost := 1.0
		for _, sp := range spans {
			if sp.Kind == Measure && ts.After(sp.Start) && !ts.After(sp.End) && sp.Protocol == manifest.H3 {
				cost = cpuH3
			}
		}
		if ts.After(start) {
			reqs += perSec
			cpu += perSec * cost / 1000
		}
		v := 0.0
		if ts.Equal(end) {
			v = float64(nc)
		}
		for name, val := range map[string]float64{SeriesProxyCPU: cpu, SeriesProxyRequests: reqs, SeriesClientRequests: reqs,
			SeriesNC: v, SeriesProxyExits: 0, SeriesStepsNotRun: 0, SeriesProbes: reqs / 10, SeriesProbesFailed: 0} {
			if err := rec.Add(name, node, ts, val); err != nil {
				t.Fatal(err)
			}
		}
	}
	return rec, spans, start, end
}

func writeAndGrade(t *testing.T, rec *Recorder, spans []Span, start, end time.Time, partial string) (*manifest.Manifest, *grade.Grade) {
	t.Helper()
	return writeAndGradeWith(t, rec, spans, start, end, partial, nil, nil)
}

// writeAndGradeWith is writeAndGrade with the outline edited and, when res
// is given, the resource gauges written beside the counters.
func writeAndGradeWith(t *testing.T, rec *Recorder, spans []Span, start, end time.Time, partial string, edit func(*Outline), res *Recorder) (*manifest.Manifest, *grade.Grade) {
	t.Helper()
	dir := t.TempDir()
	if res != nil {
		if err := res.WriteMatrix(filepath.Join(dir, ResourcesFile)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.WriteMatrix(filepath.Join(dir, CountersFile)); err != nil {
		t.Fatal(err)
	}
	load, err := NewLoad(filepath.Join(dir, ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	load.Record(syntheticResult(start.Add(time.Second), 200))
	if err := load.Close(); err != nil {
		t.Fatal(err)
	}
	// Every probe of every kind answered, every 100 ms.
	prober, err := NewProber(filepath.Join(dir, ProbesFile))
	if err != nil {
		t.Fatal(err)
	}
	for at := start; at.Before(end); at = at.Add(100 * time.Millisecond) {
		for _, k := range []string{ProbeMesh, ProbeH2, ProbeQUIC} {
			prober.Record(Probe{Time: at, Kind: k, OK: true, Code: 200, LatencyMS: 1})
		}
	}
	if err := prober.Close(); err != nil {
		t.Fatal(err)
	}
	o := Outline{Name: "synthetic", Build: "abc1234", Start: start, End: end, TargetRPS: 100, MaxRatio: 1.5, SLO: "99.9", Partial: partial,
		PrunedLive: rec.Has(SeriesPrunedLive), DirectInterval: 100 * time.Millisecond}
	if edit != nil {
		edit(&o)
	}
	path, err := WriteManifest(dir, Manifest(o, spans))
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grade.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, g
}

func TestManifestGradesTheRunsOwnFiles(t *testing.T) {
	rec, spans, start, end := synthetic(t, 1.2, 0)
	m, g := writeAndGrade(t, rec, spans, start, end, "")
	if len(m.Windows) != 12 || len(m.Excluded) != 1+6*2+1+1 || len(m.Events) != 2 {
		t.Fatalf("%d windows, %d exclusions, %d events; want 12, 15 (warm-up, 6 switches and warm-ups, the hot restart, the network fault's step), 2 (the agent restart, the network fault)",
			len(m.Windows), len(m.Excluded), len(m.Events))
	}
	if f := m.Faults(); len(f) != 1 || f[0].End.Sub(f[0].Start) != 4*time.Second || m.Sources.ProbeLog != ProbesFile {
		t.Fatalf("faults %+v (probe log %q): want the netem step's, over its 4 s hold, graded from %s", f, m.Sources.ProbeLog, ProbesFile)
	}
	if g.Verdict != grade.Pass {
		t.Fatalf("verdict %s (%s), want PASS", g.Verdict, g.Reason)
	}
	if g.CPU == nil || g.CPU.Ratio < 1.199 || g.CPU.Ratio > 1.201 {
		t.Fatalf("ratio %+v, want 1.20 (the counters' h3 cost)", g.CPU)
	}
	names := map[string]bool{}
	for _, gt := range g.Gates {
		names[gt.Name] = true
	}
	for _, want := range []string{"h3/h2 per-request proxy CPU", "liveness SLO", "503 NC", "proxy crashes", "load-generator errors", "schedule steps not run"} {
		if !names[want] {
			t.Errorf("no gate %q in %v", want, names)
		}
	}
	// The report says what each count gate counts: "503 NC" or "schedule
	// steps not run" alone is not understood by someone new to the mesh.
	for _, c := range g.Counts {
		if c.About == "" {
			t.Errorf("count gate %q says nothing of what it counts", c.Name)
		}
	}
}

// A whole local soak grades every gate a release requires, under the names
// the release gate looks for, and no other: a gate renamed or dropped here
// would leave every local soak unable to release a build.
func TestManifestGradesEveryReleaseGate(t *testing.T) {
	rec, spans, start, end := synthetic(t, 1.2, 0)
	for ts := start; !ts.After(end); ts = ts.Add(time.Second) {
		if err := rec.Add(SeriesPrunedLive, map[string]string{"node": "node-a"}, ts, 0); err != nil {
			t.Fatal(err)
		}
	}
	_, g := writeAndGrade(t, rec, spans, start, end, "")
	if missing := grade.MissingForRelease(g); len(missing) > 0 || len(g.Gates) != len(grade.ReleaseGates) {
		var names []string
		for _, gt := range g.Gates {
			names = append(names, gt.Name)
		}
		t.Fatalf("the local soak grades %q; a release requires %q (missing %q)", names, grade.ReleaseGates, missing)
	}
	if g.Verdict != grade.Pass {
		t.Fatalf("verdict %s (%s), want PASS", g.Verdict, g.Reason)
	}
}

func TestManifestFailsTheGateTheCountersBreak(t *testing.T) {
	rec, spans, start, end := synthetic(t, 1.8, 3)
	_, g := writeAndGrade(t, rec, spans, start, end, "stopped (interrupt)")
	failed := map[string]bool{}
	for _, gt := range g.Gates {
		if gt.Verdict == grade.Fail {
			failed[gt.Name] = true
		}
	}
	if g.Verdict != grade.Fail || !failed["503 NC"] || !failed["h3/h2 per-request proxy CPU"] || len(failed) != 2 {
		t.Fatalf("verdict %s, failed gates %v; want FAIL on 503 NC and the CPU ratio only", g.Verdict, failed)
	}
	if want := "PARTIAL: stopped (interrupt). "; len(g.Description) < len(want) || g.Description[:len(want)] != want {
		t.Fatalf("description %q does not say the run was partial", g.Description)
	}
}

func TestManifestDropsAnUnpairedWindow(t *testing.T) {
	rec, spans, start, _ := synthetic(t, 1.2, 0)
	// Cut the run after the third window's end: w03 has no partner.
	var cut []Span
	windows := 0
	for _, sp := range spans {
		cut = append(cut, sp)
		if sp.Kind == Measure {
			if windows++; windows == 3 {
				break
			}
		}
	}
	end := cut[len(cut)-1].End
	rec.Trim(end)
	m, _ := writeAndGrade(t, rec, cut, start, end, "stopped")
	if len(m.Windows) != 2 {
		t.Fatalf("%d windows kept, want the one whole pair", len(m.Windows))
	}
}

// A run stopped before its first pair ended (Ctrl-C in the first
// minute) still writes a manifest the graders load, and its grade fails on
// the steps not run instead of the run ending without one.
func TestManifestOfARunStoppedBeforeItsFirstPair(t *testing.T) {
	rec, spans, start, _ := synthetic(t, 1.2, 0)
	cut := spans[:2] // the warm-up and w01-h2: no partner
	end := cut[1].End
	rec.Trim(end)
	// The steps after w01 did not run: counted at the end, as recordNotRun does.
	for ts := start; !ts.After(end); ts = ts.Add(time.Second) {
		v := 0.0
		if ts.Equal(end) {
			v = float64(len(spans) - len(cut))
		}
		if err := rec.Add(SeriesStepsNotRun, map[string]string{"node": "run"}, ts, v); err != nil {
			t.Fatal(err)
		}
	}
	m, g := writeAndGrade(t, rec, cut, start, end, "stopped (interrupt)")
	if len(m.Windows) != 0 || m.Gates.CPURatio != nil {
		t.Fatalf("%d windows, CPU gate %+v: want none of either", len(m.Windows), m.Gates.CPURatio)
	}
	var failed []string
	for _, gt := range g.Gates {
		if gt.Verdict == grade.Fail {
			failed = append(failed, gt.Name)
		}
	}
	if g.Verdict != grade.Fail || len(failed) != 1 || failed[0] != "schedule steps not run" {
		t.Fatalf("verdict %s, failed gates %v; want FAIL on the steps not run only", g.Verdict, failed)
	}
	if !strings.Contains(g.Description, "the h3/h2 CPU gate is not graded") {
		t.Errorf("description %q does not say why the CPU gate is absent", g.Description)
	}
}

// resourcesOf records, every 5 s over [start, end], each node's agent and
// proxy holding level (one life each), and the agent's pairs.
func resourcesOf(t *testing.T, start, end time.Time, nodes ...string) *Recorder {
	t.Helper()
	res := NewRecorder()
	for ts := start; !ts.After(end); ts = ts.Add(5 * time.Second) {
		for _, n := range nodes {
			for _, c := range []string{"agent", "proxy"} {
				l := map[string]string{"node": n, "component": c, "life": "1"}
				for name, v := range map[string]float64{SeriesResident: 40 << 20, SeriesOpenFDs: 50} {
					if err := res.Add(name, l, ts, v); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := res.Add(SeriesGoroutines, map[string]string{"node": n, "component": "agent", "life": "1"}, ts, 30); err != nil {
				t.Fatal(err)
			}
			if err := res.Add(SeriesPairs, map[string]string{"node": n, "component": "agent"}, ts, 4); err != nil {
				t.Fatal(err)
			}
		}
	}
	return res
}

// The long soak's manifest carries its own gates beside the release's:
// the probes short of its plan and the four leak gates over every node's
// agent and proxy; a level footprint and a prober that kept its plan pass
// them, and a prober 6% short fails the probes gate alone.
func TestManifestGradesTheLongSoaksGates(t *testing.T) {
	long := func(short float64) (*manifest.Manifest, *grade.Grade) {
		rec, spans, start, end := synthetic(t, 1.2, 0)
		for ts := start; !ts.After(end); ts = ts.Add(time.Second) {
			v := 0.0
			if ts.Equal(end) {
				v = short
			}
			if err := rec.Add(SeriesProbesShort, nil, ts, v); err != nil {
				t.Fatal(err)
			}
		}
		l := DefaultLeaks()
		l.MinSpan, l.PairsMinSpan = time.Minute, time.Minute
		// The synthetic soak is 189 s: the leak gates see 5 s samples.
		res := resourcesOf(t, start, end, "node-a", "node-b")
		return writeAndGradeWith(t, rec, spans, start, end, "", func(o *Outline) {
			o.ProbesPlanned, o.Leaks, o.Nodes, o.Goroutines, o.Pairs = 10_000, &l, []string{"node-a", "node-b"}, true, true
		}, res)
	}
	m, g := long(0)
	if g.Verdict != grade.Pass {
		t.Fatalf("verdict %s (%s), want PASS", g.Verdict, g.Reason)
	}
	for _, name := range []string{grade.GateProbesShort, grade.GateLeakResident, grade.GateLeakFDs, grade.GateLeakGoroutines, grade.GateLeakPairs} {
		gate(t, g, name)
	}
	if len(m.Gates.Leaks) != 4 || strings.Join(m.Gates.Leaks[0].Expect, ",") != "node-a/agent,node-a/proxy,node-b/agent,node-b/proxy" ||
		strings.Join(m.Gates.Leaks[2].Expect, ",") != "node-a/agent,node-b/agent" || m.Gates.Leaks[3].Life != "" {
		t.Fatalf("leak gates %+v: want resident memory and fds of both components, goroutines and pairs of the agents, pairs over one life", m.Gates.Leaks)
	}
	if len(g.Evidence) == 0 || !strings.Contains(strings.Join(paths(g.Evidence), ","), ResourcesFile) {
		t.Errorf("the grade does not bind %s: %+v", ResourcesFile, g.Evidence)
	}
	_, g = long(600)
	failed := []string{}
	for _, gt := range g.Gates {
		if gt.Verdict != grade.Pass {
			failed = append(failed, gt.Name+" "+string(gt.Verdict))
		}
	}
	if len(failed) != 1 || failed[0] != grade.GateProbesShort+" FAIL" {
		t.Fatalf("600 of 10,000 planned probes not started: %v, want the probes gate alone to fail (limit 500)", failed)
	}
}

// When the proxies export their goroutines the goroutine gate expects
// every proxy beside every agent, and a proxy whose goroutines climb 2,000
// an hour fails it, named; without the proxies' series the gate expects
// the agents alone.
func TestGoroutineGateCoversTheProxies(t *testing.T) {
	grow := func(perHour float64) (*manifest.Manifest, *grade.Grade) {
		rec, spans, start, end := synthetic(t, 1.2, 0)
		l := DefaultLeaks()
		l.MinSpan, l.PairsMinSpan = time.Minute, time.Minute
		res := resourcesOf(t, start, end, "node-a", "node-b")
		for ts := start; !ts.After(end); ts = ts.Add(5 * time.Second) {
			for _, n := range []string{"node-a", "node-b"} {
				v := 40.0
				if n == "node-b" {
					v += perHour * ts.Sub(start).Hours()
				}
				if err := res.Add(SeriesGoroutines, map[string]string{"node": n, "component": "proxy", "life": "1"}, ts, v); err != nil {
					t.Fatal(err)
				}
			}
		}
		return writeAndGradeWith(t, rec, spans, start, end, "", func(o *Outline) {
			o.Leaks, o.Nodes, o.Goroutines, o.Pairs, o.ProxyGoroutines = &l, []string{"node-a", "node-b"}, true, true, true
		}, res)
	}
	m, g := grow(0)
	if got := strings.Join(m.Gates.Leaks[2].Expect, ","); got != "node-a/agent,node-a/proxy,node-b/agent,node-b/proxy" {
		t.Fatalf("goroutine gate expects %s, want every agent and proxy", got)
	}
	if gt := gate(t, g, grade.GateLeakGoroutines); gt.Verdict != grade.Pass {
		t.Fatalf("level proxies: goroutine gate %s (%s), want PASS", gt.Verdict, gt.Figure+"; "+gt.Reason)
	}
	_, g = grow(2000)
	if gt := gate(t, g, grade.GateLeakGoroutines); gt.Verdict != grade.Fail || !strings.Contains(gt.Figure+gt.Reason, "node-b/proxy") {
		t.Fatalf("node-b's proxy +2000 goroutines/h: goroutine gate %s (%s), want FAIL naming node-b/proxy", gt.Verdict, gt.Figure+"; "+gt.Reason)
	}
}

func gate(t *testing.T, g *grade.Grade, name string) grade.Gate {
	t.Helper()
	for _, gt := range g.Gates {
		if gt.Name == name {
			return gt
		}
	}
	t.Fatalf("no gate %q", name)
	return grade.Gate{}
}

func paths(ev []grade.EvidenceFile) []string {
	var out []string
	for _, e := range ev {
		out = append(out, e.Path)
	}
	return out
}

func syntheticResult(at time.Time, code uint16) *vegeta.Result {
	return &vegeta.Result{Timestamp: at, Code: code, Method: "GET", URL: "http://10.96.0.70:18081/"}
}

func readSpans(t *testing.T, path string) []Span {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var spans []Span
	if err := json.Unmarshal(b, &spans); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return spans
}
