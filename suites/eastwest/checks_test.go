package eastwest

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// evidenceKeys are the facts each evidence type records, the keys the
// rows have always carried: a renamed tag would change what the result
// files say under an old name.
var evidenceKeys = map[string]struct {
	zero any
	keys []string
}{
	"arrival":       {arrival{}, []string{"admitted", "app_xfcc", "inbound"}},
	"firstPaid":     {firstPaid{}, []string{"admitted", "first_request_ms", "inbound", "second_request_ms", "twins"}},
	"apartEvidence": {apartEvidence{}, []string{"initial_at_dgram", "initial_rx", "plaintext_delivered", "plaintext_rx", "plaintext_sent"}},
	"fetched":       {fetched{}, []string{"admitted", "duration_ms", "flags", "inbound", "reached_app", "refused", "source", "status"}},
}

func TestEvidenceRecordsTheRowsKeys(t *testing.T) {
	for name, e := range evidenceKeys {
		b, err := json.Marshal(e.zero)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for k := range m {
			got = append(got, k)
		}
		slices.Sort(got)
		if !slices.Equal(got, e.keys) {
			t.Errorf("%s records %v, want %v", name, got, e.keys)
		}
	}
}

// Every case's check refuses an observation with nothing in it, zero
// evidence of any of the suite's types, and evidence of a type it does
// not read, without panicking.
func TestChecksRefuseEmptyAndForeignEvidence(t *testing.T) {
	for _, c := range cases(nil) {
		if err := c.Check(redgreen.Observation{}); err == nil {
			t.Errorf("%s's check passed an empty observation", c.Name)
		}
		for name, e := range evidenceKeys {
			if err := c.Check(redgreen.Observation{Evidence: e.zero}); err == nil {
				t.Errorf("%s's check passed zero %s evidence", c.Name, name)
			}
		}
		err := c.Check(redgreen.Observation{Evidence: map[string]any{"admitted": 1.0}})
		if err == nil || !strings.Contains(err.Error(), "map[string]interface {}") {
			t.Errorf("%s's check given a map: %v, want an error naming the type", c.Name, err)
		}
	}
}
