package identity

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

var till = Account{Namespace: "shop", ServiceAccount: "till"}

// handshake runs a TLS handshake over an in-memory pipe and returns the
// certificate the server saw from its peer, with each side's error.
func handshake(client, server *tls.Config) (peer *x509.Certificate, clientErr, serverErr error) {
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	tc, ts := tls.Client(c, client), tls.Server(s, server)
	done := make(chan error, 1)
	go func() {
		err := ts.HandshakeContext(context.Background())
		s.Close() // unblock the client when the server refuses
		done <- err
	}()
	clientErr = tc.HandshakeContext(context.Background())
	c.Close()
	if serverErr = <-done; serverErr == nil {
		peer = ts.ConnectionState().PeerCertificates[0]
	}
	return peer, clientErr, serverErr
}

// A Store behind Workload drives go-spiffe's own mTLS configs: the server
// sees the client's current SVID, the rotated one after half-life, and
// refuses another trust domain's SVID and an expired one.
func TestWorkloadServesTheCurrentSVIDToGoSPIFFETLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, aether, RotatorConfig{TTL: time.Hour})
		serverID, clientID := r.add(cart), r.add(till)
		server := tlsconfig.MTLSServerConfig(Workload(r.store, serverID), r.store, tlsconfig.AuthorizeAny())
		client := func(svid x509svid.Source) *tls.Config {
			return tlsconfig.MTLSClientConfig(svid, r.store, tlsconfig.AuthorizeID(serverID))
		}

		current := client(Workload(r.store, clientID)) // one config across the rotation
		for _, step := range []string{"before rotation", "after rotation"} {
			peer, cerr, serr := handshake(current, server)
			if cerr != nil || serr != nil {
				t.Fatalf("%s: handshake failed: client %v, server %v", step, cerr, serr)
			}
			if got, want := peer.SerialNumber.String(), serial(r.svid(clientID)); got != want {
				t.Errorf("%s: server saw client serial %s, want the store's current %s", step, got, want)
			}
			advance(30 * time.Minute)
		}

		other, err := NewCA(CAConfig{TrustDomain: "other.test", MeshDomain: "mesh.local"})
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := other.Issue(Request{Account: till, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		_, _, serr := handshake(client(foreign), server)
		if !errors.Is(serr, ErrNoBundle) {
			t.Errorf("other.test client: server err = %v, want ErrNoBundle", serr)
		}

		expired := r.issueAt(till, time.Now().Add(-2*time.Hour))
		_, _, serr = handshake(client(expired), server)
		var invalid x509.CertificateInvalidError
		if !errors.As(serr, &invalid) || invalid.Reason != x509.Expired {
			t.Errorf("expired client SVID: server err = %v, want x509.CertificateInvalidError Expired", serr)
		}
	})
}

// issueAt issues a one-hour SVID from the rig's CA starting at issuedAt.
func (r *rig) issueAt(a Account, issuedAt time.Time) *x509svid.SVID {
	r.t.Helper()
	svid, err := r.rot.ca.Issue(Request{Account: a, TTL: time.Hour, IssuedAt: issuedAt})
	if err != nil {
		r.t.Fatal(err)
	}
	return svid
}

// The interface does not depend on the embedded CA: SVIDs and bundles from
// any issuer, put the way a Workload API watcher would put an X509Context,
// serve the same lookups.
func TestStoreServesSVIDsFromAnyIssuer(t *testing.T) {
	a, b := newTestCA(t, "aether.test"), newTestCA(t, "other.test")
	x509Context := struct {
		svids   []*x509svid.SVID
		bundles *x509bundle.Set
	}{
		svids: []*x509svid.SVID{
			issue(t, a, Request{Account: cart, TTL: time.Hour}),
			issue(t, b, Request{Account: till, TTL: time.Hour}),
		},
		bundles: x509bundle.NewSet(a.Bundle(), b.Bundle()),
	}
	store := NewStore()
	var src Source = store
	for _, svid := range x509Context.svids {
		store.PutSVID(svid)
	}
	for _, bundle := range x509Context.bundles.Bundles() {
		store.PutBundle(bundle)
	}
	for _, want := range x509Context.svids {
		got, err := src.GetX509SVIDFor(want.ID)
		if err != nil || got != want {
			t.Errorf("GetX509SVIDFor(%s) = %v, %v", want.ID, got, err)
			continue
		}
		if _, _, err := x509svid.Verify(got.Certificates, src); err != nil {
			t.Errorf("%s does not verify under the store: %v", want.ID, err)
		}
	}
	if _, err := src.GetX509SVIDFor(spiffeid.RequireFromString("spiffe://other.test/ns/shop/sa/cart")); !errors.Is(err, ErrNoSVID) {
		t.Errorf("an identity nobody issued: err = %v, want ErrNoSVID", err)
	}
}
