package lifecycle

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// Every case's check refuses an observation with nothing in it, and one
// whose evidence is its own type's zero value: an empty witness is
// inconclusive, never a subject's pass nor a control's signature.
func TestChecksRefuseEmptyObservations(t *testing.T) {
	for _, c := range cases(nil) {
		if err := c.Check(redgreen.Observation{}); err == nil {
			t.Errorf("%s's check passed an empty observation", c.Name)
		}
	}
	byName := map[string]redgreen.Case{}
	for _, c := range cases(nil) {
		byName[c.Name] = c
	}
	for _, p := range controlSubject {
		zero, err := p.evidence(map[string]any{})
		if err != nil {
			t.Fatalf("%s: %v", p.control, err)
		}
		for _, name := range []string{p.control, p.subject} {
			if err := byName[name].Check(redgreen.Observation{Evidence: zero}); err == nil {
				t.Errorf("%s's check passed zero %T evidence", name, zero)
			}
		}
	}
}

// A check given another case's evidence type fails naming the type, and
// does not panic.
func TestChecksRefuseAnotherCasesEvidence(t *testing.T) {
	for _, c := range cases(nil) {
		err := c.Check(redgreen.Observation{Evidence: map[string]any{"sent": 1}})
		if err == nil || !strings.Contains(err.Error(), "map[string]interface {}") {
			t.Errorf("%s's check given a map: %v, want an error naming the type", c.Name, err)
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
		if roles[p.control] != redgreen.Control || roles[p.subject] != redgreen.Subject {
			t.Errorf("pair %s, %s is not a control and a subject of the suite", p.control, p.subject)
		}
		paired[p.control]++
		paired[p.subject]++
	}
	for name := range roles {
		if paired[name] != 1 {
			t.Errorf("case %s is in %d control-subject pairs, want 1", name, paired[name])
		}
	}
}

// Each evidence type records the keys the rows have always carried: a
// renamed tag would change what the result files say under an old name.
func TestEvidenceRecordsTheRowsKeys(t *testing.T) {
	for _, c := range []struct {
		zero any
		keys []string
	}{
		{restartEvidence{}, []string{"agent", "app_recorded", "client", "outbound", "outbound_503_nc", "pairs_after", "pairs_before", "via"}},
		{returnEvidence{}, []string{"admitted", "api_recorded", "duration_ms", "flags", "inbound", "ip_after", "ip_before", "pairs_after", "pairs_before", "source", "state_away", "status", "twin", "via"}},
		{migrationEvidence{}, []string{"agent", "client", "fanout", "kept", "state_file", "used", "window_open"}},
		{proxyRestartEvidence{}, []string{"agent", "dormant_before", "first_use", "pairs_after", "prober", "proxy_crashes", "proxy_pid_changed"}},
		{insideEvidence{}, []string{"prober", "proxy_pid_changed"}},
	} {
		b, err := json.Marshal(c.zero)
		if err != nil {
			t.Fatalf("%T: %v", c.zero, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%T: %v", c.zero, err)
		}
		if got := slices.Sorted(maps.Keys(m)); !slices.Equal(got, c.keys) {
			t.Errorf("%T records %v, want %v", c.zero, got, c.keys)
		}
	}
}
