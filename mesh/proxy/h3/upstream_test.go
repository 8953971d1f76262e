package h3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/identity"
)

const sni = "18008.svc-b.demo.mesh.local"

func issue(t testing.TB, ca *identity.CA, sa string, omitDNS bool) *x509svid.SVID {
	t.Helper()
	s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: sa}, TTL: time.Hour, OmitDNSSANs: omitDNS})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newCA(t testing.TB, td string) *identity.CA {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: td, MeshDomain: "mesh.local"})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// inbound serves HTTP/3 on loopback with server's certificate, requiring a
// client certificate from ca; it records each request's peer and the
// handshakes made, and answers with the Accept-Encoding it saw, if any.
func inbound(t testing.TB, ca *identity.CA, server *x509svid.SVID) (netip.AddrPort, <-chan string, *atomic.Int64) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	roots := x509.NewCertPool()
	for _, c := range ca.Bundle().X509Authorities() {
		roots.AddCert(c)
	}
	peers := make(chan string, 8)
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case peers <- r.TLS.PeerCertificates[0].URIs[0].String():
		default: // a benchmark does not read them
		}
		_, _ = io.Copy(io.Discard, r.Body)
		if ae := r.Header.Get("Accept-Encoding"); ae != "" {
			// Only then: the benchmarks' responses carry no more
			// headers than HTTP/2's.
			w.Header().Set(seenEncoding, ae)
		}
		_, _ = io.WriteString(w, "ok")
	})
	handshakes := &atomic.Int64{}
	in, err := ServeInbound(conn, InboundOptions{
		TLS: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			handshakes.Add(1)
			if chi.ServerName != sni {
				t.Errorf("SNI %q, want %q", chi.ServerName, sni)
			}
			return &tls.Config{Certificates: []tls.Certificate{tlsCert(server)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}, nil
		},
		Handler: record,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return conn.LocalAddr().(*net.UDPAddr).AddrPort(), peers, handshakes
}

// seenEncoding is the response header inbound answers a request's
// Accept-Encoding in.
const seenEncoding = "Seen-Accept-Encoding"

func twinClient(t testing.TB, ca *identity.CA, svid *x509svid.SVID) *Upstream {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: conn}
	t.Cleanup(func() { _ = tr.Close(); _ = conn.Close() })
	cert := tlsCert(svid)
	u, err := NewUpstream(UpstreamOptions{Transport: tr, SNI: sni, Bundles: ca.Bundle(),
		Certificate: func() (*tls.Certificate, error) { return &cert, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	return u
}

func call(u *Upstream, ep netip.AddrPort) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc-b.demo.mesh.local/", nil)
	resp, err := u.RoundTrip(req, ep)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

// TestTwinPresentsItsAccountAndPools: the destination's record shows the
// twin's account as the peer, and two requests share one QUIC connection
// (one handshake at the inbound).
func TestTwinPresentsItsAccountAndPools(t *testing.T) {
	ca := newCA(t, "aether.test")
	ep, peers, handshakes := inbound(t, ca, issue(t, ca, "svc-b", false))
	u := twinClient(t, ca, issue(t, ca, "client", false))
	for i := range 2 {
		if err := call(u, ep); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if p := <-peers; p != "spiffe://aether.test/ns/demo/sa/client" {
			t.Fatalf("destination saw peer %s, want the twin's account", p)
		}
	}
	if n := handshakes.Load(); n != 1 {
		t.Fatalf("%d handshakes for two requests, want one pooled connection", n)
	}
}

// TestTwinVerifiesIdentityThenName: a server SVID without DNS SANs passes
// the SPIFFE step and fails the name step; one from another trust domain
// fails the SPIFFE step. The destination serves neither.
func TestTwinVerifiesIdentityThenName(t *testing.T) {
	ca := newCA(t, "aether.test")
	other := newCA(t, "other.test")
	for _, c := range []struct {
		name   string
		server *x509svid.SVID
		want   string
	}{
		{"SVID without DNS SANs", issue(t, ca, "svc-b", true), "do not match SNI"},
		{"SVID of another trust domain", issue(t, other, "svc-b", false), "server SPIFFE identity"},
		{"SVID of another account", issue(t, ca, "svc-c", false), "do not match SNI"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep, peers, _ := inbound(t, ca, c.server)
			u := twinClient(t, ca, issue(t, ca, "client", false))
			err := call(u, ep)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("request = %v, want a failure containing %q", err, c.want)
			}
			select {
			case p := <-peers:
				t.Fatalf("destination served %s", p)
			default:
			}
		})
	}
}

// TestTwinAsksNoCompression: a twin forwards a request's Accept-Encoding
// as it is, none when there is none. quic-go's client otherwise asks for
// gzip itself and inflates the response, work a proxy must not do (Envoy
// does not).
func TestTwinAsksNoCompression(t *testing.T) {
	ca := newCA(t, "aether.test")
	ep, _, _ := inbound(t, ca, issue(t, ca, "svc-b", false))
	u := twinClient(t, ca, issue(t, ca, "client", false))
	for _, ae := range []string{"", "br"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://svc-b.demo.mesh.local/", nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := u.RoundTrip(req, ep)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		resp.Body.Close()
		cancel()
		if got := resp.Header.Get(seenEncoding); got != ae {
			t.Errorf("request with Accept-Encoding %q arrived with %q", ae, got)
		}
	}
}
