package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
	"sigs.k8s.io/yaml"
)

// rev is the build under test in every case; the testdata results are
// stamped with it, so only what the case forged can make them fail.
const rev = "1111111111111111111111111111111111111111"

func built(revision string, dirty bool) results.Build {
	return results.Build{Revision: revision, Dirty: dirty, Go: "go1.26.0", Kernel: "6.18.0"}
}

// suite is an honest result: its verdict follows from its rows.
func suite(name string, subjectGreen bool, b results.Build) results.Result {
	facts := map[string]any{"ipi_addr": "127.0.0.1"}
	r := results.Result{Suite: name, Subject: "s", Started: time.Unix(0, 0).UTC(), Build: b,
		Cases: []results.CaseResult{
			{Name: "redirect-control", Role: results.Control, Expected: "ipi_addr is 127.0.0.1", Observed: "ipi_addr 127.0.0.1",
				Witness: "the receiver's IP_PKTINFO", Facts: facts, Matched: true},
			{Name: "tproxy", Role: results.Subject, Expected: "ipi_addr is the ClusterIP", Observed: "ipi_addr 10.96.0.10",
				Witness: "the receiver's IP_PKTINFO", Facts: facts, Matched: subjectGreen, Reason: "saw 127.0.0.1"},
		}}
	r.Verdict, r.Reason = results.Decide(r)
	return r
}

func write(t *testing.T, dir string, r results.Result) {
	t.Helper()
	if err := r.Write(filepath.Join(dir, "suites")); err != nil {
		t.Fatal(err)
	}
}

// soak copies a fixture soak into a folder of its own, makes it a soak of
// revision (when not empty) by rewriting its manifest there, and grades it
// as if graded by build b. The gate re-grades from that copy, so a case
// may forge it.
func soak(t *testing.T, dir, fixture, revision string, b results.Build) string {
	t.Helper()
	path := copyFixture(t, fixture)
	if revision != "" {
		m, err := manifest.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		m.Builds = []string{revision}
		for i := range m.Windows {
			m.Windows[i].Build = revision
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, y, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grade.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	g.Build = b
	out := filepath.Join(dir, "soaks", m.Name)
	if err := render.WriteSoak(out, g, nil); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(out, render.GradeFile)
}

// copyFixture copies fixtures/soaks/<fixture> into a new temporary folder
// of the same name and returns its manifest's path.
func copyFixture(t *testing.T, fixture string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), fixture)
	if err := os.CopyFS(to, os.DirFS(filepath.Join("../../../fixtures/soaks", fixture))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(to, "manifest.yaml")
}

// runGate runs the gate with its log and report in a folder of their own
// and returns what it printed, then its log: the tables the screen has
// no room for are there.
func runGate(t *testing.T, c config) (int, string) {
	t.Helper()
	code, screen, log := runGateApart(t, c)
	return code, screen + log
}

// runGateApart is runGate with the screen and the log apart.
func runGateApart(t *testing.T, c config) (code int, screen, log string) {
	t.Helper()
	out := t.TempDir()
	c.log, c.html = filepath.Join(out, "gate.log"), filepath.Join(out, "gate.html")
	var stdout, errb bytes.Buffer
	code = run(c, &stdout, &errb)
	b, err := os.ReadFile(c.log)
	if err != nil {
		t.Fatalf("the gate wrote no log: %v", err)
	}
	return code, stdout.String() + errb.String(), string(b)
}

func lastLine(out string) string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

func wantAll(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("%s: output lacks %q:\n%s", what, w, out)
		}
	}
}

func TestGate(t *testing.T) {
	dir := t.TempDir()
	if code, out := runGate(t, config{dir: dir}); code != 1 || !strings.Contains(out, "nothing was proven") {
		t.Errorf("no suites: exit %d\n%s", code, out)
	}
	write(t, dir, suite("udproute-selection", true, built(rev, false)))
	code, out := runGate(t, config{dir: dir, build: rev})
	if code != 0 || !strings.Contains(out, "redirect-control") ||
		lastLine(out) != "aether-gate: PASS: 1 suite(s) and 0 soak(s) passed, for build "+rev+" (clean)" {
		t.Errorf("one passing suite: exit %d\n%s", code, out)
	}
	// A required suite that wrote nothing fails the gate, even though
	// every result present passed.
	if code, out := runGate(t, config{dir: dir, build: rev, required: []string{"udproute-selection", "phase0"}}); code != 1 ||
		!strings.Contains(out, "suite phase0 wrote no result") || !strings.Contains(out, "1 of 2 suite(s)") {
		t.Errorf("required suite missing: exit %d\n%s", code, out)
	}
	if code, out := runGate(t, config{dir: dir, build: rev, requireSoak: true}); code != 1 || !strings.Contains(out, "-require-soak") {
		t.Errorf("-require-soak without a soak: exit %d\n%s", code, out)
	}

	p := soak(t, dir, "2026-09-28-rev247-same-build-ab", rev, built(rev, false))
	code, out = runGate(t, config{dir: dir, build: rev})
	if code != 0 || !strings.Contains(out, "1.18× [1.14, 1.21]") || !strings.Contains(out, "PASS: 1 suite(s) and 1 soak(s) passed") {
		t.Errorf("passing suite and soak: exit %d\n%s", code, out)
	}
	// The recorded soak graded two of the local soak's seven gates: it
	// cannot release a build.
	code, out = runGate(t, config{dir: dir, build: rev, requireSoak: true})
	if code != 1 {
		t.Errorf("a release on a soak without the full gate set: exit %d\n%s", code, out)
	}
	for _, name := range []string{"liveness SLO", "503 NC", "prunes of in-use twins", "proxy crashes", "schedule steps not run"} {
		wantAll(t, "release on rev247", out, p+`: gate "`+name+`" is missing: a release (-require-soak) requires the local soak's full gate set`)
	}
	if strings.Contains(out, `gate "h3/h2 per-request proxy CPU" is missing`) || strings.Contains(out, `gate "load-generator errors" is missing`) {
		t.Errorf("a gate the soak graded is reported missing:\n%s", out)
	}

	soak(t, dir, "2026-09-30-resoak-1.0.13-84fb413", rev, built(rev, false))
	code, out = runGate(t, config{dir: dir, build: rev})
	if code != 1 || !strings.Contains(out, "9 / 719,984 failed, SLO 99.999% allows 7") || !strings.Contains(out, "0 of 1 suite(s) and 1 of 2 soak(s) did not pass") {
		t.Errorf("failing soak: exit %d\n%s", code, out)
	}
	if err := os.RemoveAll(filepath.Join(dir, "soaks", "resoak-2026-09-30-1.0.13-84fb413")); err != nil {
		t.Fatal(err)
	}

	write(t, dir, suite("quic-resumption", false, built(rev, false)))
	code, out = runGate(t, config{dir: dir, build: rev})
	if code != 1 || !strings.Contains(out, "1 of 2 suite(s) and 0 of 1 soak(s) did not pass, for build "+rev) {
		t.Errorf("failing suite: exit %d\n%s", code, out)
	}
}

// Three suites whose rows are all unmatched but whose verdicts say PASS:
// the gate recomputes each verdict and names the file and the rows.
func TestForgedVerdictFails(t *testing.T) {
	dir := filepath.Join("testdata", "forged")
	code, out := runGate(t, config{dir: dir, build: rev, required: []string{"phase0", "cni-capture", "udproute"}})
	if code == 0 || strings.Contains(out, "PASS: ") {
		t.Errorf("forged verdicts passed: exit %d\n%s", code, out)
	}
	wantAll(t, "forged", out,
		"testdata/forged/suites/phase0.json: declares PASS but its rows decide BROKEN_RIG: control C2 did not show its signature",
		"testdata/forged/suites/cni-capture.json: declares PASS but its rows decide BROKEN_RIG: control redirect-udp did not show its signature",
		"testdata/forged/suites/udproute.json: declares PASS but its rows decide BROKEN_RIG: control selection-redirect did not show its signature",
		"FAIL: 3 of 3 suite(s) and 0 of 0 soak(s) did not pass")
}

// A control that claims its signature without a witness or facts is a
// vacuous match, and the gate refuses it.
func TestVacuousControlFails(t *testing.T) {
	code, out := runGate(t, config{dir: filepath.Join("testdata", "vacuous"), build: rev})
	if code == 0 {
		t.Errorf("vacuous control passed:\n%s", out)
	}
	wantAll(t, "vacuous", out,
		"testdata/vacuous/suites/phase0.json: row C2 (control) declares matched with no witness and no facts",
		"VACUOUS (no witness and no facts)")
}

func TestStaleRevisionFails(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	write(t, dir, suite("udproute", true, built("2222222222222222222222222222222222222222", false)))
	code, out := runGate(t, config{dir: dir, build: rev})
	if code == 0 {
		t.Errorf("a result of another build passed:\n%s", out)
	}
	wantAll(t, "stale", out, filepath.Join(dir, "suites", "udproute.json")+": judged build 2222222222222222222222222222222222222222, not "+rev)
	// Without -build the first result fixes the build, and the other still
	// disagrees with it.
	if code, out := runGate(t, config{dir: dir}); code == 0 || !strings.Contains(out, "udproute.json: judged build 2222") {
		t.Errorf("mixed builds without -build: exit %d\n%s", code, out)
	}
}

func TestMissingRevisionFails(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, results.Build{Unknown: "AETHER_BUILD_REVISION is unset"}))
	for _, c := range []config{{dir: dir, build: rev}, {dir: dir}} {
		code, out := runGate(t, c)
		if code == 0 {
			t.Errorf("-build %q: a result with no build passed:\n%s", c.build, out)
		}
		wantAll(t, "missing", out, filepath.Join(dir, "suites", "phase0.json")+": records no build (AETHER_BUILD_REVISION is unset)")
	}
}

func TestDirtyBuildNeedsAllowDirty(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, true)))
	if code, out := runGate(t, config{dir: dir, build: rev}); code == 0 || !strings.Contains(out, "phase0.json: judged "+rev+" with uncommitted changes") {
		t.Errorf("dirty without -allow-dirty: exit %d\n%s", code, out)
	}
	code, out := runGate(t, config{dir: dir, build: rev, allowDirty: true})
	if code != 0 || !strings.HasSuffix(lastLine(out), "for build "+rev+" (dirty: uncommitted changes, not releasable)") {
		t.Errorf("dirty with -allow-dirty: exit %d\n%s", code, out)
	}
}

// A grade whose failing gate and soak verdict were both edited to PASS:
// the gate recomputes the gate from its inputs.
func TestEditedSoakGateVerdictFails(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	p := soak(t, dir, "2026-09-30-resoak-1.0.13-84fb413", rev, built(rev, false))
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.ReplaceAll(string(b), `"verdict": "FAIL"`, `"verdict": "PASS"`)
	if n := strings.Count(string(b), `"verdict": "FAIL"`); n < 2 {
		t.Fatalf("test is stale: %d FAIL verdicts to edit in %s", n, p)
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runGate(t, config{dir: dir, build: rev})
	if code == 0 {
		t.Errorf("edited grade passed:\n%s", out)
	}
	wantAll(t, "edited soak", out,
		p+`: gate "liveness SLO" declares PASS but its inputs decide FAIL`,
		p+": declares PASS but its gates decide FAIL")
}

func TestSoakOfAnotherBuildCannotJudge(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	p := soak(t, dir, "2026-09-28-rev247-same-build-ab", "", built(rev, false))
	code, out := runGate(t, config{dir: dir, build: rev})
	if code == 0 {
		t.Errorf("a soak of rev247 passed for %s:\n%s", rev, out)
	}
	wantAll(t, "other soak", out, p+": cannot judge build "+rev+" from soak rev247-same-build-ab: it ran rev247")
}

func TestSuiteThatCouldNotStartShowsWhy(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(results.EnvRevision, rev)
	t.Setenv(results.EnvDirty, "false")
	s := redgreen.Suite{Name: "udproute", Subject: "s"}
	write(t, dir, s.CouldNotStart(errors.New("failed to build the mesh binaries: exit status 1")))
	code, out := runGate(t, config{dir: dir, build: rev, required: []string{"udproute"}})
	if code == 0 {
		t.Errorf("a suite that could not start passed:\n%s", out)
	}
	wantAll(t, "could not start", out, "udproute: FAIL (could not start: failed to build the mesh binaries: exit status 1)")
}

// A grade made by another build's grader is held to -build like a suite.
func TestSoakGradedByAnotherBuildFails(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	p := soak(t, dir, "2026-09-28-rev247-same-build-ab", rev, results.Build{Unknown: "AETHER_BUILD_REVISION is unset"})
	code, out := runGate(t, config{dir: dir, build: rev})
	if code == 0 {
		t.Errorf("an unstamped grade passed:\n%s", out)
	}
	wantAll(t, "unstamped grade", out, p+": the grade records no build (AETHER_BUILD_REVISION is unset)")
}

// A suite result that cannot be read fails as that suite, once: it is not
// also counted as a required suite that wrote nothing.
func TestUnreadableResultCountsOnce(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	if err := os.WriteFile(filepath.Join(dir, "suites", "udproute.json"), []byte(`{"suite": "udrou`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out := runGate(t, config{dir: dir, build: rev, required: []string{"phase0", "udproute"}})
	if code != 1 {
		t.Errorf("unreadable result: exit %d\n%s", code, out)
	}
	wantAll(t, "unreadable", out, "udproute.json: unexpected end of JSON input", "FAIL: 1 of 2 suite(s)")
	if strings.Contains(out, "suite udproute wrote no result") {
		t.Errorf("the unreadable result is also reported missing:\n%s", out)
	}
}

// A directory given as an argument instead of -dir is refused, naming
// the flag, rather than ignored in favour of the default.
func TestPositionalDirIsRefused(t *testing.T) {
	var errb bytes.Buffer
	_, err := parseFlags([]string{"-build", rev, "/tmp/other"}, &errb)
	if err == nil || !strings.Contains(err.Error(), `unexpected argument "/tmp/other": give the report directory as -dir /tmp/other`) {
		t.Errorf("positional dir: got %v", err)
	}
	c, err := parseFlags([]string{"-dir", "d", "-require", "phase0, udproute", "-allow-dirty"}, &errb)
	if err != nil || c.dir != "d" || strings.Join(c.required, "|") != "phase0|udproute" || !c.allowDirty {
		t.Errorf("flags: got %+v, %v", c, err)
	}
}

// A key no result or grade has (a misspelt "verdcit") is refused naming
// the file and the key's path, not judged as if it were absent.
func TestUnknownKeyIsRefused(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	write(t, dir, suite("udproute", true, built(rev, false)))
	sp := filepath.Join(dir, "suites", "udproute.json")
	gp := soak(t, dir, "2026-09-28-rev247-same-build-ab", rev, built(rev, false))
	for p, edit := range map[string][2]string{
		sp: {`"matched": true,`, `"matched": true, "verdcit": "PASS",`},
		gp: {`"soak": `, `"Soak": "x", "soak": `},
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		edited := strings.Replace(string(b), edit[0], edit[1], 1)
		if edited == string(b) {
			t.Fatalf("test is stale: no %q in %s", edit[0], p)
		}
		if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	code, out := runGate(t, config{dir: dir, build: rev})
	if code == 0 {
		t.Errorf("files with unknown keys passed:\n%s", out)
	}
	wantAll(t, "unknown keys", out,
		"suite result "+sp+`: unknown field "cases[0].verdcit"`,
		"soak grade "+gp+`: unknown field "Soak"`,
		"FAIL: 1 of 2 suite(s) and 1 of 1 soak(s) did not pass")
}

// A suite whose run was cut short (Ctrl-C during make gate) fails as
// interrupted, not judged, rather than as a subject that failed.
func TestInterruptedSuiteIsNotJudged(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(results.EnvRevision, rev)
	t.Setenv(results.EnvDirty, "false")
	ctx, cancel := context.WithCancelCause(context.Background())
	r := redgreen.Run(ctx, redgreen.Suite{Name: "udproute", Subject: "s", Cases: []redgreen.Case{
		{Name: "selection-redirect", Role: redgreen.Control, Expect: "collapse",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				cancel(errors.New("Interrupted by User"))
				return redgreen.Observation{}, fmt.Errorf("send: %w", context.Cause(ctx))
			},
			Check: func(redgreen.Observation) error { return nil }},
	}})
	write(t, dir, r)
	p := filepath.Join(dir, "suites", "udproute.json")
	code, out := runGate(t, config{dir: dir, build: rev, required: []string{"udproute"}})
	if code == 0 {
		t.Errorf("an interrupted suite passed:\n%s", out)
	}
	wantAll(t, "interrupted", out,
		"udproute: INTERRUPTED (interrupted, not judged: Interrupted by User)",
		p+": suite udproute was interrupted, not judged",
		"FAIL: 1 of 1 suite(s)")
}

// A focused run (go test -ginkgo.focus) writes its result marked partial:
// its rows may all be green, controls included, but they speak for the
// cases that ran, and the gate refuses it, whatever verdict it declares.
func TestPartialSuiteIsRefused(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(results.EnvRevision, rev)
	t.Setenv(results.EnvDirty, "false")
	obs := func(s string) func(context.Context) (redgreen.Observation, error) {
		return func(context.Context) (redgreen.Observation, error) {
			return redgreen.Observation{Summary: s, Witness: "the backends", Evidence: saw{s}}, nil
		}
	}
	ok := func(redgreen.Observation) error { return nil }
	run := redgreen.Start(context.Background(), redgreen.Suite{Name: "udproute", Subject: "s", Cases: []redgreen.Case{
		{Name: "selection-redirect", Role: redgreen.Control, Expect: "collapse", Run: obs("collapsed"), Check: ok},
		{Name: "selection-tproxy", Role: redgreen.Subject, Expect: "own", Run: obs("own"), Check: ok},
		{Name: "twenty-services", Role: redgreen.Subject, Expect: "own", Run: obs("own"), Check: ok},
	}})
	for _, name := range []string{"selection-redirect", "selection-tproxy"} {
		if _, err := run.Case(context.Background(), name); err != nil {
			t.Fatal(err)
		}
	}
	r := run.Finish(context.Background())
	if r.Verdict != results.Partial {
		t.Fatalf("a run that left a case out: %s (%s), want PARTIAL", r.Verdict, r.Reason)
	}
	p := filepath.Join(dir, "suites", "udproute.json")
	for _, declared := range []results.Verdict{results.Partial, results.Pass} {
		r.Verdict = declared
		write(t, dir, r)
		code, out := runGate(t, config{dir: dir, build: rev, required: []string{"udproute"}})
		if code == 0 {
			t.Errorf("a partial suite declaring %s passed:\n%s", declared, out)
		}
		wantAll(t, "partial declaring "+string(declared), out,
			p+": suite udproute is a partial run, not judged (ran 2 of 3 cases; not run: twenty-services)",
			"FAIL: 1 of 1 suite(s)")
	}
}
