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

	"github.com/aether-mesh/aether/soak/manifest"
)

const fixtures = "../../fixtures/soaks/"

func gradeFixture(t *testing.T, dir string, edit func(*manifest.Manifest)) *Grade {
	t.Helper()
	m, err := manifest.Load(filepath.Join(fixtures, dir, "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(m)
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
	}
	g, err := Run(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func gate(t *testing.T, g *Grade, name string) Gate {
	t.Helper()
	for _, gt := range g.Gates {
		if gt.Name == name {
			return gt
		}
	}
	t.Fatalf("soak %s has no gate %q", g.Soak, name)
	return Gate{}
}

func meanCPR(c *CPURatio, proto string) float64 {
	s, n := 0.0, 0
	for _, w := range c.Windows {
		if w.Protocol == proto && w.Valid {
			s += *w.CPUPerRequestMS
			n++
		}
	}
	return s / float64(n)
}

// The proposal's own soaks, graded.
func TestFixtureVerdicts(t *testing.T) {
	t.Run("rev247 same-build A/B: 1.18x PASS", func(t *testing.T) {
		g := gradeFixture(t, "2026-09-28-rev247-same-build-ab", nil)
		if g.Verdict != Pass {
			t.Fatalf("verdict %s: %s", g.Verdict, g.Reason)
		}
		c := g.CPU
		if math.Abs(c.Ratio-1.18) > 0.005 || !c.Bounded || c.Upper > 1.5 || len(c.Pairs) != 6 {
			t.Errorf("ratio %.3f [%.3f, %.3f] over %d pairs", c.Ratio, c.Lower, c.Upper, len(c.Pairs))
		}
		if h2, h3 := meanCPR(c, "h2"), meanCPR(c, "h3"); math.Abs(h2-8.9) > 0.05 || math.Abs(h3-10.5) > 0.05 {
			t.Errorf("mean CPU per request h2 %.2f ms, h3 %.2f ms; the proposal has 8.9 and 10.5", h2, h3)
		}
		if !strings.HasPrefix(c.Windows[0].CPUSource, "pprof") {
			t.Errorf("rev247's CPU comes from profiles, got %q", c.Windows[0].CPUSource)
		}
	})
	t.Run("rev242 vs rev239: refused, two builds", func(t *testing.T) {
		g := gradeFixture(t, "2026-09-27-rev242-vs-rev239", nil)
		gt := gate(t, g, GateCPURatio)
		if g.Verdict != Refused || gt.Verdict != Refused {
			t.Fatalf("verdict %s / gate %s", g.Verdict, gt.Verdict)
		}
		for _, s := range []string{"different builds", "rev239-h2 (h2) ran rev239", "rev242-h3 (h3) ran rev242"} {
			if !strings.Contains(gt.Reason, s) {
				t.Errorf("reason %q lacks %q", gt.Reason, s)
			}
		}
		if g.CPU.Ratio != 0 || len(g.CPU.Windows) != 0 {
			t.Error("a refused pairing must not publish a ratio")
		}
	})
	t.Run("2026-09-30 re-soak: liveness FAIL, every QUIC gate PASS", func(t *testing.T) {
		g := gradeFixture(t, "2026-09-30-resoak-1.0.13-84fb413", nil)
		if g.Verdict != Fail || g.Reason != "fail: liveness SLO" {
			t.Fatalf("verdict %s: %s", g.Verdict, g.Reason)
		}
		l := g.Liveness
		if l.Failed != 9 || l.Total != 719_984 || l.Allowed != 7 {
			t.Errorf("liveness %d / %d allowed %d, want 9 / 719,984 allowed 7", l.Failed, l.Total, l.Allowed)
		}
		for _, name := range []string{GateCPURatio, "503 with flag NC", "prunes of in-use twins", "proxy crashes", "load-generator errors"} {
			if gt := gate(t, g, name); gt.Verdict != Pass {
				t.Errorf("%s: %s (%s)", name, gt.Verdict, gt.Reason)
			}
		}
		if math.Abs(g.CPU.Ratio-1.18) > 0.005 {
			t.Errorf("ratio %.3f", g.CPU.Ratio)
		}
		// w11's arrival rate sagged: its pair is left out and said so.
		var left []string
		for _, p := range g.CPU.Pairs {
			if !p.Used {
				left = append(left, p.Reason)
			}
		}
		if len(left) != 1 || !strings.Contains(left[0], "w11-h3 invalid: achieved 285") {
			t.Errorf("pairs left out: %q", left)
		}
		var lg Count
		for _, c := range g.Counts {
			if c.Name == "load-generator errors" {
				lg = c
			}
		}
		if lg.Seen != 147 || lg.OutsideRun != 141 || lg.InExcluded["TRIPLE"] != 6 || lg.Count != 0 {
			t.Errorf("k6 failures: seen %d, before T0 %d, in TRIPLE %d, counted %d; want 147, 141, 6, 0", lg.Seen, lg.OutsideRun, lg.InExcluded["TRIPLE"], lg.Count)
		}
	})
	t.Run("2026-09-30 re-soak passes liveness at 99.99", func(t *testing.T) {
		g := gradeFixture(t, "2026-09-30-resoak-1.0.13-84fb413", func(m *manifest.Manifest) { m.Gates.Liveness.SLO = "99.99" })
		if g.Verdict != Pass || g.Liveness.Allowed != 71 {
			t.Errorf("verdict %s (%s), allowed %d", g.Verdict, g.Reason, g.Liveness.Allowed)
		}
	})
	t.Run("rev242 proving soak: 1,060 x 503 NC FAIL", func(t *testing.T) {
		g := gradeFixture(t, "2026-09-27-rev242-proving", nil)
		if g.Verdict != Fail {
			t.Fatalf("verdict %s", g.Verdict)
		}
		if gt := gate(t, g, "503 with flag NC"); gt.Verdict != Fail || gt.Figure != "1,060 (limit 0)" {
			t.Errorf("503 NC: %s %s", gt.Verdict, gt.Figure)
		}
		if gt := gate(t, g, "load-generator errors"); gt.Verdict != Fail || gt.Figure != "1,154 (limit 0)" {
			t.Errorf("k6: %s %s", gt.Verdict, gt.Figure)
		}
		if gt := gate(t, g, GateLiveness); gt.Verdict != Pass {
			t.Errorf("the prober passed on rev242; got %s", gt.Verdict)
		}
	})
}

// The control for the refusal: the same windows, labelled as one build,
// give the number the refusal withholds (~3.3x, a FAIL). Without this the
// refusal could be hiding nothing.
func TestRefusalWithholdsTheCrossBuildRatio(t *testing.T) {
	g := gradeFixture(t, "2026-09-27-rev242-vs-rev239", func(m *manifest.Manifest) {
		for i := range m.Windows {
			m.Windows[i].Build = "rev242"
		}
	})
	gt := gate(t, g, GateCPURatio)
	if gt.Verdict != Inconclusive || math.Abs(g.CPU.Ratio-3.33) > 0.1 {
		t.Errorf("relabelled: %s at %.2fx, want the ~3.3x of #1006 (one pair: no interval)", gt.Verdict, g.CPU.Ratio)
	}
}

// synth writes a soak whose windows have the given CPU per request (ms)
// and request rates, 10-minute windows sampled every minute.
type win struct {
	proto            string
	cpr              float64
	clientRPS, proxy float64
}

var t0 = time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)

func writeMatrix(t *testing.T, path string, series map[string][]float64) {
	t.Helper()
	type res struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	var rs []res
	for name, vals := range series {
		r := res{Metric: map[string]string{"__name__": name}}
		acc := 0.0
		for i, v := range vals {
			acc += v
			r.Values = append(r.Values, [2]any{t0.Add(time.Duration(i) * time.Minute).Unix(), fmt.Sprint(acc)})
		}
		rs = append(rs, r)
	}
	b, _ := json.Marshal(map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": rs}})
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func synth(t *testing.T, ws []win) *manifest.Manifest {
	t.Helper()
	dir := t.TempDir()
	n := len(ws)*10 + 1
	cpu, proxy, client := make([]float64, n), make([]float64, n), make([]float64, n)
	m := &manifest.Manifest{Name: "synthetic", Builds: []string{"b"}, Start: t0, End: t0.Add(time.Duration(n-1) * time.Minute),
		TargetRPS: 100, Dir: dir, Path: filepath.Join(dir, "manifest.yaml"),
		Sources: manifest.Sources{
			ProxyCPU:       &manifest.Series{Prometheus: "m.json", Match: map[string]string{"__name__": "cpu"}},
			ProxyRequests:  &manifest.Series{Prometheus: "m.json", Match: map[string]string{"__name__": "proxy"}},
			ClientRequests: &manifest.Series{Prometheus: "m.json", Match: map[string]string{"__name__": "client"}},
		},
		Gates: manifest.Gates{CPURatio: &manifest.CPURatioGate{Max: 1.5}},
	}
	for i, w := range ws {
		for s := 1; s <= 10; s++ {
			k := i*10 + s
			client[k] = w.clientRPS * 60
			proxy[k] = w.proxy * 60
			cpu[k] = w.cpr / 1000 * proxy[k]
		}
		m.Windows = append(m.Windows, manifest.Window{Name: fmt.Sprintf("w%02d", i+1), Protocol: w.proto, Build: "b",
			Start: t0.Add(time.Duration(i*10) * time.Minute), End: t0.Add(time.Duration(i*10+10) * time.Minute)})
	}
	writeMatrix(t, filepath.Join(dir, "m.json"), map[string][]float64{"cpu": cpu, "proxy": proxy, "client": client})
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	return m
}

// abbaWins lays out ratios as ABBA pairs at 100 rps.
func abbaWins(ratios ...float64) []win {
	var ws []win
	for i, r := range ratios {
		h2 := win{"h2", 9, 100, 100}
		h3 := win{"h3", 9 * r, 100, 100}
		if i%2 == 0 {
			ws = append(ws, h2, h3)
		} else {
			ws = append(ws, h3, h2)
		}
	}
	return ws
}

func TestCPUGateOutcomes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ws     []win
		want   Verdict
		reason string
	}{
		{"under the gate", abbaWins(1.15, 1.2, 1.18, 1.22, 1.16, 1.19), Pass, "upper bound"},
		{"over the gate", abbaWins(1.9, 2.1, 2.0, 1.95, 2.05, 2.02), Fail, "lower bound"},
		{"straddles the gate", abbaWins(1.3, 1.7, 1.45, 1.6, 1.35, 1.55), Inconclusive, "straddles 1.50"},
		{"too few pairs", abbaWins(1.1, 1.12, 1.09, 1.11), Inconclusive, "needs at least 6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := Run(synth(t, tc.ws))
			if err != nil {
				t.Fatal(err)
			}
			gt := g.Gates[0]
			if gt.Verdict != tc.want || !strings.Contains(gt.Reason, tc.reason) {
				t.Errorf("got %s (%s: %s), want %s with %q", gt.Verdict, gt.Figure, gt.Reason, tc.want, tc.reason)
			}
			if g.Verdict != tc.want {
				t.Errorf("soak verdict %s, want %s", g.Verdict, tc.want)
			}
		})
	}
}

func TestInvalidWindowsLeaveTheirPairOut(t *testing.T) {
	ws := abbaWins(1.2, 1.2, 1.2, 1.2, 1.2, 1.2, 3.0, 3.0)
	ws[12].proxy = 102 // proxy and client 2 % apart
	ws[15].clientRPS, ws[15].proxy = 90, 90
	g, err := Run(synth(t, ws))
	if err != nil {
		t.Fatal(err)
	}
	if g.Gates[0].Verdict != Pass || math.Abs(g.CPU.Ratio-1.2) > 1e-9 {
		t.Fatalf("with the 3.0x pairs left out the gate passes at 1.2x; got %s %.3f (%s)", g.Gates[0].Verdict, g.CPU.Ratio, g.Gates[0].Reason)
	}
	w13, w16 := g.CPU.Windows[12], g.CPU.Windows[15]
	if w13.Valid || !strings.Contains(w13.Invalid, "2.00% apart > 1.0%") {
		t.Errorf("w13: %+v", w13)
	}
	if w16.Valid || !strings.Contains(w16.Invalid, "achieved 90.0 rps < 95% of target 100 rps") {
		t.Errorf("w16: %+v", w16)
	}
	if !strings.Contains(g.Gates[0].Reason, "2 pair(s) left out") {
		t.Errorf("reason %q", g.Gates[0].Reason)
	}
}

func livenessSoak(t *testing.T, total, failed int64, slo string) *Grade {
	t.Helper()
	dir := t.TempDir()
	writeMatrix(t, filepath.Join(dir, "p.json"), map[string][]float64{"probes": {0, float64(total)}, "failures": {0, float64(failed)}})
	m := &manifest.Manifest{Name: "live", Builds: []string{"b"}, Start: t0, End: t0.Add(time.Minute), Dir: dir, Path: filepath.Join(dir, "m.yaml"),
		Sources: manifest.Sources{
			ProbesTotal:  &manifest.Series{Prometheus: "p.json", Match: map[string]string{"__name__": "probes"}},
			ProbesFailed: &manifest.Series{Prometheus: "p.json", Match: map[string]string{"__name__": "failures"}},
		},
		Gates: manifest.Gates{Liveness: &manifest.LivenessGate{SLO: slo}},
	}
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	g, err := Run(m)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestLivenessIsExact(t *testing.T) {
	for _, tc := range []struct {
		total, failed int64
		slo           string
		want          Verdict
		allowed       int64
	}{
		{100_000, 1, "99.999", Pass, 1},
		{100_000, 2, "99.999", Fail, 1},
		// 1000 × (1 − 0.999) is 0.9999999999999 in binary floating point,
		// which floors to 0 and would fail one failure in a thousand.
		{1000, 1, "99.9", Pass, 1},
		{1000, 2, "99.9", Fail, 1},
		{719_984, 9, "99.999", Fail, 7},
		{719_984, 9, "99.99", Pass, 71},
		{0, 0, "99.9", Inconclusive, 0},
	} {
		g := livenessSoak(t, tc.total, tc.failed, tc.slo)
		if g.Gates[0].Verdict != tc.want || g.Liveness.Allowed != tc.allowed {
			t.Errorf("%d/%d at %s: got %s allowed %d, want %s allowed %d", tc.failed, tc.total, tc.slo, g.Gates[0].Verdict, g.Liveness.Allowed, tc.want, tc.allowed)
		}
	}
}

func TestCountGateExclusions(t *testing.T) {
	dir := t.TempDir()
	// 3 restarts in minute 2 (inside the exclusion), 1 in minute 5.
	writeMatrix(t, filepath.Join(dir, "m.json"), map[string][]float64{"restarts": {0, 0, 3, 0, 0, 1, 0}})
	mk := func(apply bool) *Grade {
		m := &manifest.Manifest{Name: "c", Builds: []string{"b"}, Start: t0, End: t0.Add(6 * time.Minute), Dir: dir, Path: filepath.Join(dir, "m.yaml"),
			Excluded: []manifest.Excluded{{Name: "roll", Start: t0.Add(time.Minute), End: t0.Add(3 * time.Minute), Reason: "planned roll"}},
			Gates: manifest.Gates{Counts: []manifest.CountGate{{Name: "proxy crashes", Limit: 0, ApplyExclusions: apply,
				Series: &manifest.Series{Prometheus: "m.json", Match: map[string]string{"__name__": "restarts"}}}}},
		}
		if err := m.Validate(); err != nil {
			t.Fatal(err)
		}
		g, err := Run(m)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	all, excl := mk(false), mk(true)
	if all.Counts[0].Count != 4 || excl.Counts[0].Count != 1 || excl.Counts[0].InExcluded["roll"] != 3 {
		t.Errorf("without exclusions %d, with %d (in roll %d); want 4, 1, 3", all.Counts[0].Count, excl.Counts[0].Count, excl.Counts[0].InExcluded["roll"])
	}
	if excl.Verdict != Fail || !strings.Contains(excl.Gates[0].Reason, "3 in excluded roll") {
		t.Errorf("%s: %s", excl.Verdict, excl.Gates[0].Reason)
	}
}

func TestMissingEvidenceIsAnError(t *testing.T) {
	m := synth(t, abbaWins(1.1, 1.1, 1.1, 1.1, 1.1, 1.1))
	m.Sources.ProxyRequests.Match = map[string]string{"__name__": "envoy_typo"}
	if _, err := Run(m); err == nil || !strings.Contains(err.Error(), `no series matches {__name__="envoy_typo"}`) {
		t.Errorf("got %v", err)
	}
	if err := os.Remove(filepath.Join(m.Dir, "m.json")); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(m); err == nil || !strings.Contains(err.Error(), "m.json") {
		t.Errorf("got %v", err)
	}
}

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		vs   []Verdict
		want Verdict
	}{
		{[]Verdict{Pass, Pass}, Pass},
		{[]Verdict{Pass, Inconclusive}, Inconclusive},
		{[]Verdict{Refused, Inconclusive}, Refused},
		{[]Verdict{Inconclusive, Fail, Refused}, Fail},
		{nil, Inconclusive},
	} {
		var gs []Gate
		for i, v := range tc.vs {
			gs = append(gs, Gate{Name: fmt.Sprint(i), Verdict: v})
		}
		if got, _ := Decide(gs); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.vs, got, tc.want)
		}
	}
}
