package mtls

import (
	"testing"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// Each case's check reads its own evidence type back: given another
// type's evidence, none, or a nil *refused, it fails with an error and
// does not panic (a panic would read as the case's failure, not name it).
func TestChecksRefuseOtherEvidence(t *testing.T) {
	other := []any{nil, struct{ Sent int }{50}, map[string]any{"arrived_as": map[string]map[string]int{}}, (*refused)(nil)}
	for _, c := range cases(&rig{}) {
		for _, ev := range other {
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("%s: check panicked on %T evidence: %v", c.Name, ev, p)
					}
				}()
				if err := c.Check(redgreen.Observation{Summary: "s", Witness: "w", Evidence: ev}); err == nil {
					t.Errorf("%s: check passed on %T evidence", c.Name, ev)
				}
			}()
		}
	}
}
