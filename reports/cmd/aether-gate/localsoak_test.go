package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
	soakrun "github.com/aether-mesh/aether/soak/run"
)

// localRun is what a local soak's folder should hold.
type localRun struct {
	// windows is how many 10 s measurement windows ran whole (ABBA); an
	// odd last one is dropped unpaired, as Manifest drops it.
	windows int
	// notRun is the steps-not-run count at the soak's end.
	notRun float64
	// noPrunedLive leaves the agents' prunes of in-use twins unexported.
	noPrunedLive bool
	// noFault runs no network fault; otherwise a netem step on node-b
	// follows the windows, its probes all answered.
	noFault bool
	// leaks adds the long soak's leak gates over node-a's agent and proxy,
	// whose resident memory grows by leakPerHour and whose other
	// resources hold level, sampled every 5 s.
	leaks       bool
	leakPerHour float64
}

// localSoak writes the folder `aether-soak run` writes for a run of six
// ABBA pairs of build revision whose h3 windows cost 1.1× the h2 ones, and
// grades it as `aether-soak run -gate-out` does: stamped with the build in
// AETHER_BUILD_REVISION. It returns the run folder and the grade's path.
func localSoak(t *testing.T, dir, revision string) (string, string) {
	t.Helper()
	return localSoakOf(t, dir, revision, localRun{windows: 12})
}

func localSoakOf(t *testing.T, dir, revision string, lr localRun) (string, string) {
	t.Helper()
	run := t.TempDir()
	start := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var spans []soakrun.Span
	for i := range lr.windows {
		proto := manifest.H2
		if k := i % 4; k == 1 || k == 2 {
			proto = manifest.H3
		}
		s := soakrun.Step{Kind: soakrun.Measure, Protocol: proto}
		spans = append(spans, soakrun.Span{Step: s, Name: soakrun.SpanName(s, i+1, 0),
			Start: start.Add(time.Duration(10*i) * time.Second), End: start.Add(time.Duration(10*i+10) * time.Second)})
	}
	windowsEnd := spans[len(spans)-1].End
	end := windowsEnd
	if !lr.noFault {
		f := soakrun.Step{Kind: soakrun.NetemFault, Node: "node-b", Fault: soakrun.Fault{Hold: 4 * time.Second, Allowance: 3 * time.Second}}
		spans = append(spans, soakrun.Span{Step: f, Name: soakrun.SpanName(f, 0, len(spans)+1), Start: end, End: end.Add(7 * time.Second),
			Detail: "loss 3% by nftables on node node-b's link"})
		prober, err := soakrun.NewProber(filepath.Join(run, soakrun.ProbesFile))
		if err != nil {
			t.Fatal(err)
		}
		for at := end; at.Before(end.Add(7 * time.Second)); at = at.Add(100 * time.Millisecond) {
			for _, k := range []string{soakrun.ProbeMesh, soakrun.ProbeH2, soakrun.ProbeQUIC} {
				prober.Record(soakrun.Probe{Time: at, Kind: k, OK: true, Code: 200, LatencyMS: 2})
			}
		}
		if err := prober.Close(); err != nil {
			t.Fatal(err)
		}
		end = end.Add(7 * time.Second)
	}
	rec := soakrun.NewRecorder()
	var cpu, reqs float64
	for at := start; !at.After(end); at = at.Add(time.Second) {
		if at.After(start) {
			cost := 1.0
			if !at.After(windowsEnd) && spans[int(at.Sub(start)-1)/int(10*time.Second)].Protocol == manifest.H3 {
				cost = 1.1
			}
			reqs += 100
			cpu += 100 * cost / 1000
		}
		notRun := 0.0
		if at.Equal(end) {
			notRun = lr.notRun
		}
		series := map[string]float64{soakrun.SeriesProxyCPU: cpu, soakrun.SeriesProxyRequests: reqs, soakrun.SeriesClientRequests: reqs,
			soakrun.SeriesNC: 0, soakrun.SeriesProxyExits: 0, soakrun.SeriesStepsNotRun: notRun, soakrun.SeriesProbes: reqs / 10, soakrun.SeriesProbesFailed: 0}
		if !lr.noPrunedLive {
			series[soakrun.SeriesPrunedLive] = 0
		}
		for name, v := range series {
			if err := rec.Add(name, map[string]string{"node": "node-a"}, at, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := rec.WriteMatrix(filepath.Join(run, soakrun.CountersFile)); err != nil {
		t.Fatal(err)
	}
	load, err := soakrun.NewLoad(filepath.Join(run, soakrun.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	load.Record(&vegeta.Result{Timestamp: start.Add(time.Second), Code: 200, Method: "GET", URL: "http://10.96.0.70:18081/"})
	if err := load.Close(); err != nil {
		t.Fatal(err)
	}
	o := soakrun.Outline{Name: "local", Build: revision, Start: start, End: end,
		TargetRPS: 100, MaxRatio: 1.5, SLO: "99.9", PrunedLive: !lr.noPrunedLive, DirectInterval: 100 * time.Millisecond}
	if lr.leaks {
		l := soakrun.DefaultLeaks()
		l.MinSpan, l.PairsMinSpan = time.Minute, time.Minute
		o.Leaks, o.Nodes, o.Goroutines, o.Pairs = &l, []string{"node-a"}, true, true
		res := soakrun.NewRecorder()
		for at := start; !at.After(end); at = at.Add(5 * time.Second) {
			grown := float64(40<<20) + lr.leakPerHour*at.Sub(start).Hours()
			for _, c := range []string{"agent", "proxy"} {
				l := map[string]string{"node": "node-a", "component": c, "life": "1"}
				for name, v := range map[string]float64{soakrun.SeriesResident: grown, soakrun.SeriesOpenFDs: 50} {
					if err := res.Add(name, l, at, v); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := res.Add(soakrun.SeriesGoroutines, map[string]string{"node": "node-a", "component": "agent", "life": "1"}, at, 30); err != nil {
				t.Fatal(err)
			}
			if err := res.Add(soakrun.SeriesPairs, map[string]string{"node": "node-a", "component": "agent"}, at, 3); err != nil {
				t.Fatal(err)
			}
		}
		if err := res.WriteMatrix(filepath.Join(run, soakrun.ResourcesFile)); err != nil {
			t.Fatal(err)
		}
	}
	path, err := soakrun.WriteManifest(run, soakrun.Manifest(o, spans))
	if err != nil {
		t.Fatal(err)
	}
	return run, gradeManifest(t, dir, path, revision)
}

// gradeManifest grades the soak at path as `aether-soak grade` does,
// stamped with build revision, into dir/soaks/<name>, and returns the
// grade's path.
func gradeManifest(t *testing.T, dir, path, revision string) string {
	t.Helper()
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grade.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(results.EnvRevision, revision)
	t.Setenv(results.EnvDirty, "false")
	g.Build = results.Stamp(nil)
	out := filepath.Join(dir, "soaks", m.Name)
	if err := render.WriteSoak(out, g, nil); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(out, render.GradeFile)
}

// A local soak's grade speaks for the build it ran and was graded by, and
// for no other.
func TestALocalSoakIsAcceptedForItsBuildOnly(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("udproute-selection", true, built(rev, false)))
	localSoak(t, dir, rev)
	code, out := runGate(t, config{dir: dir, build: rev, requireSoak: true})
	if code != 0 || !strings.Contains(out, "1.10×") || !strings.Contains(out, "PASS: 1 suite(s) and 1 soak(s) passed") {
		t.Fatalf("the local soak of the gated build: exit %d\n%s", code, out)
	}
	other := "2222222222222222222222222222222222222222"
	write(t, dir, suite("udproute-selection", true, built(other, false)))
	code, out = runGate(t, config{dir: dir, build: other, requireSoak: true})
	if code != 1 || !strings.Contains(out, "cannot judge build "+other+" from soak local: it ran "+rev) {
		t.Fatalf("the local soak of another build: exit %d\n%s", code, out)
	}
}
