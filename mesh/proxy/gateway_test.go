package proxy_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/quic-go/quic-go"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/gateway"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/sni"
	"github.com/aether-mesh/aether/mesh/proxy/sni/snitest"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// gatewayScenario is fixtures/scenarios/gateway.yaml with its gateway's
// listeners placed in the rig's node netns: the proxy under test runs in
// the test's own netns, as a node's runs in the node's.
func gatewayScenario(t *testing.T, rig *proxytest.Rig) *registry.State {
	t.Helper()
	f := filepath.Join("..", "..", "fixtures", "scenarios", "gateway.yaml")
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := registry.DecodeScenario(f, data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range sc.Nodes {
		if sc.Nodes[i].Gateway != nil {
			sc.Nodes[i].Gateway.Netns = rig.Node.Path
		}
	}
	st, err := sc.State(f)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// passthroughBackend is one pod's 18008 as the gateway reaches it: a TLS
// server on TCP and a QUIC server on UDP at the pod's address, in the
// rig's backend netns, each with a certificate for the pod's service's
// SNI, answering every stream with its own name. What it records (the
// SNI of each connection it accepted) is the witness of where the gateway
// sent a client.
type passthroughBackend struct {
	name string
	mu   sync.Mutex
	tcp  []string
	quic []string
}

func (b *passthroughBackend) seen() (tcp, quic []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.tcp...), append([]string(nil), b.quic...)
}

// gatewayPKI signs one certificate per SNI with one root the clients
// trust: a client that completes its handshake reached the server of that
// name, end to end, through a gateway that holds no key.
type gatewayPKI struct {
	pool  *x509.CertPool
	key   *ecdsa.PrivateKey
	root  *x509.Certificate
	certs map[string]tls.Certificate
}

func newGatewayPKI(t *testing.T) *gatewayPKI {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gateway test root"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := x509.ParseCertificate(der)
	p := &gatewayPKI{pool: x509.NewCertPool(), key: key, root: root, certs: map[string]tls.Certificate{}}
	p.pool.AddCert(root)
	return p
}

func (p *gatewayPKI) cert(t *testing.T, sni string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(len(p.certs) + 2)), Subject: pkix.Name{CommonName: sni}, DNSNames: []string{sni},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.root, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func (p *gatewayPKI) client(sni string) *tls.Config {
	return &tls.Config{ServerName: sni, RootCAs: p.pool, NextProtos: []string{"echo"}, MinVersion: tls.VersionTLS13}
}

func startPassthroughBackend(t *testing.T, rig *proxytest.Rig, p *gatewayPKI, name string, ip netip.Addr, sni string) *passthroughBackend {
	t.Helper()
	b := &passthroughBackend{name: name}
	addr := netip.AddrPortFrom(ip, constants.InboundPort)
	cfg := &tls.Config{Certificates: []tls.Certificate{p.cert(t, sni)}, NextProtos: []string{"echo"}, MinVersion: tls.VersionTLS13}
	ln, err := transparent.ListenTCP(rig.Back.Path, addr, transparent.Options{})
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				tc := tls.Server(c, cfg)
				if tc.Handshake() != nil {
					return
				}
				b.mu.Lock()
				b.tcp = append(b.tcp, tc.ConnectionState().ServerName)
				b.mu.Unlock()
				buf := make([]byte, 64)
				if n, _ := tc.Read(buf); n > 0 {
					_, _ = tc.Write([]byte(name))
				}
			})
		}
	})
	uc, err := transparent.ListenUDP(rig.Back.Path, addr, transparent.Options{})
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	ql, err := quic.Listen(uc.UDPConn, cfg, &quic.Config{})
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	wg.Go(func() {
		for {
			c, err := ql.Accept(context.Background())
			if err != nil {
				return
			}
			b.mu.Lock()
			b.quic = append(b.quic, c.ConnectionState().TLS.ServerName)
			b.mu.Unlock()
			wg.Go(func() {
				s, err := c.AcceptStream(context.Background())
				if err != nil {
					return
				}
				buf := make([]byte, 64)
				if n, _ := s.Read(buf); n > 0 {
					_, _ = s.Write([]byte(name))
				}
				_ = s.Close()
			})
		}
	})
	t.Cleanup(func() { ln.Close(); ql.Close(); uc.Close(); wg.Wait() })
	return b
}

// gatewayAddr is fixtures/scenarios/gateway.yaml's gateway address.
var gatewayAddr = netip.MustParseAddrPort("172.30.0.10:18009")

func tlsThroughGateway(rig *proxytest.Rig, p *gatewayPKI, sni string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := transparent.DialTCP(ctx, rig.Node.Path, gatewayAddr, transparent.Options{})
	if err != nil {
		return "", err
	}
	defer c.Close()
	tc := tls.Client(c, p.client(sni))
	_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		return "", err
	}
	if _, err := tc.Write([]byte("hello")); err != nil {
		return "", err
	}
	b, err := io.ReadAll(tc)
	return string(b), err
}

func quicThroughGateway(rig *proxytest.Rig, p *gatewayPKI, sni string, handshake time.Duration) (string, error) {
	uc, err := transparent.ListenUDP(rig.Node.Path, netip.MustParseAddrPort("0.0.0.0:0"), transparent.Options{})
	if err != nil {
		return "", err
	}
	defer uc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := quic.Dial(ctx, uc.UDPConn, net.UDPAddrFromAddrPort(gatewayAddr), p.client(sni), &quic.Config{HandshakeIdleTimeout: handshake})
	if err != nil {
		return "", err
	}
	defer c.CloseWithError(0, "")
	s, err := c.OpenStreamSync(ctx)
	if err != nil {
		return "", err
	}
	if _, err := s.Write([]byte("hello")); err != nil {
		return "", err
	}
	_ = s.Close()
	b, err := io.ReadAll(s)
	return string(b), err
}

// TestGatewayPassthrough serves the real agent's resources for the
// gateway node of fixtures/scenarios/gateway.yaml to a real proxy and
// reaches each exposed service through <gateway>:18009 by the SNI the mesh
// uses for it, over TLS and over QUIC (quic-go): the backend that answers,
// and whose own record shows the connection, is the one the SNI names. A
// service the gateway does not expose is refused on both transports,
// counted, and never reached.
func TestGatewayPassthrough(t *testing.T) {
	privileged.Require(t)
	rig := proxytest.NewRig(t, 3)
	if err := netns.AddAddr(rig.Node, "vpod", netip.PrefixFrom(gatewayAddr.Addr(), 32)); err != nil {
		t.Fatal(err)
	}
	st := gatewayScenario(t, rig)
	pki := newGatewayPKI(t)
	sni := func(port uint16, svc string) string { return xdsnames.SNI(port, svc, "demo", "mesh.test") }
	backends := map[string]*passthroughBackend{
		"dst-a":    startPassthroughBackend(t, rig, pki, "dst-a-0", netip.MustParseAddr("10.244.2.2"), sni(8080, "dst-a")),
		"dst-b":    startPassthroughBackend(t, rig, pki, "dst-b-0", netip.MustParseAddr("10.244.2.3"), sni(9090, "dst-b")),
		"internal": startPassthroughBackend(t, rig, pki, "internal-0", netip.MustParseAddr("10.244.2.4"), sni(8080, "internal")),
	}

	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, err := agent.New(agent.Options{Node: "gw", Mode: constants.CaptureTProxy, Logger: quietLog(),
		HTTP: &agent.HTTPPath{TrustDomain: ca.TrustDomain(), MeshDomain: "mesh.test", AccessLog: filepath.Join(dir, "access.log"), Identities: identity.NewStore(), EastWest: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	sock := "unix://" + filepath.Join(dir, "xds.sock")
	lis, err := agent.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithCancel(context.Background())
	gs := a.NewGRPCServer(actx)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); acancel() })

	p := proxy.New(proxy.Options{Node: "gw", XDS: sock, UpstreamNetns: rig.Node.Path, Log: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	tcpL, udpL := xdsnames.GatewayTCPListener("gw"), xdsnames.GatewayUDPListener("gw")
	waitListener(t, p, tcpL)
	waitListener(t, p, udpL)

	for _, c := range []struct{ svc, sni, pod string }{
		{"dst-a", sni(8080, "dst-a"), "dst-a-0"},
		{"dst-b", sni(9090, "dst-b"), "dst-b-0"},
	} {
		got, err := tlsThroughGateway(rig, pki, c.sni)
		if err != nil || got != c.pod {
			t.Errorf("TLS %s through the gateway: answer %q, %v; want %q", c.sni, got, err, c.pod)
		}
		got, err = quicThroughGateway(rig, pki, c.sni, 5*time.Second)
		if err != nil || got != c.pod {
			t.Errorf("QUIC %s through the gateway: answer %q, %v; want %q", c.sni, got, err, c.pod)
		}
		tcp, quicSeen := backends[c.svc].seen()
		if len(tcp) != 1 || tcp[0] != c.sni || len(quicSeen) != 1 || quicSeen[0] != c.sni {
			t.Errorf("backend %s recorded TLS %v and QUIC %v, want one of each for %s", c.pod, tcp, quicSeen, c.sni)
		}
		for _, l := range []struct{ listener, proto string }{{tcpL, "tcp"}, {udpL, "udp"}} {
			if n := passthroughCount(t, p, "aether_proxy_passthrough_flows_total", map[string]string{"listener": l.listener, "protocol": l.proto, "cluster": xdsnames.GatewayCluster(c.svc, "demo")}); n != 1 {
				t.Errorf("%s routed %v flows to %s, want 1", l.listener, n, c.svc)
			}
		}
	}

	// internal is in the mesh but not exposed: its SNI names no chain.
	unknown := sni(8080, "internal")
	if got, err := tlsThroughGateway(rig, pki, unknown); err == nil {
		t.Errorf("TLS %s through the gateway: answered %q; want the connection refused", unknown, got)
	}
	if n := passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", map[string]string{"listener": tcpL, "protocol": "tcp", "reason": "unknown_sni"}); n != 1 {
		t.Errorf("TCP unknown_sni drops %v, want 1", n)
	}
	if got, err := quicThroughGateway(rig, pki, unknown, time.Second); err == nil {
		t.Errorf("QUIC %s through the gateway: answered %q; want no handshake", unknown, got)
	} else if !errors.As(err, new(*quic.IdleTimeoutError)) {
		t.Errorf("QUIC %s: %v, want the handshake to time out unanswered", unknown, err)
	}
	if n := passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", map[string]string{"listener": udpL, "protocol": "udp", "reason": "unknown_sni"}); n < 1 {
		t.Errorf("UDP unknown_sni drops %v, want at least 1 (one per datagram of the refused flow)", n)
	}
	if tcp, q := backends["internal"].seen(); len(tcp)+len(q) != 0 {
		t.Errorf("the unexposed backend was reached: TLS %v, QUIC %v", tcp, q)
	}

	// The registry stops exposing dst-b. The listeners are updated in
	// place: a TLS session to dst-a opened before the update carries on,
	// and dst-b's SNI is refused from then on.
	held, err := openTLSThroughGateway(rig, pki, sni(8080, "dst-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	st = gatewayScenario(t, rig)
	for i := range st.Nodes {
		if g := st.Nodes[i].Gateway; g != nil {
			g.Exposes = []registry.Key{{Namespace: "demo", Name: "dst-a"}}
		}
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := tlsThroughGateway(rig, pki, sni(9090, "dst-b")); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("dst-b is still reachable after the gateway stopped exposing it")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := held.Write([]byte("hello")); err != nil {
		t.Fatalf("the session opened before the update: %v", err)
	}
	if b, err := io.ReadAll(held); err != nil || string(b) != "dst-a-0" {
		t.Errorf("the session opened before the update answered %q, %v; want dst-a-0 (the listener kept its socket)", b, err)
	}
	if got, err := quicThroughGateway(rig, pki, sni(8080, "dst-a"), 5*time.Second); err != nil || got != "dst-a-0" {
		t.Errorf("QUIC to dst-a after the update: %q, %v", got, err)
	}
}

// openTLSThroughGateway is a handshaken TLS session through the gateway.
func openTLSThroughGateway(rig *proxytest.Rig, p *gatewayPKI, sni string) (*tls.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := transparent.DialTCP(ctx, rig.Node.Path, gatewayAddr, transparent.Options{})
	if err != nil {
		return nil, err
	}
	tc := tls.Client(c, p.client(sni))
	_ = tc.SetDeadline(time.Now().Add(20 * time.Second))
	if err := tc.HandshakeContext(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return tc, nil
}

func passthroughCount(t *testing.T, p *proxy.Proxy, family string, labels map[string]string) float64 {
	t.Helper()
	v, err := p.Metrics().Value(family, labels)
	if err != nil {
		t.Fatalf("%s%v: %v", family, labels, err)
	}
	return v
}

// splitWriter sends each write in chunks of n bytes, each its own
// segment, so the ClientHello reaches the gateway in pieces.
type splitWriter struct {
	*net.TCPConn
	n int
}

func (c splitWriter) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		k := min(c.n, len(b)-done)
		m, err := c.TCPConn.Write(b[done : done+k])
		done += m
		if err != nil {
			return done, err
		}
		time.Sleep(time.Millisecond) // let each chunk leave alone
	}
	return done, nil
}

// The compiled TCP listener keeps tls_inspector's semantics: a
// ClientHello split over many segments is reassembled and routed by its
// SNI, and a client that has not sent a whole ClientHello by the stated
// listener_filters_timeout is closed and counted. The agent's resources
// are served as they are but for that timeout, shortened from 15 s so
// the case does not wait it out.
func TestGatewayClientHelloSplitAndDeadline(t *testing.T) {
	privileged.Require(t)
	rig := proxytest.NewRig(t, 1)
	if err := netns.AddAddr(rig.Node, "vpod", netip.PrefixFrom(gatewayAddr.Addr(), 32)); err != nil {
		t.Fatal(err)
	}
	pki := newGatewayPKI(t)
	name := xdsnames.SNI(8080, "dst-a", "demo", "mesh.test")
	backend := startPassthroughBackend(t, rig, pki, "dst-a-0", proxytest.BackendAddr(0), name)
	res, err := gateway.Resources(gateway.Config{Node: "gw", Address: gatewayAddr.Addr(), NetnsPath: rig.Node.Path, Domain: "mesh.test",
		Services: []gateway.Service{{Name: "dst-a", Namespace: "demo", Port: 8080, Pods: []netip.Addr{proxytest.BackendAddr(0)}}}})
	if err != nil {
		t.Fatal(err)
	}
	tl := res[resource.ListenerType][0].(*listenerv3.Listener)
	tl.ListenerFiltersTimeout = durationpb.New(300 * time.Millisecond)
	srv := proxytest.NewServer(t)
	srv.Set(t, "gw", res)
	p := proxy.New(proxy.Options{Node: "gw", XDS: srv.Target, UpstreamNetns: rig.Node.Path, Log: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitListener(t, p, tl.GetName())

	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	c, err := transparent.DialTCP(dctx, rig.Node.Path, gatewayAddr, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetNoDelay(true)
	tc := tls.Client(splitWriter{c, 40}, pki.client(name))
	_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("split ClientHello: %v", err)
	}
	if _, err := tc.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(tc); err != nil || string(b) != "dst-a-0" {
		t.Fatalf("split ClientHello answered %q, %v; want dst-a-0", b, err)
	}
	if got, _ := backend.seen(); len(got) != 1 || got[0] != name {
		t.Fatalf("backend recorded %v, want %s once", got, name)
	}

	slow, err := transparent.DialTCP(dctx, rig.Node.Path, gatewayAddr, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// A TLS record header and no more: the ClientHello never completes.
	if _, err := slow.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01}); err != nil {
		t.Fatal(err)
	}
	_ = slow.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := slow.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("slow client read %d bytes, %v; want the gateway to close it (EOF) at its listener_filters_timeout", n, err)
	}
	if n := passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", map[string]string{"listener": tl.GetName(), "protocol": "tcp", "reason": "client_hello_timeout"}); n != 1 {
		t.Fatalf("client_hello_timeout drops %v, want 1", n)
	}
	if got, _ := backend.seen(); len(got) != 1 {
		t.Fatalf("the slow client reached the backend: %v", got)
	}
}

// The QUIC passthrough's bounds reach the forwarder from the filter's
// TypedStruct, and R5 holds at the gateway: with max_pending_flows 1, a
// second client whose ClientHello is still incomplete is refused
// (pending_overflow) while the first waits; a plaintext datagram is
// dropped as not QUIC. Neither reaches the backend.
func TestGatewayQUICBoundsAndPlaintext(t *testing.T) {
	privileged.Require(t)
	rig := proxytest.NewRig(t, 1)
	if err := netns.AddAddr(rig.Node, "vpod", netip.PrefixFrom(gatewayAddr.Addr(), 32)); err != nil {
		t.Fatal(err)
	}
	pki := newGatewayPKI(t)
	name := xdsnames.SNI(8080, "dst-a", "demo", "mesh.test")
	backend := startPassthroughBackend(t, rig, pki, "dst-a-0", proxytest.BackendAddr(0), name)
	bounds := gateway.DefaultQUICBounds
	bounds.MaxPendingFlows = 1
	res, err := gateway.Resources(gateway.Config{Node: "gw", Address: gatewayAddr.Addr(), NetnsPath: rig.Node.Path, Domain: "mesh.test", QUIC: bounds,
		Services: []gateway.Service{{Name: "dst-a", Namespace: "demo", Port: 8080, Pods: []netip.Addr{proxytest.BackendAddr(0)}}}})
	if err != nil {
		t.Fatal(err)
	}
	udpName := res[resource.ListenerType][1].(*listenerv3.Listener).GetName()
	srv := proxytest.NewServer(t)
	srv.Set(t, "gw", res)
	p := proxy.New(proxy.Options{Node: "gw", XDS: srv.Target, UpstreamNetns: rig.Node.Path, Log: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitListener(t, p, udpName)

	hello, err := snitest.QUICClientHello(name, "echo")
	if err != nil {
		t.Fatal(err)
	}
	send := func(d []byte) {
		t.Helper()
		c, err := transparent.DialUDP(rig.Node.Path, netip.AddrPort{}, gatewayAddr, transparent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write(d); err != nil {
			t.Fatal(err)
		}
	}
	// Two clients each send the first of their ClientHello's two Initials.
	for range 2 {
		_, ds, err := snitest.Initials(sni.Version1, hello, len(hello)/2+1)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) != 2 {
			t.Fatalf("%d Initials, want the ClientHello over 2", len(ds))
		}
		send(ds[0])
	}
	send([]byte("GET / HTTP/1.0\r\n\r\n"))
	labels := func(k, v string) map[string]string {
		return map[string]string{"listener": udpName, "protocol": "udp", k: v}
	}
	deadline := time.Now().Add(10 * time.Second)
	for passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", labels("reason", "pending_overflow")) < 1 ||
		passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", labels("reason", "not_quic")) < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("no pending_overflow and not_quic drops: overflow %v, not_quic %v", passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", labels("reason", "pending_overflow")),
				passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", labels("reason", "not_quic")))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := passthroughCount(t, p, "aether_proxy_passthrough_dropped_total", labels("reason", "pending_overflow")); n != 1 {
		t.Errorf("pending_overflow %v, want 1: the second waiting client alone", n)
	}
	if n := passthroughCount(t, p, "aether_proxy_passthrough_active_flows", labels("state", "pending")); n != 1 {
		t.Errorf("%v flows pending, want 1 (max_pending_flows)", n)
	}
	if tcp, q := backend.seen(); len(tcp)+len(q) != 0 {
		t.Errorf("the backend was reached: TLS %v, QUIC %v", tcp, q)
	}
}
