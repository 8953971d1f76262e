package cluster

import "testing"

func TestPeerURI(t *testing.T) {
	for xfcc, want := range map[string]string{
		"By=spiffe://aether.test/ns/demo/sa/dst;URI=spiffe://aether.test/ns/demo/sa/web": "spiffe://aether.test/ns/demo/sa/web",
		"":                                       NoXFCC,
		"By=spiffe://aether.test/ns/demo/sa/dst": NoXFCC,
	} {
		if got := PeerURI(xfcc); got != want {
			t.Errorf("PeerURI(%q) = %q, want %q", xfcc, got, want)
		}
	}
}
