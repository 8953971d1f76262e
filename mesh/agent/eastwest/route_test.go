package eastwest

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// TestRouteBytesAreStable: the arms are a map; the route must encode to
// the same bytes every build, or its listener's version would move.
func TestRouteBytesAreStable(t *testing.T) {
	twins := map[string]string{}
	for _, sa := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		twins["spiffe://aether.test/ns/demo/sa/"+sa] = "quic:svc-b.demo@" + sa + ".demo"
	}
	var first []byte
	for i := range 20 {
		ra, err := Route(Selection{Key: "k", Twins: twins, Floor: "h2:svc-b.demo"})
		if err != nil {
			t.Fatal(err)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(ra)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = b
		} else if string(b) != string(first) {
			t.Fatalf("build %d encodes differently", i)
		}
	}
}
