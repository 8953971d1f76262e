package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/results"
	"sigs.k8s.io/yaml"
)

func TestReport(t *testing.T) {
	out, suites := t.TempDir(), t.TempDir()
	r := results.Result{Suite: "mtls-pool", Subject: "per-source QUIC pools", Verdict: results.Pass, Reason: "1 control(s) red, 1 subject(s) green",
		Started: time.Unix(0, 0).UTC(), Cases: []results.CaseResult{
			{Name: "shared-cert-control", Role: results.Control, Expected: "B rides A's connection", Observed: "B seen as A", Matched: true},
			{Name: "twins", Role: results.Subject, Expected: "B seen as B", Observed: "B seen as B", Matched: true},
		}}
	if err := r.Write(suites); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(out, "../../../fixtures/soaks", suites, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	idx, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := filepath.Glob(filepath.Join(out, "runs", "*", "report.html"))
	if len(pages) != 4 {
		t.Fatalf("%d run pages, want 4", len(pages))
	}
	for _, p := range pages {
		rel, _ := filepath.Rel(out, p)
		if !strings.Contains(string(idx), `href="`+filepath.ToSlash(rel)+`"`) {
			t.Errorf("index does not link %s", rel)
		}
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), "shared-cert-control") {
			t.Errorf("%s lacks the suite's red-then-green table", rel)
		}
	}
	if !strings.Contains(string(idx), "mtls-pool") {
		t.Error("index lacks the latest suites")
	}
	// A run graded on an earlier night stays in the index.
	b, err := os.ReadFile(filepath.Join(out, "runs", "2026-09-28-rev247-same-build-ab", "grade.json"))
	if err != nil {
		t.Fatal(err)
	}
	old := filepath.Join(out, "runs", "2026-09-20-nightly")
	if err := os.MkdirAll(old, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "grade.json"), []byte(strings.Replace(string(b), `"soak": "rev247-same-build-ab"`, `"soak": "nightly-0920"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run(out, "../../../fixtures/soaks", suites, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	idx, _ = os.ReadFile(filepath.Join(out, "index.html"))
	if !strings.Contains(string(idx), `href="runs/2026-09-20-nightly/report.html">nightly-0920<`) {
		t.Error("the earlier run fell out of the index")
	}

	// Absent suites are no suites, not an error.
	if code := run(t.TempDir(), "../../../fixtures/soaks", filepath.Join(t.TempDir(), "none"), &stdout, &stderr); code != 0 {
		t.Errorf("without suites: exit %d: %s", code, stderr.String())
	}
}

// A soak whose manifest is written as JSON is reported like a YAML one.
func TestReportReadsJSONManifests(t *testing.T) {
	soaks, out := t.TempDir(), t.TempDir()
	src := "../../../fixtures/soaks/2026-09-28-rev247-same-build-ab"
	dst := filepath.Join(soaks, "rev247-json")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(filepath.Join(dst, "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := yaml.YAMLToJSON(y)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dst, "manifest.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dst, "manifest.json"), j, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(out, soaks, t.TempDir(), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(out, "runs", "rev247-json", "report.html")); err != nil {
		t.Fatalf("the JSON manifest's soak was not reported: %v", err)
	}
}

// A directory given as an argument is refused, naming the flags, rather
// than ignored while the defaults are rendered.
func TestArgumentWithoutItsFlagIsRefused(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := runArgs([]string{"-out", t.TempDir(), "my-soaks"}, &stdout, &stderr)
	want := `aether-report: unexpected argument "my-soaks": directories are given with -out, -soaks and -suites`
	if code != 2 || strings.TrimSpace(stderr.String()) != want {
		t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("rendered although the command line was refused:\n%s", stdout.String())
	}
}

// A suite whose run was cut short shows in the index as INTERRUPTED, not
// as a FAIL of its subject.
func TestReportShowsAnInterruptedSuite(t *testing.T) {
	out, suites := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithCancelCause(context.Background())
	r := redgreen.Run(ctx, redgreen.Suite{Name: "udproute", Subject: "s", Cases: []redgreen.Case{
		{Name: "selection-redirect", Role: redgreen.Control, Expect: "collapse",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				cancel(errors.New("Interrupted by User"))
				return redgreen.Observation{}, context.Cause(ctx)
			},
			Check: func(redgreen.Observation) error { return nil }},
	}})
	if err := r.Write(suites); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(out, "../../../fixtures/soaks", suites, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	idx, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{">INTERRUPTED<", "interrupted, not judged: Interrupted by User"} {
		if !strings.Contains(string(idx), want) {
			t.Errorf("index lacks %q", want)
		}
	}
}
