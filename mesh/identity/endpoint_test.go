package identity

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// An endpoint SVID is of the CA's trust domain, outside the workloads'
// /ns/ paths, and is re-issued by the first read past its half-life.
func TestEndpointSVID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, err := NewCA(CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local"})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ id, want string }{
			{"spiffe://other.test/aether/bundle-endpoint", `not of the CA's trust domain "aether.test"`},
			{"spiffe://aether.test/ns/demo/sa/web", "want a path outside /ns/"},
			{"spiffe://aether.test", "want a path outside /ns/"},
		} {
			if _, err := NewEndpointSVID(ca, spiffeid.RequireFromString(c.id), time.Hour); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: err %v, want %q", c.id, err, c.want)
			}
		}
		id := spiffeid.RequireFromString("spiffe://aether.test/aether/bundle-endpoint")
		e, err := NewEndpointSVID(ca, id, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		first, _ := e.GetX509SVID()
		if first.ID != id || len(first.Certificates[0].DNSNames) != 0 {
			t.Fatalf("endpoint SVID %s with DNS SANs %v; want %s, none", first.ID, first.Certificates[0].DNSNames, id)
		}
		if _, _, err := x509svid.Verify(first.Certificates, ca.Bundle()); err != nil {
			t.Fatalf("endpoint SVID does not verify under its CA: %v", err)
		}
		time.Sleep(29 * time.Minute)
		if again, _ := e.GetX509SVID(); again != first {
			t.Fatal("re-issued before half-life")
		}
		time.Sleep(2 * time.Minute)
		if next, _ := e.GetX509SVID(); next == first || !next.Certificates[0].NotAfter.After(first.Certificates[0].NotAfter) {
			t.Fatal("not re-issued past half-life")
		}
	})
}
