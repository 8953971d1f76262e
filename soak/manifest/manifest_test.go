package manifest

import (
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const base = `name: t
builds: [b1]
start: 2026-09-30T08:00:00Z
end: 2026-09-30T16:00:00Z
target_rps: 300
windows:
- {name: w1, start: 2026-09-30T08:00:00Z, end: 2026-09-30T08:20:00Z, protocol: h2, build: b1}
- {name: w2, start: 2026-09-30T08:20:00Z, end: 2026-09-30T08:40:00Z, protocol: h3, build: b1}
excluded:
- {name: roll, start: 2026-09-30T12:00:00Z, end: 2026-09-30T12:10:00Z, reason: agent roll}
sources:
  proxy_cpu: {prometheus: cpu.json, match: {__name__: container_cpu_usage_seconds_total}}
  proxy_requests: {prometheus: rq.json, match: {__name__: envoy_http_downstream_rq_total}}
  client_requests: {prometheus: rq.json, match: {__name__: k6_http_reqs_total}}
  probes_total: {prometheus: p.json, match: {__name__: probes}}
  probes_failed: {prometheus: p.json, match: {__name__: failures}}
  loadgen: {k6_summary: k6.json}
gates:
  cpu_ratio: {max: 1.5}
  liveness: {slo: "99.999"}
  counts:
  - {name: errors, loadgen_errors: true, limit: 0}
`

func load(t *testing.T, doc string) (*Manifest, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return Load(p)
}

func TestLoadDefaults(t *testing.T) {
	m, err := load(t, base)
	if err != nil {
		t.Fatal(err)
	}
	c := m.Gates.CPURatio
	if c.Confidence != 0.95 || c.MinAchieved != 0.95 || c.MaxCountSkew != 0.01 {
		t.Errorf("defaults not applied: %+v", c)
	}
	if got := m.Resolve("cpu.json"); got != filepath.Join(m.Dir, "cpu.json") {
		t.Errorf("Resolve = %q", got)
	}
	if _, ok := m.InExcluded(m.Excluded[0].Start); !ok {
		t.Error("an exclusion's start is inside it")
	}
	if _, ok := m.InExcluded(m.Excluded[0].End); ok {
		t.Error("an exclusion's end is outside it")
	}
}

func TestRejects(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"unknown field", "target_rps: 300", "target_rps: 300\ntarget_qps: 300", `unknown field "target_qps"`},
		{"unknown gate field", "cpu_ratio: {max: 1.5}", "cpu_ratio: {max: 1.5, maxx: 1.4}", `unknown field "gates.cpu_ratio.maxx"`},
		{"unknown window field", "protocol: h3, build: b1}", "protocl: h3, protocol: h3, build: b1}", `unknown field "windows[1].protocl"`},
		{"unknown source field", "{prometheus: cpu.json, match:", "{prometheus: cpu.json, matches: {}, match:", `unknown field "sources.proxy_cpu.matches"`},
		{"duplicate field", "target_rps: 300", "target_rps: 300\ntarget_rps: 30", `key "target_rps" already set`},
		{"no builds", "builds: [b1]", "builds: []", "field builds: empty"},
		{"end before start", "end: 2026-09-30T16:00:00Z", "end: 2026-09-30T07:00:00Z", "field start/end"},
		{"protocol", "protocol: h3, build: b1}", "protocol: http3, build: b1}", `windows[1] (w2).protocol: "http3" is neither h2 nor h3`},
		{"unknown build", "protocol: h3, build: b1}", "protocol: h3, build: b2}", `windows[1] (w2).build: "b2" is not one of builds [b1]`},
		{"window outside", "{name: w2, start: 2026-09-30T08:20:00Z, end: 2026-09-30T08:40:00Z", "{name: w2, start: 2026-09-30T15:50:00Z, end: 2026-09-30T16:10:00Z", "lies outside the soak"},
		{"overlapping windows", "{name: w2, start: 2026-09-30T08:20:00Z", "{name: w2, start: 2026-09-30T08:10:00Z", "windows[1] (w2).start: overlaps"},
		{"exclusion without reason", "reason: agent roll", "reason: ''", "excluded[0] (roll).reason: empty"},
		{"exclusion over a window", "{name: roll, start: 2026-09-30T12:00:00Z", "{name: roll, start: 2026-09-30T08:30:00Z", "overlaps measurement window w2"},
		{"bad slo", `slo: "99.999"`, `slo: "99.999%"`, "gates.liveness.slo"},
		{"slo above 100", `slo: "99.999"`, `slo: "100.5"`, "not in (0, 100]"},
		{"no target", "target_rps: 300", "target_rps: 0", "field target_rps: must be positive"},
		{"soak time not RFC 3339", "end: 2026-09-30T16:00:00Z", "end: 2026-09-30 16:00", `field end: parsing time "2026-09-30 16:00"`},
		{"window time not RFC 3339", "end: 2026-09-30T08:40:00Z", "end: '2026-09-30 08:40'", `field windows[1].end: parsing time "2026-09-30 08:40"`},
		{"exclusion time not a string", "end: 2026-09-30T12:10:00Z", "end: 1759234200", "field excluded[0].end: "},
		{"count gate with both", "{name: errors, loadgen_errors: true, limit: 0}", "{name: errors, loadgen_errors: true, limit: 0, series: {prometheus: m.json, match: {a: b}}}", "exactly one of series and loadgen_errors"},
		{"negative limit", "loadgen_errors: true, limit: 0}", "loadgen_errors: true, limit: -1}", ".limit: negative"},
		{"events without summary", "loadgen: {k6_summary: k6.json}", "loadgen: {k6_events: e.json, vegeta: v.json}", "k6_events: needs k6_summary"},
		{"series without match", "proxy_cpu: {prometheus: cpu.json, match: {__name__: container_cpu_usage_seconds_total}}", "proxy_cpu: {prometheus: cpu.json}", "sources.proxy_cpu: needs prometheus"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(base, tc.old) {
				t.Fatalf("test is stale: %q not in base", tc.old)
			}
			_, err := load(t, strings.Replace(base, tc.old, tc.new, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "manifest.yaml") {
				t.Errorf("got %v, want an error naming the file and containing %q", err, tc.want)
			}
		})
	}
}

func TestParseSLOIsExact(t *testing.T) {
	r, err := ParseSLO("99.999")
	if err != nil {
		t.Fatal(err)
	}
	if r.Cmp(big.NewRat(99999, 100000)) != 0 {
		t.Errorf("99.999%% = %v, want 99999/100000", r)
	}
}

func TestFixtureManifestsLoad(t *testing.T) {
	files, _ := filepath.Glob("../../fixtures/soaks/*/manifest.yaml")
	if len(files) != 4 {
		t.Fatalf("found %d fixture manifests, want 4", len(files))
	}
	for _, f := range files {
		if _, err := Load(f); err != nil {
			t.Error(err)
		}
	}
}

// A manifest may be JSON as well (a pipeline writes it with jq).
func TestLoadJSON(t *testing.T) {
	doc := `{"name": "j", "builds": ["b1"], "start": "2026-09-30T08:00:00Z", "end": "2026-09-30T16:00:00Z",
	 "sources": {"loadgen": {"vegeta": "results.json"}},
	 "gates": {"counts": [{"name": "load-generator errors", "loadgen_errors": true, "limit": 3}]}}`
	m, err := load(t, doc)
	if err != nil {
		t.Fatal(err)
	}
	if m.Gates.Counts[0].Limit != 3 || m.Sources.LoadGen.Vegeta != "results.json" {
		t.Errorf("got %+v", m)
	}
}

// Windows are paired in declared order and must run ABBA; the first window
// out of order is named. Half a quadruple (A,B) and a schedule begun with
// h3 are ABBA too.
func TestWindowsMustBeABBA(t *testing.T) {
	at := func(i int) string { return fmt.Sprintf("2026-09-30T%02d:%02d:00Z", 8+i/3, i%3*20) }
	doc := func(protos ...string) string {
		var b strings.Builder
		for i, p := range protos {
			fmt.Fprintf(&b, "- {name: w%d, start: %s, end: %s, protocol: %s, build: b1}\n", i+1, at(i), at(i+1), p)
		}
		old := base[strings.Index(base, "windows:\n")+len("windows:\n") : strings.Index(base, "excluded:")]
		return strings.Replace(base, old, b.String(), 1)
	}
	for _, tc := range []struct {
		protos []string
		want   string
	}{
		{[]string{"h2", "h3", "h3", "h2", "h2", "h3", "h3", "h2"}, ""},
		{[]string{"h3", "h2", "h2", "h3"}, ""},
		{[]string{"h2", "h3", "h3", "h2", "h2", "h3"}, ""},
		{[]string{"h2", "h3", "h2", "h3"}, "windows[2] (w3).protocol: h2 breaks the ABBA order h2,h3,h3,h2,... begun by w1: window 1 of pair 2 must be h3"},
		{[]string{"h2", "h2", "h3", "h3"}, "windows[1] (w2).protocol: h2 breaks the ABBA order"},
		{[]string{"h3", "h2", "h2", "h3", "h2", "h3"}, "windows[4] (w5).protocol: h2 breaks the ABBA order h3,h2,h2,h3,... begun by w1: window 1 of pair 3 must be h3"},
		{[]string{"h2", "h3", "h3"}, "windows[2] (w3): has no partner: 3 windows cannot be paired"},
	} {
		_, err := load(t, doc(tc.protos...))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.protos, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: got %v, want %q", tc.protos, err, tc.want)
		}
	}
}
