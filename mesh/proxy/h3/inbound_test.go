package h3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/identity"
)

// pki is a trust domain with a server and a client SVID.
type pki struct {
	roots          *x509.CertPool
	server, client *x509svid.SVID
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local"})
	if err != nil {
		t.Fatal(err)
	}
	issue := func(sa string) *x509svid.SVID {
		s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: sa}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	roots := x509.NewCertPool()
	for _, c := range ca.Bundle().X509Authorities() {
		roots.AddCert(c)
	}
	return &pki{roots: roots, server: issue("backend"), client: issue("client")}
}

func tlsCert(s *x509svid.SVID) tls.Certificate {
	c := tls.Certificate{PrivateKey: s.PrivateKey, Leaf: s.Certificates[0]}
	for _, x := range s.Certificates {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return c
}

// revocations is state the server's TLS context reads at handshake time,
// as a trust change would be: a revoked client ID fails
// VerifyPeerCertificate.
type revocations struct {
	mu      sync.Mutex
	revoked map[string]bool
}

func (r *revocations) verify(_ [][]byte, chains [][]*x509.Certificate) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range chains[0][0].URIs {
		if r.revoked[u.String()] {
			return fmt.Errorf("peer %s is revoked", u)
		}
	}
	return nil
}

func (r *revocations) revoke(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.revoked[id] = true
}

// seen is the server's own record of a request: its witness, not the
// client's claim.
type seen struct {
	peer              string
	resumed, zeroRTT  bool
	handshakeComplete bool
}

type connKey struct{}

func serve(t *testing.T, p *pki, r *revocations, resumption, earlyData bool) (addr string, got <-chan seen, handshakes *atomic.Int64) {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	ch := make(chan seen, 8)
	handshakes = &atomic.Int64{}
	in, err := ServeInbound(conn, InboundOptions{
		TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			handshakes.Add(1)
			return &tls.Config{
				Certificates:          []tls.Certificate{tlsCert(p.server)},
				ClientAuth:            tls.RequireAndVerifyClientCert,
				ClientCAs:             p.roots,
				VerifyPeerCertificate: r.verify,
			}, nil
		},
		ConnContext:      func(ctx context.Context, c *quic.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		EnableResumption: resumption,
		EnableEarlyData:  earlyData,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			s := seen{resumed: req.TLS.DidResume, handshakeComplete: req.TLS.HandshakeComplete}
			if len(req.TLS.PeerCertificates) > 0 && len(req.TLS.PeerCertificates[0].URIs) > 0 {
				s.peer = req.TLS.PeerCertificates[0].URIs[0].String()
			}
			if qc, ok := req.Context().Value(connKey{}).(*quic.Conn); ok {
				s.zeroRTT = qc.ConnectionState().Used0RTT
			}
			ch <- s
			_, _ = io.WriteString(w, "ok")
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return conn.LocalAddr().String(), ch, handshakes
}

// get makes one request on a fresh connection, sharing sessions (tickets)
// across calls through cache.
func get(p *pki, addr string, cache tls.ClientSessionCache) error {
	tr := &http3.Transport{TLSClientConfig: &tls.Config{
		RootCAs:            p.roots,
		ServerName:         "backend.demo.mesh.local",
		Certificates:       []tls.Certificate{tlsCert(p.client)},
		ClientSessionCache: cache,
	}}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

const clientID = "spiffe://aether.test/ns/demo/sa/client"

// TestResumptionOffRefusesARevokedPeer is R4 at the inbound: with
// enable_resumption false a revoked client SVID is refused on its next
// connection, since every connection is a full handshake. The control,
// resumption on, shows the hole: the next connection resumes its session
// and the revoked peer is served, because Go's TLS server does not call
// VerifyPeerCertificate on a resumed session.
func TestResumptionOffRefusesARevokedPeer(t *testing.T) {
	p := newPKI(t)
	for _, c := range []struct {
		name          string
		resumption    bool
		revokedServed bool
	}{
		{"control: resumption on", true, true},
		{"subject: resumption off", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &revocations{revoked: map[string]bool{}}
			addr, got, _ := serve(t, p, r, c.resumption, false)
			cache := tls.NewLRUClientSessionCache(4)
			if err := get(p, addr, cache); err != nil {
				t.Fatalf("first request: %v", err)
			}
			if s := <-got; s.peer != clientID || s.resumed {
				t.Fatalf("first request seen as %+v, want a full handshake from %s", s, clientID)
			}
			r.revoke(clientID)
			err := get(p, addr, cache)
			if !c.revokedServed {
				if err == nil {
					t.Fatalf("a revoked peer was served: %+v", <-got)
				}
				return
			}
			if err != nil {
				t.Fatalf("control broken: the resumed request failed (%v), the hole does not show", err)
			}
			if s := <-got; !s.resumed || s.peer != clientID {
				t.Fatalf("control broken: seen %+v, want a resumed session of the revoked %s", s, clientID)
			}
		})
	}
}

// TestEarlyDataHonoured: with resumption on, 0-RTT is taken only when
// enable_early_data is true; the server's record says which.
func TestEarlyDataHonoured(t *testing.T) {
	p := newPKI(t)
	for _, early := range []bool{true, false} {
		t.Run(fmt.Sprintf("early_data=%v", early), func(t *testing.T) {
			addr, got, _ := serve(t, p, &revocations{revoked: map[string]bool{}}, true, early)
			cache := tls.NewLRUClientSessionCache(4)
			if err := get(p, addr, cache); err != nil {
				t.Fatal(err)
			}
			<-got
			if err := get(p, addr, cache); err != nil {
				t.Fatal(err)
			}
			s := <-got
			if !s.resumed {
				t.Fatalf("second connection did not resume: %+v", s)
			}
			if s.zeroRTT != early {
				t.Fatalf("0-RTT used = %v with enable_early_data %v", s.zeroRTT, early)
			}
		})
	}
}

// TestTLSContextReadPerHandshake: each connection asks for its TLS
// configuration, so a change reaches the next handshake; a nil
// configuration refuses the handshake.
func TestTLSContextReadPerHandshake(t *testing.T) {
	p := newPKI(t)
	addr, got, handshakes := serve(t, p, &revocations{revoked: map[string]bool{}}, false, false)
	for i := range 2 {
		if err := get(p, addr, nil); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		<-got
	}
	if n := handshakes.Load(); n != 2 {
		t.Fatalf("TLS context asked %d times for 2 connections", n)
	}
	in := &Inbound{opts: InboundOptions{TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) { return nil, nil }}}
	if _, err := in.configFor(&tls.ClientHelloInfo{ServerName: "18008.svc-b.demo.mesh.local", SupportedProtos: []string{"h3"}}); err == nil {
		t.Fatal("a nil TLS context was accepted")
	}
	noChain := errors.New("no chain")
	in.opts.TLS = func(*tls.ClientHelloInfo) (*tls.Config, error) { return nil, noChain }
	if _, err := in.configFor(&tls.ClientHelloInfo{ServerName: "x", SupportedProtos: []string{"h3"}}); !errors.Is(err, noChain) {
		t.Fatalf("configFor = %v, want the chain lookup's error wrapped", err)
	}
}
