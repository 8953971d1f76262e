package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const fixtures = "../../../fixtures/soaks"

func TestGrade(t *testing.T) {
	for _, tc := range []struct {
		soak string
		code int
		want string
	}{
		{"2026-09-28-rev247-same-build-ab", 0, "rev247-same-build-ab: PASS"},
		{"2026-09-27-rev242-vs-rev239", 1, "rev242-vs-rev239: REFUSED"},
		{"2026-09-30-resoak-1.0.13-84fb413", 1, "FAIL (fail: liveness SLO)"},
		{"2026-09-27-rev242-proving", 1, "FAIL (fail: 503 with flag NC, load-generator errors)"},
	} {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		code := run([]string{"grade", "-out", out, filepath.Join(fixtures, tc.soak, "manifest.yaml")}, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String(), tc.want) {
			t.Errorf("%s: exit %d, want %d with %q\n%s%s", tc.soak, code, tc.code, tc.want, stdout.String(), stderr.String())
		}
		for _, f := range []string{"report.html", "grade.json", "junit.xml"} {
			if _, err := os.Stat(filepath.Join(out, tc.soak, f)); err != nil {
				t.Errorf("%s: %v", tc.soak, err)
			}
		}
	}
}

func TestGradeAll(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"grade-all", "-out", out, fixtures}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	for _, want := range []string{"rev247-same-build-ab", "PASS", "REFUSED", "FAIL",
		// A row that did not pass says why, as grade does for that soak.
		"refused: h3/h2 per-request proxy CPU (windows from different builds cannot be paired",
		"fail: 503 with flag NC (1,060 > 0); load-generator errors (1,154 > 0)",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	// Each row says where its report went: the soak's name is not its
	// folder's, so the table is the only place that links the two.
	for _, want := range []string{
		filepath.Join(out, "2026-09-28-rev247-same-build-ab", "report.html"),
		filepath.Join(out, "2026-09-30-resoak-1.0.13-84fb413", "report.html"),
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*", "report.html"))
	if len(dirs) != 4 {
		t.Errorf("%d reports written, want 4", len(dirs))
	}
	if code := run([]string{"grade-all", "-strict", "-out", out, fixtures}, &stdout, &stderr); code != 1 {
		t.Errorf("-strict with failing soaks: exit %d, want 1", code)
	}
}

func TestGradeRejectsABadManifest(t *testing.T) {
	p := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(p, []byte("name: x\nbuilds: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run([]string{"grade", "-out", t.TempDir(), p}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "field builds: empty") {
		t.Errorf("exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"frobnicate"}, &stdout, &stderr); code != 2 {
		t.Errorf("unknown command: exit %d", code)
	}
}

// writeSoak writes a soak folder that needs nothing but a two-sample
// prober file: 1 failure in 1,000 probes against a 99.9 % SLO, a PASS.
func writeSoak(t *testing.T, dir, manifestName, doc string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prom := `{"status":"success","data":{"resultType":"matrix","result":[
{"metric":{"__name__":"probes"},"values":[[1790755200,"0"],[1790755260,"1000"]]},
{"metric":{"__name__":"failures"},"values":[[1790755200,"0"],[1790755260,"1"]]}]}}`
	for name, body := range map[string]string{"p.json": prom, manifestName: doc} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const jsonSoak = `{"name": "probe-only", "builds": ["b1"], "start": "2026-09-30T08:00:00Z", "end": "2026-09-30T08:01:00Z",
 "sources": {"probes_total": {"prometheus": "p.json", "match": {"__name__": "probes"}},
             "probes_failed": {"prometheus": "p.json", "match": {"__name__": "failures"}}},
 "gates": {"liveness": {"slo": "99.9"}}}`

// grade-all finds manifest.json as well as manifest.yaml, and files each
// report under the soak's folder name.
func TestGradeAllFindsJSONManifests(t *testing.T) {
	soaks, out := t.TempDir(), t.TempDir()
	writeSoak(t, filepath.Join(soaks, "2026-10-01-json"), "manifest.json", jsonSoak)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"grade-all", "-out", out, soaks}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "probe-only  PASS") {
		t.Errorf("table lacks the JSON soak's PASS:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, "2026-10-01-json", "grade.json")); err != nil {
		t.Error(err)
	}
}

func TestGradeAllRefusesTwoManifestsInOneFolder(t *testing.T) {
	soaks := t.TempDir()
	dir := filepath.Join(soaks, "both")
	writeSoak(t, dir, "manifest.json", jsonSoak)
	if err := os.WriteFile(filepath.Join(dir, "manifest.yaml"), []byte("name: other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run([]string{"grade-all", "-out", t.TempDir(), soaks}, &stdout, &stderr)
	if code != 2 || !strings.Contains(stderr.String(), "soak folder "+dir+" holds") {
		t.Errorf("exit %d, want 2 naming the folder: %s", code, stderr.String())
	}
}

// make gate runs "aether-soak grade -out reports/latest/soaks MANIFEST" and
// leaves the folder name to grade; aether-gate reads soaks/*/grade.json.
// The folder is the soak folder's name, the same one grade-all and the
// nightly report use, never the manifest's name field.
func TestGradeFilesTheReportUnderTheSoakFolder(t *testing.T) {
	manifestPath, err := filepath.Abs(filepath.Join(fixtures, "2026-09-28-rev247-same-build-ab", "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var stdout, stderr bytes.Buffer
	if code := run([]string{"grade", manifestPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join("reports", "latest", "soaks", "2026-09-28-rev247-same-build-ab", "grade.json")); err != nil {
		t.Error(err)
	}
	if got, _ := filepath.Glob(filepath.Join("reports", "latest", "soaks", "*")); len(got) != 1 {
		t.Errorf("report folders %v, want exactly the soak folder's", got)
	}
}

// A mistyped command line says what was wrong before the usage.
func TestMisuseNamesTheMistake(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "aether-soak: no command given"},
		{[]string{"grad", "m.yaml"}, `aether-soak: unknown command "grad" (want run, grade or grade-all)`},
		{[]string{"grade"}, "aether-soak: grade takes one MANIFEST, got 0 argument(s)"},
		{[]string{"grade", "a/manifest.yaml", "b/manifest.yaml"}, "aether-soak: grade takes one MANIFEST, got 2 argument(s)"},
		{[]string{"grade-all"}, "aether-soak: grade-all takes one SOAKS folder, got 0 argument(s)"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 || !strings.HasPrefix(stderr.String(), tc.want+"\nusage: ") {
			t.Errorf("%q: exit %d, stderr:\n%s\nwant it to start with %q and the usage", tc.args, code, stderr.String(), tc.want)
		}
	}
}

// A run's folder is graded in place, the index beside the run folders
// lists it, and -gate-out files the grade where aether-gate reads it.
func TestGradeRunFilesTheGradeTheIndexAndTheGateCopy(t *testing.T) {
	runs := filepath.Join(t.TempDir(), "runs")
	src := filepath.Join(fixtures, "2026-09-28-rev247-same-build-ab")
	if err := os.CopyFS(filepath.Join(runs, "night-1"), os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	gateOut := filepath.Join(t.TempDir(), "soaks")
	var stdout, stderr bytes.Buffer
	if code := gradeRun(filepath.Join(runs, "night-1", "manifest.yaml"), runs, gateOut, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	for _, f := range []string{
		filepath.Join(runs, "night-1", "report.html"), filepath.Join(runs, "night-1", "grade.json"),
		filepath.Join(filepath.Dir(runs), "index.html"), filepath.Join(gateOut, "night-1", "grade.json"),
	} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	idx, _ := os.ReadFile(filepath.Join(filepath.Dir(runs), "index.html"))
	if !strings.Contains(string(idx), "runs/night-1/report.html") {
		t.Errorf("the index does not link the run's report")
	}
}

func TestRunRefusesArguments(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run([]string{"run", "fixtures/scenarios/soak.yaml"}, &stdout, &stderr); code != 2 ||
		!strings.HasPrefix(stderr.String(), `aether-soak: run takes flags only, got "fixtures/scenarios/soak.yaml"`) {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
}

// Asking for help is not a mistake: the usage goes to stdout, exit 0.
func TestHelpIsTheUsage(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "help"} {
		var stdout, stderr bytes.Buffer
		if code := run([]string{arg}, &stdout, &stderr); code != 0 || !strings.HasPrefix(stdout.String(), "usage: aether-soak run [flags]") || stderr.Len() != 0 {
			t.Errorf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", arg, code, stdout.String(), stderr.String())
		}
	}
}
