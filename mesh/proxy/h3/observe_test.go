package h3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/identity"
)

// tally is an Observer that keeps what it is told.
type tally struct {
	mu                         sync.Mutex
	refused, accepted, dropped map[string]int
	started                    int
}

func newTally() *tally {
	return &tally{refused: map[string]int{}, accepted: map[string]int{}, dropped: map[string]int{}}
}

func (t *tally) Started()         { t.mu.Lock(); t.started++; t.mu.Unlock() }
func (t *tally) Refused(r string) { t.mu.Lock(); t.refused[r]++; t.mu.Unlock() }
func (t *tally) Accepted(p string, resumed bool) {
	t.mu.Lock()
	t.accepted[fmt.Sprintf("%s resumed=%v", p, resumed)]++
	t.mu.Unlock()
}
func (t *tally) Dropped(r string) { t.mu.Lock(); t.dropped[r]++; t.mu.Unlock() }

func (t *tally) get(m *map[string]int, k string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return (*m)[k]
}

// meshServer serves as the mesh's chains are configured: any client
// certificate required, verified against the bundle in VerifyConnection.
func meshServer(t *testing.T, server *x509svid.SVID, bundle *x509bundle.Bundle, o Observer) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	in, err := ServeInbound(conn, InboundOptions{
		TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{
				Certificates: []tls.Certificate{tlsCert(server)},
				ClientAuth:   tls.RequireAnyClientCert,
				VerifyConnection: func(cs tls.ConnectionState) error {
					_, _, err := x509svid.Verify(cs.PeerCertificates, bundle)
					return err
				},
			}, nil
		},
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		Observer: o,
		Trusted:  func(td spiffeid.TrustDomain) bool { return td == bundle.TrustDomain() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return conn.LocalAddr().String()
}

// callAs makes one HTTP/3 request presenting certs (none when nil) and
// offering alpn.
func callAs(addr string, certs []tls.Certificate, alpn string) error {
	tc := &tls.Config{InsecureSkipVerify: true, Certificates: certs, NextProtos: []string{alpn}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if alpn != http3.NextProtoH3 {
		// http3.Transport offers h3 whatever the config says.
		c, err := quic.DialAddr(ctx, addr, tc, nil)
		if err != nil {
			return err
		}
		return c.CloseWithError(0, "")
	}
	tr := &http3.Transport{TLSClientConfig: tc}
	defer tr.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// TestInboundCountsRefusalsByReason: each bad peer is refused and counted
// under its own reason, a good one is counted as accepted under its SPIFFE
// ID, and datagrams that are not QUIC are counted as dropped. Without the
// observer's hooks nothing is counted (quic-go and Go's TLS refuse all of
// these silently).
func TestInboundCountsRefusalsByReason(t *testing.T) {
	issue := func(ca *identity.CA, sa string, at time.Time) []tls.Certificate {
		s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: sa}, TTL: time.Hour, IssuedAt: at})
		if err != nil {
			t.Fatal(err)
		}
		return []tls.Certificate{tlsCert(s)}
	}
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := identity.NewCA(identity.CAConfig{TrustDomain: "other.test", MeshDomain: "mesh.local"})
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "backend"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	obs := newTally()
	addr := meshServer(t, server, ca.Bundle(), obs)

	for _, c := range []struct {
		reason string
		certs  []tls.Certificate
		alpn   string
	}{
		{RefusedNoClientCert, nil, http3.NextProtoH3},
		{RefusedForeignTrustDomain, issue(other, "client", time.Time{}), http3.NextProtoH3},
		{RefusedExpired, issue(ca, "client", time.Now().Add(-2*time.Hour)), http3.NextProtoH3},
		{RefusedBadALPN, issue(ca, "client", time.Time{}), "h2"},
	} {
		if err := callAs(addr, c.certs, c.alpn); err == nil {
			t.Errorf("%s: the handshake was accepted", c.reason)
		}
		if n := obs.get(&obs.refused, c.reason); n != 1 {
			t.Errorf("refused[%s] = %d after one such client, want 1 (all: %v)", c.reason, n, obs.refused)
		}
	}
	if err := callAs(addr, issue(ca, "client", time.Time{}), http3.NextProtoH3); err != nil {
		t.Fatalf("a valid client: %v", err)
	}
	if n := obs.get(&obs.accepted, "spiffe://aether.test/ns/demo/sa/client resumed=false"); n != 1 {
		t.Fatalf("accepted = %v, want the valid client once", obs.accepted)
	}
	// Every client above sent an Initial that began a connection.
	obs.mu.Lock()
	started := obs.started
	obs.mu.Unlock()
	if started != 5 {
		t.Fatalf("started = %d after 5 clients' Initials", started)
	}

	junk, err := net.Dial("udp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	const n = 20
	for i := range n {
		// The first byte's top two bits clear: not a QUIC packet.
		if _, err := junk.Write([]byte{0x00, byte(i), 0xde, 0xad}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for obs.get(&obs.dropped, DroppedNotQUIC) < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := obs.get(&obs.dropped, DroppedNotQUIC); got != n {
		t.Fatalf("dropped[%s] = %d after %d junk datagrams", DroppedNotQUIC, got, n)
	}
}

func TestRefusalOrder(t *testing.T) {
	now := time.Now()
	cur := &x509.Certificate{NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour)}
	old := &x509.Certificate{NotBefore: now.Add(-2 * time.Hour), NotAfter: now.Add(-time.Hour)}
	if r := refusal(nil, now, nil); r != RefusedNoClientCert {
		t.Errorf("no certs: %s", r)
	}
	// An expired intermediate makes the chain expired, whatever the leaf.
	if r := refusal([]*x509.Certificate{cur, old}, now, nil); r != RefusedExpired {
		t.Errorf("expired intermediate: %s", r)
	}
	if r := refusal([]*x509.Certificate{cur}, now, nil); r != RefusedPeer {
		t.Errorf("a current leaf without a SPIFFE ID: %s", r)
	}
}
