package grade

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/manifest"
)

var fixtureSoaks = []string{"2026-09-27-rev242-proving", "2026-09-27-rev242-vs-rev239", "2026-09-28-rev247-same-build-ab", "2026-09-30-resoak-1.0.13-84fb413"}

// roundTrip is g as the release gate reads it back from grade.json.
func roundTrip(t *testing.T, g *Grade) *Grade {
	t.Helper()
	b, err := json.Marshal(g)
	if err != nil {
		t.Fatal(err)
	}
	var back Grade
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

// Every recorded soak's grade binds its manifest and the files its gates
// read, and re-grades to itself: a genuine grade is never refused.
func TestGenuineGradeRegradesToItself(t *testing.T) {
	for _, f := range fixtureSoaks {
		g := gradeFixture(t, f, nil)
		sum, err := results.FileSHA256(filepath.Join(fixtures, f, "manifest.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if g.ManifestSHA256 != sum {
			t.Errorf("%s: the grade binds manifest sha256 %q, the file's is %s", f, g.ManifestSHA256, sum)
		}
		re, problems := Regrade("grade.json", roundTrip(t, g))
		if len(problems) > 0 || re == nil {
			t.Errorf("%s: a genuine grade is refused:\n%s", f, strings.Join(problems, "\n"))
		}
	}
}

// The grade binds exactly what its gates read: graded from a folder that
// holds only the manifest and the bound files, every recorded soak grades
// the same, and the re-soak binds each of its files to the gates that
// read it.
func TestGradeBindsEveryFileItRead(t *testing.T) {
	for _, f := range fixtureSoaks {
		g := gradeFixture(t, f, nil)
		bare := filepath.Join(t.TempDir(), f)
		for _, name := range append([]string{"manifest.yaml"}, paths(g.Evidence)...) {
			b, err := os.ReadFile(filepath.Join(fixtures, f, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(bare, name)), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(bare, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		m, err := manifest.Load(filepath.Join(bare, "manifest.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		again, err := Run(m)
		if err != nil {
			t.Errorf("%s: graded from the bound files alone: %v", f, err)
			continue
		}
		again.Manifest = g.Manifest
		if d := diff(func(format string, a ...any) string { return f + ": " + fmt.Sprintf(format, a...) }, g, again); len(d) > 0 {
			t.Errorf("%s: the bound files grade otherwise:\n%s", f, strings.Join(d, "\n"))
		}
	}
	g := gradeFixture(t, "2026-09-30-resoak-1.0.13-84fb413", nil)
	got := map[string]string{}
	for _, e := range g.Evidence {
		got[e.Path] = strings.Join(e.Gates, "|")
		if len(e.SHA256) != 64 {
			t.Errorf("%s: sha256 %q", e.Path, e.SHA256)
		}
	}
	want := map[string]string{
		"k6/failures.json":         GateLoadGenErrors,
		"k6/summary.json":          GateLoadGenErrors,
		"prometheus/cpu.json":      GateCPURatio,
		"prometheus/requests.json": GateCPURatio,
		"prometheus/prober.json":   GateLiveness,
		"prometheus/mesh.json":     "503 with flag NC|proxy crashes|prunes of in-use twins",
	}
	if len(got) != len(want) {
		t.Errorf("the re-soak binds %v, want %v", got, want)
	}
	for p, gates := range want {
		if got[p] != gates {
			t.Errorf("the re-soak binds %s read by %q, want %q", p, got[p], gates)
		}
	}
}

func paths(files []EvidenceFile) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}
