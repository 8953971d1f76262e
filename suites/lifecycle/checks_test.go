package lifecycle

import (
	"testing"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// Every case's check refuses an observation with nothing in it: an empty
// witness is inconclusive, never a subject's pass nor a control's
// signature.
func TestChecksRefuseEmptyObservations(t *testing.T) {
	for _, c := range cases(nil) {
		if err := c.Check(redgreen.Observation{Facts: map[string]any{}}); err == nil {
			t.Errorf("%s's check passed an empty observation", c.Name)
		}
	}
}

// Every control is paired with exactly one subject, the one the
// broken-rig test gives it, and every subject has its control.
func TestEveryControlHasItsSubject(t *testing.T) {
	roles := map[string]redgreen.Role{}
	for _, c := range cases(nil) {
		roles[c.Name] = c.Role
	}
	paired := map[string]int{}
	for _, p := range controlSubject {
		if roles[p[0]] != redgreen.Control || roles[p[1]] != redgreen.Subject {
			t.Errorf("pair %v is not a control and a subject of the suite", p)
		}
		paired[p[0]]++
		paired[p[1]]++
	}
	for name := range roles {
		if paired[name] != 1 {
			t.Errorf("case %s is in %d control-subject pairs, want 1", name, paired[name])
		}
	}
}
