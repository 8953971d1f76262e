package h2_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/quic-go/quic-go"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// quicInbound serves the agent's QUIC inbound of the destination pod on a
// loopback port (the contract's 0.0.0.0:18008 lives in a pod netns, which
// these tests do not need).
func (m *mesh) quicInbound(t *testing.T) (*h2.QUICListener, *listener.Spec) {
	t.Helper()
	return m.quicInboundHCM(t, nil)
}

// quicInboundHCM is quicInbound with the listener's connection managers
// changed by change, when it is set.
func (m *mesh) quicInboundHCM(t *testing.T, change func(*hcmv3.HttpConnectionManager)) (*h2.QUICListener, *listener.Spec) {
	t.Helper()
	mc := agentmtls.Mesh{Domain: meshDomain, AccessLog: filepath.Join(m.logDir, "access.log")}
	dst := agentmtls.Pod{Namespace: ns, Name: "dst-0", ID: id("dst"), IP: netip.MustParseAddr("127.0.0.1"),
		Serves: []agentmtls.Port{{Service: "dst", Namespace: ns, Port: 8080, TargetPort: m.app.port}}}
	in, _, err := agentmtls.InboundListenerFor(mc, dst)
	if err != nil {
		t.Fatal(err)
	}
	ql, err := eastwest.QuicInbound(in, ns, "dst-0", "")
	if err != nil {
		t.Fatal(err)
	}
	if change != nil {
		changeHCM(t, ql, change)
	}
	spec, err := listener.FromProto(ql)
	if err != nil {
		t.Fatal(err)
	}
	spec.Socket.Addr, spec.Socket.Transparent = netip.MustParseAddrPort("127.0.0.1:0"), false
	q, err := h2.ListenQUIC(spec, m, m.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = q.Close() })
	return q, spec
}

// twin is an HTTP/3 client presenting sa's SVID to the destination's
// QUIC inbound: one connection, for every request it sends.
func (m *mesh) twin(t *testing.T, sa string) *h3.Upstream {
	t.Helper()
	svid := m.issue(t, sa, time.Hour, time.Time{})
	cert := tls.Certificate{PrivateKey: svid.PrivateKey, Leaf: svid.Certificates[0]}
	for _, c := range svid.Certificates {
		cert.Certificate = append(cert.Certificate, c.Raw)
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	t.Cleanup(func() { _ = tr.Close(); _ = pc.Close() })
	u, err := h3.NewUpstream(h3.UpstreamOptions{Transport: tr, Bundles: m.ca.Bundle(), SNI: xdsnames.SNI(8080, "dst", ns, meshDomain),
		Certificate: func() (*tls.Certificate, error) { return &cert, nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = u.Close() })
	return u
}

// h3Get sends one request over u to the QUIC inbound at ep and returns
// what the app answered: the XFCC it saw.
func h3Get(t *testing.T, u *h3.Upstream, ep netip.AddrPort) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dstAuthority+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := u.RoundTrip(req, ep)
	if err != nil {
		t.Fatalf("request over the QUIC inbound: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("response %s: %s", resp.Status, b)
	}
	return string(b)
}

// TestQUICConnectionKeepsItsChain: a QUIC connection's requests are
// served by the chain it was accepted with, as the TCP inbound's
// connections are (and Envoy drains a connection on its old chain): a
// listener update reaches new connections only. The connection's chain,
// peer and own identity are worked out once, not for every request.
func TestQUICConnectionKeepsItsChain(t *testing.T) {
	m := newMesh(t, meshConfig{})
	q, spec := m.quicInbound(t)
	ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), q.Addr().Port())
	live := m.twin(t, "src")
	if x := h3Get(t, live, ep); !strings.Contains(x, "URI="+id("src")) {
		t.Fatalf("app saw XFCC %q, want the client's ID set by the inbound", x)
	}

	// The update: the same chains, without forward_client_cert_details.
	upd := *spec.HTTP
	upd.Chains = nil
	for _, c := range spec.HTTP.Chains {
		cc, hc := *c, *c.HCM
		hc.SetXFCC = false
		cc.HCM = &hc
		upd.Chains = append(upd.Chains, &cc)
	}
	q.Update(&upd)

	if x := h3Get(t, live, ep); !strings.Contains(x, "URI="+id("src")) {
		t.Fatalf("after the update, the live connection's app saw XFCC %q: it moved to the new chain", x)
	}
	if x := h3Get(t, m.twin(t, "src"), ep); x != "" {
		t.Fatalf("after the update, a new connection's app saw XFCC %q, want none (the new chain)", x)
	}
}

// TestQUICOversizedHeadersAreCounted: the QUIC inbound the proxy builds
// refuses a request whose headers are past h3.MaxHeaderBytes with 431
// (quic-go's own answer, which the handler never sees) and counts it on
// the listener as h3_request_headers_too_large; the connection serves
// on. mesh/proxy/h3's TestQPACKBombIs431 runs the attacks themselves.
func TestQUICOversizedHeadersAreCounted(t *testing.T) {
	m := newMesh(t, meshConfig{})
	q, _ := m.quicInbound(t)
	ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), q.Addr().Port())
	u := m.twin(t, "src")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+dstAuthority+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Big", strings.Repeat("h", 100<<10))
	resp, err := u.RoundTrip(req, ep)
	if err != nil {
		t.Fatalf("oversized request over the QUIC inbound: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("100 KiB of headers over HTTP/3: status %d, want 431", resp.StatusCode)
	}
	if v := m.protocolErrors(q.Name(), metrics.ProtocolH3HeadersTooLarge); v != 1 {
		t.Errorf("%s counted %v, want 1", metrics.ProtocolH3HeadersTooLarge, v)
	}
	h3Get(t, u, ep)
}

// Slow bodies over HTTP/3 to the QUIC inbound: 20 requests on one
// connection each announce 1000 bytes of body, send 10, then nothing.
// The inbound's stream_idle_timeout (set in its HttpConnectionManager)
// answers each 408 and counts it; the connection serves on.
func TestSlowH3BodiesAreCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{})
	q, _ := m.quicInboundHCM(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(slowBodyTimeout) })
	ep := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), q.Addr().Port())
	u := m.twin(t, "src")
	h3Get(t, u, ep)
	seen := m.app.count()
	ctx, cancel := context.WithTimeout(context.Background(), slowBodyDeadline)
	defer cancel()
	const attackers = 20
	status := make(chan int, attackers)
	for range attackers {
		go func() {
			pr, pw := io.Pipe()
			defer pw.Close()
			go func() { _, _ = pw.Write([]byte(strings.Repeat("b", 10))) }()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+dstAuthority+"/", pr)
			if err != nil {
				status <- 0
				return
			}
			req.ContentLength = 1000
			resp, err := u.RoundTrip(req, ep)
			if err != nil {
				t.Logf("slow h3 body: %v", err)
				status <- 0
				return
			}
			resp.Body.Close()
			status <- resp.StatusCode
		}()
	}
	cut := 0
	for range attackers {
		if <-status == http.StatusRequestTimeout {
			cut++
		}
	}
	if cut != attackers {
		t.Errorf("slow h3 bodies: %d of %d answered 408", cut, attackers)
	}
	if v := m.protocolErrors(q.Name(), metrics.ProtocolStreamIdleTimeout); v != attackers {
		t.Errorf("slow h3 bodies: %s counted %v, want %d", metrics.ProtocolStreamIdleTimeout, v, attackers)
	}
	h3Get(t, u, ep)
	if got := m.app.count() - seen - 1; got != 0 {
		t.Errorf("slow h3 bodies: the app took %d whole requests past the one after the cuts", got)
	}
}
