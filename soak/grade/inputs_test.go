package grade

import (
	"path/filepath"
	"testing"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/manifest"
)

// Every gate of every fixture soak carries inputs from which the release
// gate's rules reach the grader's own verdict: the gate can recompute the
// grade without trusting a verdict field.
func TestGatesCarryTheirInputs(t *testing.T) {
	want := map[string]Verdict{
		"2026-09-27-rev242-proving":        Fail,
		"2026-09-27-rev242-vs-rev239":      Refused,
		"2026-09-28-rev247-same-build-ab":  Pass,
		"2026-09-30-resoak-1.0.13-84fb413": Fail,
	}
	for dir, verdict := range want {
		m, err := manifest.Load(filepath.Join("../../fixtures/soaks", dir, "manifest.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		g, err := Run(m)
		if err != nil {
			t.Fatal(err)
		}
		if g.Verdict != verdict {
			t.Errorf("%s: graded %s, want %s", dir, g.Verdict, verdict)
		}
		for _, gt := range g.Gates {
			if v, err := gt.Inputs.Decide(); err != nil || v != gt.Verdict {
				t.Errorf("%s: gate %q graded %s, its inputs decide %s (%v): %+v", dir, gt.Name, gt.Verdict, v, err, gt.Inputs)
			}
		}
		s := results.SoakGrade{Soak: g.Soak, Builds: g.Builds, Verdict: g.Verdict, Gates: g.Gates}
		if problems := results.CheckSoak(dir, s); len(problems) > 0 {
			t.Errorf("%s: %v", dir, problems)
		}
	}
}
