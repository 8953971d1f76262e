package grade

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
)

// faultSoak is a 60 s soak on a 1 s grid with one netem fault at 20–24 s
// (allowance 3 s, so its probes are those started in [20 s, 27 s)): mesh
// probes every 100 ms throughout, h2 and quic probes every 100 ms in the
// fault's step. fail says which probes fail, by kind and start offset;
// fan, when above 1, is how many mesh probes start on each tick (a
// prober of many targets). The counters are the mesh probes', derived
// from the same log, as the run derives them.
type faultSoak struct {
	fail func(kind string, at time.Duration) bool
	fan  int
}

var (
	faultStart = 20 * time.Second
	faultEnd   = 24 * time.Second
	allowance  = 3 * time.Second
	soakLen    = 60 * time.Second
)

func (fs faultSoak) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var probes []evidence.ProbeRecord
	add := func(kind string, at time.Duration) {
		ok := fs.fail == nil || !fs.fail(kind, at)
		p := evidence.ProbeRecord{Time: t0.Add(at), Kind: kind, OK: ok, LatencyMS: 2}
		if ok {
			p.Code = 200
		} else {
			p.Error, p.LatencyMS = "timeout", 3000
		}
		probes = append(probes, p)
	}
	for at := time.Duration(0); at < soakLen; at += 100 * time.Millisecond {
		for range max(1, fs.fan) {
			add("mesh", at)
		}
		if at >= faultStart && at < faultEnd+allowance {
			add("h2", at)
			add("quic", at)
		}
	}
	var log strings.Builder
	for _, p := range probes {
		b, _ := json.Marshal(p)
		log.Write(append(b, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, "probes.jsonl"), []byte(log.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	// Counters on the 1 s grid: mesh probes started before each tick.
	type res struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	total, failed := res{Metric: map[string]string{"__name__": "probes"}}, res{Metric: map[string]string{"__name__": "failures"}}
	for s := time.Duration(0); s <= soakLen; s += time.Second {
		var n, f int
		for _, p := range probes {
			if p.Kind == "mesh" && p.Time.Before(t0.Add(s)) {
				n++
				if !p.OK {
					f++
				}
			}
		}
		total.Values = append(total.Values, [2]any{t0.Add(s).Unix(), fmt.Sprint(n)})
		failed.Values = append(failed.Values, [2]any{t0.Add(s).Unix(), fmt.Sprint(f)})
	}
	b, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": []res{total, failed}}})
	if err := os.WriteFile(filepath.Join(dir, "p.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	m := manifest.Manifest{Name: "faults", Builds: []string{"b"}, Start: t0, End: t0.Add(soakLen),
		Events: []manifest.Event{{Name: "s07-net-netem-b", Start: t0.Add(faultStart), End: t0.Add(faultEnd), What: "netem loss 3%",
			Fault: &manifest.Fault{Kind: manifest.FaultNetem, Node: "node-b"}}},
		Sources: manifest.Sources{
			ProbesTotal:  &manifest.Series{Prometheus: "p.json", Match: map[string]string{"__name__": "probes"}},
			ProbesFailed: &manifest.Series{Prometheus: "p.json", Match: map[string]string{"__name__": "failures"}},
			ProbeLog:     "probes.jsonl",
		},
		Gates: manifest.Gates{Liveness: &manifest.LivenessGate{SLO: "99.9"},
			NetworkFaults: &manifest.NetworkFaultsGate{ProbeKinds: []string{"h2", "quic"}, Kinds: map[string]manifest.FaultBound{
				manifest.FaultNetem: {Allowance: manifest.Duration{Duration: allowance}, MaxFailed: manifest.Duration{Duration: 4 * time.Second}, MaxRecovery: manifest.Duration{Duration: 2 * time.Second}},
			}}},
	}
	y, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "manifest.yaml")
	if err := os.WriteFile(path, y, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func (fs faultSoak) grade(t *testing.T) *Grade {
	t.Helper()
	m, err := manifest.Load(fs.write(t))
	if err != nil {
		t.Fatal(err)
	}
	g, err := Run(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func during(from, to time.Duration) func(time.Duration) bool {
	return func(at time.Duration) bool { return at >= from && at < to }
}

// TestFaultFailuresInsideTheSpanPass: 30 mesh probes failed while the
// fault held (3 s of them), and 30 h2 and quic probes each: inside the
// fault's span, within its bound (40), the liveness SLO counts none of
// them and passes, and both probe kinds recovered at once.
func TestFaultFailuresInsideTheSpanPass(t *testing.T) {
	hold := during(21*time.Second, faultEnd)
	g := faultSoak{fail: func(_ string, at time.Duration) bool { return hold(at) }}.grade(t)
	if g.Verdict != Pass {
		t.Fatalf("verdict %s (%s), want PASS:\n%s", g.Verdict, g.Reason, gateLines(g))
	}
	l := g.Liveness
	if l.Failed != 0 || l.Total != 530 || len(l.LeftOut) != 1 || l.LeftOut[0].Failed != 30 || l.LeftOut[0].Total != 70 {
		t.Fatalf("liveness %d/%d outside, left out %+v; want 0/530 outside and 30/70 left out", l.Failed, l.Total, l.LeftOut)
	}
	f := g.NetworkFaults.Faults[0]
	for _, p := range f.Probes {
		if p.Failed != 30 || p.Started != 70 {
			t.Errorf("%s: %d/%d failed, want 30/70", p.Kind, p.Failed, p.Started)
		}
		// The first success after the fault's end is the probe started at
		// it, done 2 ms later.
		if p.Graded && (p.RecoveryMS == nil || *p.RecoveryMS != 2) {
			t.Errorf("%s recovery %v, want 2 ms", p.Kind, p.RecoveryMS)
		}
	}
	if !strings.Contains(gate(t, g, GateFaultFailures).Figure, "h2 30/70") {
		t.Errorf("figure %q names no h2 failures", gate(t, g, GateFaultFailures).Figure)
	}
}

// TestFaultFailuresOutsideTheSpanFail: the same 30 mesh failures, 20 s
// after the fault, are the liveness SLO's: 30 of 530 fails 99.9 %; the
// fault gates pass, since nothing failed in the fault's span.
func TestFaultFailuresOutsideTheSpanFail(t *testing.T) {
	late := during(41*time.Second, 44*time.Second)
	g := faultSoak{fail: func(k string, at time.Duration) bool { return k == "mesh" && late(at) }}.grade(t)
	lg := gate(t, g, GateLiveness)
	if g.Verdict != Fail || lg.Verdict != Fail || g.Liveness.Failed != 30 {
		t.Fatalf("verdict %s, liveness %s (%s), %d failed outside; want FAIL on liveness with 30:\n%s", g.Verdict, lg.Verdict, lg.Figure, g.Liveness.Failed, gateLines(g))
	}
	for _, name := range []string{GateFaultFailures, GateFaultRecovery} {
		if v := gate(t, g, name).Verdict; v != Pass {
			t.Errorf("%s: %s, want PASS", name, v)
		}
	}
}

// TestFaultWithoutRecoveryFails: the quic probes fail from the fault's
// start to the step's end and no quic probe succeeds after it: the
// recovery gate fails naming quic, though every failure lies inside the
// span (within its bound) and the liveness SLO holds.
func TestFaultWithoutRecoveryFails(t *testing.T) {
	g := faultSoak{fail: func(k string, at time.Duration) bool { return k == "quic" && at >= 24*time.Second }}.grade(t)
	rg := gate(t, g, GateFaultRecovery)
	if g.Verdict != Fail || rg.Verdict != Fail || !strings.Contains(rg.Figure, "quic never") {
		t.Fatalf("verdict %s, recovery %s (%s); want FAIL naming quic:\n%s", g.Verdict, rg.Verdict, rg.Figure, gateLines(g))
	}
	if v := gate(t, g, GateFaultFailures).Verdict; v != Pass {
		t.Errorf("failures gate %s, want PASS (30 quic failures ≤ 40)", v)
	}
	if v := gate(t, g, GateLiveness).Verdict; v != Pass {
		t.Errorf("liveness %s, want PASS", v)
	}
	// A slow recovery fails it too: quic back 2.5 s after the fault, over
	// the 2 s bound.
	g = faultSoak{fail: func(k string, at time.Duration) bool {
		return k == "quic" && at >= 24*time.Second && at < 26500*time.Millisecond
	}}.grade(t)
	if rg := gate(t, g, GateFaultRecovery); rg.Verdict != Fail || !strings.Contains(rg.Figure, "quic 2.502s") {
		t.Fatalf("recovery after 2.5 s: %s (%s), want FAIL at 2.502s", rg.Verdict, rg.Figure)
	}
}

// TestFaultOverItsBoundFails: 41 h2 failures of 70 in the 7 s span are
// 4.1 s failed, over the bound of 4 s.
func TestFaultOverItsBoundFails(t *testing.T) {
	g := faultSoak{fail: func(k string, at time.Duration) bool {
		return k == "h2" && at >= faultStart && at < faultStart+4100*time.Millisecond
	}}.grade(t)
	if fg := gate(t, g, GateFaultFailures); fg.Verdict != Fail || !strings.Contains(fg.Figure, "h2 41/70 (4.1s)") {
		t.Fatalf("failures gate %s (%s), want FAIL with h2 41/70 (4.1s)", fg.Verdict, fg.Figure)
	}
}

// TestFaultBoundIsATimeNotACount: a prober of 30 targets a tick fails
// 300 mesh probes in one second of the fault, far over 40 probes but 1 s
// of the 7 s span, within the 4 s bound; failing 4.1 s of it, 1,230
// probes, is over, as one target's 41 are.
func TestFaultBoundIsATimeNotACount(t *testing.T) {
	for _, tc := range []struct {
		down    time.Duration
		verdict Verdict
		figure  string
	}{
		{time.Second, Pass, "mesh 300/2,100 (1s)"},
		{4100 * time.Millisecond, Fail, "mesh 1,230/2,100 (4.1s)"},
	} {
		g := faultSoak{fan: 30, fail: func(k string, at time.Duration) bool {
			return k == "mesh" && at >= faultStart && at < faultStart+tc.down
		}}.grade(t)
		fg := gate(t, g, GateFaultFailures)
		if fg.Verdict != tc.verdict || !strings.Contains(fg.Figure, tc.figure) {
			t.Errorf("mesh down %s of the fault: %s (%s), want %s with %s", tc.down, fg.Verdict, fg.Figure, tc.verdict, tc.figure)
		}
		for _, p := range g.NetworkFaults.Faults[0].Probes {
			if p.Kind == "mesh" && p.FailedMS != tc.down.Milliseconds() {
				t.Errorf("mesh down %s: failed_ms %d", tc.down, p.FailedMS)
			}
		}
	}
}

// TestFaultGradeBindsTheProbeLogAndRegrades: the probe log is bound by
// its sha256 to both fault gates, a re-grade reproduces the grade, and a
// probe log edited since is refused.
func TestFaultGradeBindsTheProbeLogAndRegrades(t *testing.T) {
	hold := during(21*time.Second, faultEnd)
	path := faultSoak{fail: func(_ string, at time.Duration) bool { return hold(at) }}.write(t)
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Run(m)
	if err != nil {
		t.Fatal(err)
	}
	var bound *EvidenceFile
	for i, f := range g.Evidence {
		if f.Path == "probes.jsonl" {
			bound = &g.Evidence[i]
		}
	}
	if bound == nil || strings.Join(bound.Gates, ",") != GateFaultFailures+","+GateFaultRecovery {
		t.Fatalf("evidence %+v: want probes.jsonl bound to both fault gates", g.Evidence)
	}
	if re, problems := Regrade("grade.json", roundTrip(t, g)); re == nil || len(problems) > 0 {
		t.Fatalf("a genuine grade is refused:\n%s", strings.Join(problems, "\n"))
	}
	// A grade claiming a fault recovered that did not is refuted too.
	forged := roundTrip(t, g)
	forged.NetworkFaults.Faults[0].Probes[0].Failed = 0
	if _, problems := Regrade("grade.json", forged); len(problems) == 0 {
		t.Fatal("a grade whose fault figures were edited re-grades clean")
	}
	log := filepath.Join(filepath.Dir(path), "probes.jsonl")
	b, _ := os.ReadFile(log)
	if err := os.WriteFile(log, []byte(strings.Replace(string(b), `"ok":false`, `"ok":true`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if re, problems := Regrade("grade.json", roundTrip(t, g)); re != nil || len(problems) != 1 || !strings.Contains(problems[0], "probes.jsonl") {
		t.Fatalf("a grade whose probe log was edited: %v", problems)
	}
}

// TestFaultManifestIsRefusedWithoutItsBound: a fault event needs the gate,
// a bound for its kind, and a probe log; a recovery bound beyond the
// allowance is refused.
func TestFaultManifestIsRefusedWithoutItsBound(t *testing.T) {
	path := faultSoak{}.write(t)
	orig, _ := os.ReadFile(path)
	for _, tc := range []struct{ from, to, want string }{
		{"kind: netem", "kind: partition", `"partition" has no bound`},
		{"probe_log: probes.jsonl", "", "sources.probe_log"},
		{"max_recovery: 2s", "max_recovery: 4s", "max_recovery"},
	} {
		if err := os.WriteFile(path, []byte(strings.Replace(string(orig), tc.from, tc.to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := manifest.Load(path); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s -> %s: %v, want a refusal naming %s", tc.from, tc.to, err, tc.want)
		}
	}
}

func gateLines(g *Grade) string {
	var b strings.Builder
	for _, gt := range g.Gates {
		fmt.Fprintf(&b, "  %s: %s: %s (%s)\n", gt.Name, gt.Verdict, gt.Figure, gt.Reason)
	}
	return b.String()
}
