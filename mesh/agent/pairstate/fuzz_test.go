package pairstate

import (
	"reflect"
	"testing"
)

// FuzzDecode: the decoder never panics, and a state it accepts encodes to
// a file that decodes back to the same pairs.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"quic_pairs":["quic:api.shop@web.shop"],"dormant_quic_pairs":[]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := Decode(data)
		if err != nil {
			return
		}
		b, err := Encode(st)
		if err != nil {
			t.Fatalf("Encode of a decoded state: %v", err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode of an encoded state %s: %v", b, err)
		}
		if !sameSet(st, again) {
			t.Fatalf("round trip changed the pairs: %+v became %+v", st, again)
		}
	})
}

// sameSet compares two states as sets: Encode sorts the names.
func sameSet(a, b State) bool {
	key := func(s State) [2]map[string]bool {
		var m [2]map[string]bool
		for i, l := range [][]string{names(s.Live), names(s.Dormant)} {
			m[i] = map[string]bool{}
			for _, n := range l {
				m[i][n] = true
			}
		}
		return m
	}
	return reflect.DeepEqual(key(a), key(b)) && len(a.Live) == len(b.Live) && len(a.Dormant) == len(b.Dormant)
}
