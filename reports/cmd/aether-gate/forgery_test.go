package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
	soakrun "github.com/aether-mesh/aether/soak/run"
	"sigs.k8s.io/yaml"
)

// The forgeries below edit a grade, its manifest or its evidence the way a
// person with write access to the report folder could. Each is refused,
// naming the file and the gate; the same soak unforged passes, so what
// refuses it is the forgery.

const resoak = "2026-09-30-resoak-1.0.13-84fb413"

// editGrade rewrites the grade at p through edit, as JSON.
func editGrade(t *testing.T, p string, edit func(g map[string]any)) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]any
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	edit(g)
	out, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// gatesOf is the grade's gates, each as JSON reads it.
func gatesOf(t *testing.T, g map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, gt := range g["gates"].([]any) {
		out = append(out, gt.(map[string]any))
	}
	return out
}

func setGates(g map[string]any, gates []map[string]any) {
	list := make([]any, len(gates))
	for i, gt := range gates {
		list[i] = gt
	}
	g["gates"] = list
}

// passAll declares the soak and every gate PASS, as a forger would once
// the evidence it edited no longer shows a failure.
func passAll(t *testing.T, g map[string]any) {
	gates := gatesOf(t, g)
	for _, gt := range gates {
		gt["verdict"] = "PASS"
	}
	g["verdict"] = "PASS"
	g["reason"] = "all gate(s) passed"
}

func wantRefused(t *testing.T, what string, c config, wants ...string) {
	t.Helper()
	code, out := runGate(t, c)
	if code != 1 || strings.Contains(lastLine(out), "PASS") {
		t.Errorf("%s: exit %d, want 1\n%s", what, code, out)
	}
	wantAll(t, what, out, wants...)
}

// The 2026-09-30 re-soak (liveness 9 / 719,984, FAIL) with its failing
// gate deleted from the grade and the soak declared PASS: every gate left
// recomputes PASS from its inputs, so only the re-grade refutes it.
func TestDeletedFailingGateIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	p := soak(t, dir, resoak, rev, built(rev, false))
	editGrade(t, p, func(g map[string]any) {
		var kept []map[string]any
		for _, gt := range gatesOf(t, g) {
			if gt["verdict"] != "FAIL" {
				kept = append(kept, gt)
			}
		}
		setGates(g, kept)
		g["verdict"] = "PASS"
		g["reason"] = "all 5 gate(s) passed"
	})
	// The table shown is the evidence's, not the forged grade's.
	if _, out := runGate(t, config{dir: dir, build: rev}); !regexp.MustCompile(`(?m)^liveness SLO +FAIL +9 / 719,984 failed`).MatchString(out) {
		t.Errorf("the gate shows the forged table:\n%s", out)
	}
	for _, c := range []config{{dir: dir, build: rev}, {dir: dir, build: rev, requireSoak: true}} {
		wantRefused(t, "failing gate deleted", c,
			p+`: gate "liveness SLO" is missing from the grade; its evidence grades it FAIL (9 / 719,984 failed, SLO 99.999% allows 7)`,
			p+`: verdict is "PASS" in the grade, but its evidence grades it "FAIL"`,
			"0 of 1 suite(s) and 1 of 1 soak(s) did not pass")
	}
}

// The re-soak with inputs.liveness.failed set to 0 and every verdict PASS:
// the inputs now recompute PASS, and the evidence says 9.
func TestReGradedInputsAreRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	p := soak(t, dir, resoak, rev, built(rev, false))
	editGrade(t, p, func(g map[string]any) {
		for _, gt := range gatesOf(t, g) {
			if gt["name"] == grade.GateLiveness {
				gt["inputs"].(map[string]any)["liveness"].(map[string]any)["failed"] = 0
			}
		}
		passAll(t, g)
	})
	wantRefused(t, "liveness inputs re-graded", config{dir: dir, build: rev},
		p+`: gate "liveness SLO": inputs.liveness.failed is 0 in the grade, but its evidence grades it 9`,
		p+`: gate "liveness SLO": verdict is "PASS" in the grade, but its evidence grades it "FAIL"`)
}

// An evidence file altered after grading, and one deleted: the grade
// binds each by its sha256 and names the gates that read it.
func TestAlteredOrMissingEvidenceIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	run, _ := localSoak(t, dir, rev)
	if code, out := runGate(t, config{dir: dir, build: rev, requireSoak: true}); code != 0 {
		t.Fatalf("the genuine local soak did not pass: exit %d\n%s", code, out)
	}
	counters := filepath.Join(run, soakrun.CountersFile)
	b, err := os.ReadFile(counters)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(counters, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "altered evidence", config{dir: dir, build: rev, requireSoak: true},
		"evidence file "+counters+` (read by gates "503 NC", "h3/h2 per-request proxy CPU", "liveness SLO", "proxy crashes", "prunes of in-use twins", "schedule steps not run") has sha256 `,
		"it was altered since")
	if err := os.WriteFile(counters, b, 0o644); err != nil {
		t.Fatal(err)
	}
	results := filepath.Join(run, soakrun.ResultsFile)
	if err := os.Remove(results); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "deleted evidence", config{dir: dir, build: rev, requireSoak: true},
		"evidence file "+results+` (read by gate "load-generator errors") is missing`)
}

// A long soak's leak gates are re-graded from the resource gauges the
// grade binds: the genuine soak passes the gate, and its gauges edited to
// hide a leak, or to show one, are refused naming the file and the gates
// that read it.
func TestLeakGatesAreRegradedFromTheirGauges(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	run, _ := localSoakOf(t, dir, rev, localRun{windows: 12, leaks: true})
	code, out := runGate(t, config{dir: dir, build: rev, requireSoak: true})
	if code != 0 {
		t.Fatalf("the genuine long soak did not pass: exit %d\n%s", code, out)
	}
	res := filepath.Join(run, soakrun.ResourcesFile)
	b, err := os.ReadFile(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(res, append(b, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "altered gauges", config{dir: dir, build: rev, requireSoak: true},
		"evidence file "+res+` (read by gates "leak: goroutines", "leak: open fds", "leak: recorded QUIC pairs", "leak: resident memory") has sha256 `,
		"it was altered since")
	// The witness that the gate reads the gauges at all: a soak whose
	// memory grows 100 MiB/h fails it.
	leaky := t.TempDir()
	write(t, leaky, suite("phase0", true, built(rev, false)))
	localSoakOf(t, leaky, rev, localRun{windows: 12, leaks: true, leakPerHour: 100 << 20})
	wantRefused(t, "a leak", config{dir: leaky, build: rev, requireSoak: true}, "leak: resident memory")
}

// A manifest edited after grading (its liveness SLO lowered) is refused
// before anything is re-graded from it.
func TestAlteredManifestIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	p := soak(t, dir, resoak, rev, built(rev, false))
	g := loadGrade(t, p)
	b, err := os.ReadFile(g.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `slo: "99.999"`, `slo: "99.99"`, 1)
	if edited == string(b) {
		t.Fatalf("test is stale: no liveness SLO 99.999 in %s", g.Manifest)
	}
	if err := os.WriteFile(g.Manifest, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, "altered manifest", config{dir: dir, build: rev},
		p+": manifest "+g.Manifest+" has sha256 ", "it was altered since")
}

// A gate dropped from a genuine passing grade. Dropped from the grade
// alone, the re-grade names it; dropped from the manifest too and graded
// again, the re-grade agrees, and only the release's gate set refuses it.
func TestDroppedGateIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	_, p := localSoak(t, dir, rev)
	drop := func(g map[string]any) {
		var kept []map[string]any
		for _, gt := range gatesOf(t, g) {
			if gt["name"] != grade.GateStepsNotRun {
				kept = append(kept, gt)
			}
		}
		setGates(g, kept)
		g["reason"] = "all 6 gate(s) passed"
	}
	editGrade(t, p, drop)
	wantRefused(t, "gate dropped from the grade", config{dir: dir, build: rev},
		p+`: gate "schedule steps not run" is missing from the grade; its evidence grades it PASS (0 (limit 0))`)

	// Now from the manifest as well: a soak that never asked.
	g := loadGrade(t, p)
	m, err := manifest.Load(g.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	var counts []manifest.CountGate
	for _, c := range m.Gates.Counts {
		if c.Name != grade.GateStepsNotRun {
			counts = append(counts, c)
		}
	}
	m.Gates.Counts = counts
	y, err := yaml.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(g.Manifest, y, 0o644); err != nil {
		t.Fatal(err)
	}
	// Graded again, by the grader itself: the grade now agrees with its
	// manifest and evidence.
	gradeManifest(t, dir, g.Manifest, rev)
	// The re-grade agrees with the grade, so the gate alone passes it …
	if code, out := runGate(t, config{dir: dir, build: rev}); code != 0 {
		t.Fatalf("test is stale: the consistent forgery is refused for another reason: exit %d\n%s", code, out)
	}
	// … and a release refuses it, naming the gate.
	wantRefused(t, "gate dropped from grade and manifest", config{dir: dir, build: rev, requireSoak: true},
		p+`: gate "schedule steps not run" is missing: a release (-require-soak) requires the local soak's full gate set`)
}

// A local soak stopped before its first ABBA pair ended has no CPU gate,
// by design. It fails on its steps not run, and a release names the CPU
// gate it lacks too; so does a soak whose agents export no prunes of
// in-use twins, which otherwise passes.
func TestSoakWithoutTheFullGateSetCannotRelease(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	_, p := localSoakOf(t, dir, rev, localRun{windows: 1, notRun: 11})
	if g := loadGrade(t, p); g.CPU != nil || len(grade.MissingForRelease(g)) != 1 {
		t.Fatalf("test is stale: the partial soak grades %v", g.Gates)
	}
	wantRefused(t, "partial soak", config{dir: dir, build: rev},
		"local: FAIL (fail: schedule steps not run)")
	wantRefused(t, "partial soak, release", config{dir: dir, build: rev, requireSoak: true},
		p+`: gate "h3/h2 per-request proxy CPU" is missing: a release (-require-soak) requires the local soak's full gate set`)

	dir = t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	_, p = localSoakOf(t, dir, rev, localRun{windows: 12, noPrunedLive: true})
	if code, out := runGate(t, config{dir: dir, build: rev}); code != 0 {
		t.Fatalf("test is stale: the soak without a prune gate does not pass otherwise: exit %d\n%s", code, out)
	}
	wantRefused(t, "no prune gate, release", config{dir: dir, build: rev, requireSoak: true},
		p+`: gate "prunes of in-use twins" is missing: a release (-require-soak) requires the local soak's full gate set`)

	// A soak that ran no network fault has no fault gates: it passes, and
	// cannot release a build.
	dir = t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	_, p = localSoakOf(t, dir, rev, localRun{windows: 12, noFault: true})
	if code, out := runGate(t, config{dir: dir, build: rev}); code != 0 {
		t.Fatalf("test is stale: the soak without network faults does not pass otherwise: exit %d\n%s", code, out)
	}
	wantRefused(t, "no network fault, release", config{dir: dir, build: rev, requireSoak: true},
		p+`: gate "network faults: probe failures" is missing: a release (-require-soak) requires the local soak's full gate set`,
		p+`: gate "network faults: recovery" is missing`)
}

// A grade written before grades bound their evidence (or with its binding
// removed) cannot be re-graded, so it cannot pass.
func TestUnboundGradeIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	_, p := localSoak(t, dir, rev)
	editGrade(t, p, func(g map[string]any) { delete(g, "manifest_sha256"); delete(g, "evidence") })
	wantRefused(t, "unbound grade", config{dir: dir, build: rev, requireSoak: true},
		p+": binds no sha256 of its manifest ")
}

func loadGrade(t *testing.T, p string) *grade.Grade {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var g grade.Grade
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// A manifest loosened and graded again (a count limit of 1,000, the SLO
// lowered to 99 %, the CPU limit raised to 3×) agrees with its re-grade,
// so only the release's limits refuse it; limits stricter than the local
// soak's pass.
func TestLoosenedLimitsCannotRelease(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	_, p := localSoak(t, dir, rev)
	rewrite := func(edit func(m *manifest.Manifest)) {
		t.Helper()
		m, err := manifest.Load(loadGrade(t, p).Manifest)
		if err != nil {
			t.Fatal(err)
		}
		edit(m)
		y, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(m.Path, y, 0o644); err != nil {
			t.Fatal(err)
		}
		gradeManifest(t, dir, m.Path, rev)
	}
	rewrite(func(m *manifest.Manifest) {
		m.Gates.CPURatio.Max = 3
		m.Gates.Liveness.SLO = "99"
		for i := range m.Gates.Counts {
			if m.Gates.Counts[i].Name == grade.Gate503NC {
				m.Gates.Counts[i].Limit = 1000
			}
		}
	})
	if code, out := runGate(t, config{dir: dir, build: rev}); code != 0 {
		t.Fatalf("test is stale: the loosened soak is refused for another reason: exit %d\n%s", code, out)
	}
	wantRefused(t, "loosened limits, release", config{dir: dir, build: rev, requireSoak: true},
		p+`: gate "h3/h2 per-request proxy CPU" is graded against a limit of 3.00×; a release requires a limit of at most 1.50×`,
		p+`: gate "liveness SLO" is graded against an SLO of 99%; a release requires an SLO of at least 99.9%`,
		p+`: gate "503 NC" is graded against a limit of 1000; a release requires a limit of 0`)

	rewrite(func(m *manifest.Manifest) {
		m.Gates.CPURatio.Max = 1.25
		m.Gates.Liveness.SLO = "99.99"
		for i := range m.Gates.Counts {
			m.Gates.Counts[i].Limit = 0
		}
	})
	if code, out := runGate(t, config{dir: dir, build: rev, requireSoak: true}); code != 0 {
		t.Errorf("stricter limits than the local soak's: exit %d\n%s", code, out)
	}
}
