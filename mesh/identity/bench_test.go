package identity

import (
	"testing"
	"time"
)

// BenchmarkIssue measures one SVID: a P-256 key, a signature by the root,
// the DNS SANs checked. A node re-issues one per local service account per
// half-life.
func BenchmarkIssue(b *testing.B) {
	ca := newTestCA(b, "aether.test")
	req := Request{Account: cart, TTL: time.Hour}
	for b.Loop() {
		if _, err := ca.Issue(req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStoreLookupParallel measures the per-handshake read: go-spiffe's
// TLS configs call GetX509SVID on every handshake.
func BenchmarkStoreLookupParallel(b *testing.B) {
	ca := newTestCA(b, "aether.test")
	store := NewStore()
	svid := issue(b, ca, Request{Account: cart, TTL: time.Hour})
	store.PutSVID(svid)
	src := Workload(store, svid.ID)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := src.GetX509SVID(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
