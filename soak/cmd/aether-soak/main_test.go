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
			if _, err := os.Stat(filepath.Join(out, f)); err != nil {
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
	for _, want := range []string{"rev247-same-build-ab", "PASS", "REFUSED", "FAIL"} {
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
