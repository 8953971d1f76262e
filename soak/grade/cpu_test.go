package grade

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/soak/manifest"
)

// Hand-written inputs: four 5-minute windows, ABBA, at a 10 rps target,
// every counter sampled every 5 minutes from 2026-10-01T00:00:00Z
// (1790812800). Each window carries 3,000 requests (10 rps × 300 s) on both
// counters. Proxy pod a burns 6 s of CPU in each h2 window and 9 s in each
// h3 window. Pod b was running before anyone scraped it: it first appears
// at 00:05 with 100 s already on its counter, then burns 1.5 s in w3 and
// nothing else. So w2 has 9 s (3.0 ms per request), w3 10.5 s (3.5 ms),
// w4 6 s (2.0 ms), and w1's CPU is unknown.
const handManifest = `name: hand
builds: [b1]
start: 2026-10-01T00:00:00Z
end: 2026-10-01T00:20:00Z
target_rps: 10
windows:
- {name: w1-h2, start: 2026-10-01T00:00:00Z, end: 2026-10-01T00:05:00Z, protocol: h2, build: b1}
- {name: w2-h3, start: 2026-10-01T00:05:00Z, end: 2026-10-01T00:10:00Z, protocol: h3, build: b1}
- {name: w3-h3, start: 2026-10-01T00:10:00Z, end: 2026-10-01T00:15:00Z, protocol: h3, build: b1}
- {name: w4-h2, start: 2026-10-01T00:15:00Z, end: 2026-10-01T00:20:00Z, protocol: h2, build: b1}
sources:
  proxy_cpu: {prometheus: prom.json, match: {__name__: cpu}}
  proxy_requests: {prometheus: prom.json, match: {__name__: proxy_rq}}
  client_requests: {prometheus: prom.json, match: {__name__: client_rq}}
gates:
  cpu_ratio: {max: 1.5}
`

const handProm = `{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"cpu","pod":"a"},"values":[[1790812800,"0"],[1790813100,"6"],[1790813400,"15"],[1790813700,"24"],[1790814000,"30"]]},
{"metric":{"__name__":"cpu","pod":"b"},"values":[[1790813100,"100"],[1790813400,"100"],[1790813700,"101.5"],[1790814000,"101.5"]]},
{"metric":{"__name__":"proxy_rq"},"values":[[1790812800,"0"],[1790813100,"3000"],[1790813400,"6000"],[1790813700,"9000"],[1790814000,"12000"]]},
{"metric":{"__name__":"client_rq"},"values":[[1790812800,"0"],[1790813100,"3000"],[1790813400,"6000"],[1790813700,"9000"],[1790814000,"12000"]]}
]}}`

// handSoak writes the hand-made soak, with edits to its manifest, and
// loads it the way aether-soak does.
func handSoak(t *testing.T, edits ...string) *manifest.Manifest {
	t.Helper()
	doc := handManifest
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(doc, edits[i]) {
			t.Fatalf("test is stale: %q not in the manifest", edits[i])
		}
		doc = strings.Replace(doc, edits[i], edits[i+1], 1)
	}
	dir := t.TempDir()
	for name, body := range map[string]string{"manifest.yaml": doc, "prom.json": handProm} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := manifest.Load(filepath.Join(dir, "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func near(p *float64, want float64) bool { return p != nil && math.Abs(*p-want) < 1e-9 }

// Pod b's counter starts inside w1, so w1's CPU was never measured: the
// window is invalid, its CPU figures are absent rather than 100 s too
// high, and its pair is left out with no ratio. Read as growth from zero,
// w1 would have had 6 + 100 = 106 s of CPU, 35.3 ms per request, and its
// pair a ratio of 3.0 / 35.3 = 0.085×.
func TestASeriesStartingInsideAWindowLeavesItUnmeasured(t *testing.T) {
	g, err := Run(handSoak(t))
	if err != nil {
		t.Fatal(err)
	}
	c := g.CPU
	w1, w2, w3, w4 := c.Windows[0], c.Windows[1], c.Windows[2], c.Windows[3]
	for _, w := range []struct {
		got      Window
		cpu, cpr float64
	}{{w2, 9, 3}, {w3, 10.5, 3.5}, {w4, 6, 2}} {
		if !w.got.Valid || !near(w.got.CPUSeconds, w.cpu) || !near(w.got.CPUPerRequestMS, w.cpr) || !near(w.got.AchievedRPS, 10) ||
			!near(w.got.ProxyRequests, 3000) || !near(w.got.ClientRequests, 3000) {
			t.Errorf("%s: %s", w.got.Name, show(t, w.got))
		}
	}
	if w1.Valid || w1.CPUSeconds != nil || w1.CPUPerRequestMS != nil {
		t.Errorf("w1 must be invalid with its CPU not measured: %s", show(t, w1))
	}
	if !near(w1.ProxyRequests, 3000) || !near(w1.ClientRequests, 3000) || !near(w1.AchievedRPS, 10) {
		t.Errorf("w1's request counters span it and were measured: %s", show(t, w1))
	}
	if !strings.Contains(w1.Invalid, `sources.proxy_cpu not measured: series {__name__="cpu",pod="b"} has samples from 2026-10-01T00:05:00Z`) {
		t.Errorf("w1's reason must name the series and where it starts: %q", w1.Invalid)
	}
	p1, p2 := c.Pairs[0], c.Pairs[1]
	if p1.Used || p1.H2 != "w1-h2" || p1.H3 != "w2-h3" || p1.Ratio != 0 || !strings.HasPrefix(p1.Reason, "w1-h2 invalid: sources.proxy_cpu not measured") {
		t.Errorf("pair 1: %+v, want (w1-h2, w2-h3) left out with no ratio", p1)
	}
	if !p2.Used || p2.H2 != "w4-h2" || p2.H3 != "w3-h3" || math.Abs(p2.Ratio-1.75) > 1e-9 {
		t.Errorf("pair 2: %+v, want (w4-h2, w3-h3) used at 3.5/2.0 = 1.75", p2)
	}
	js := show(t, c)
	if !strings.Contains(js, `"cpu_seconds":null`) || strings.Count(js, `"ratio":`) != 2 {
		t.Errorf("grade.json must say null for w1's CPU and carry only the used pair's ratio and the estimate: %s", js)
	}
	if gt := g.Gates[0]; gt.Verdict != Inconclusive || !strings.HasPrefix(gt.Figure, "1.75× (no interval)") {
		t.Errorf("one valid pair: %s %s (%s)", gt.Verdict, gt.Figure, gt.Reason)
	}
}

func show(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A window boundary between two samples is refused, naming the window, the
// boundary and the samples either side: the 1,500 requests and 4.5 s of
// CPU between 00:05 and 00:10 belong partly to each side, and how much to
// each nobody measured.
func TestAWindowBoundaryOffTheSampleGridIsRefused(t *testing.T) {
	m := handSoak(t,
		"end: 2026-10-01T00:10:00Z, protocol: h3", "end: 2026-10-01T00:07:30Z, protocol: h3",
		"{name: w3-h3, start: 2026-10-01T00:10:00Z", "{name: w3-h3, start: 2026-10-01T00:07:30Z")
	_, err := Run(m)
	want := `window w2-h3: sources.proxy_cpu: boundary 2026-10-01T00:07:30Z is not a sample time of series {__name__="cpu",pod="a"} (nearest samples 2026-10-01T00:05:00Z and 2026-10-01T00:10:00Z)`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant an error containing %s", err, want)
	}
}

// When proxy_requests and client_requests read the same series, the count
// skew is zero whatever the proxy did: the gate refuses rather than pass
// on a check that compared a counter with itself. The same windows with
// the two counters apart pass (TestCPUGateOutcomes, "under the gate").
func TestSkewCheckOnOneSeriesIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		match map[string]string
	}{
		{"same selector", map[string]string{"__name__": "proxy"}},
		{"different selector, same series", map[string]string{"__name__": "proxy", "job": ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := synth(t, abbaWins(1.15, 1.2, 1.18, 1.22, 1.16, 1.19))
			m.Sources.ClientRequests.Match = tc.match
			g, err := Run(m)
			if err != nil {
				t.Fatal(err)
			}
			gt := g.Gates[0]
			if gt.Verdict != Refused || !strings.Contains(gt.Reason, `both select series {__name__="proxy"} of m.json`) {
				t.Errorf("got %s: %s", gt.Verdict, gt.Reason)
			}
			if g.CPU.Ratio != 0 || len(g.CPU.Windows) != 0 {
				t.Error("a refused gate must not publish figures")
			}
		})
	}
}

// With fewer valid pairs than an exact interval needs, the interval's
// bounds are infinite; the grade must still encode as grade.json, with the
// estimate and no bounds.
func TestAnUnboundedGradeEncodes(t *testing.T) {
	g, err := Run(synth(t, abbaWins(1.1, 1.12, 1.09, 1.11)))
	if err != nil {
		t.Fatal(err)
	}
	js := show(t, g)
	if g.CPU.Bounded || strings.Contains(js, `"lower"`) || strings.Contains(js, `"upper"`) {
		t.Errorf("an unbounded grade must carry no bounds: %s", js)
	}
}
