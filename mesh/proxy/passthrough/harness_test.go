package passthrough

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/quic-go/quic-go"
)

var loopback = netip.MustParseAddr("127.0.0.1")

// pki is one self-signed certificate per server name and the pool that
// trusts them all: the client verifies the server it reached, end to
// end, through a forwarder that holds no key.
type pki struct {
	pool  *x509.CertPool
	certs map[string]tls.Certificate
}

func newPKI(t testing.TB, names ...string) *pki {
	t.Helper()
	p := &pki{pool: x509.NewCertPool(), certs: map[string]tls.Certificate{}}
	for i, n := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 1)), Subject: pkix.Name{CommonName: n}, DNSNames: []string{n},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		p.pool.AddCert(c)
		p.certs[n] = tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}
	}
	return p
}

func (p *pki) serverTLS(name string) *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{p.certs[name]}, NextProtos: []string{"echo"}}
}

func (p *pki) clientTLS(name string) *tls.Config {
	return &tls.Config{ServerName: name, RootCAs: p.pool, NextProtos: []string{"echo"}, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
}

// record is what a server saw of one connection: the witness of where a
// flow went.
type record struct {
	sni      string
	remote   string
	used0RTT bool
	version  quic.Version
}

// echoServer is a quic-go server that answers each stream with its name
// and the stream's bytes, and records each connection.
type echoServer struct {
	name string
	addr netip.AddrPort
	tr   *quic.Transport

	mu   sync.Mutex
	seen []record
}

type serverOpts struct {
	versions []quic.Version
	retry    bool
	allow0   bool
}

func newQUICServer(t testing.TB, p *pki, name string, so serverOpts) *echoServer {
	t.Helper()
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	s := &echoServer{name: name, addr: pc.LocalAddr().(*net.UDPAddr).AddrPort(), tr: &quic.Transport{Conn: pc}}
	if so.retry {
		s.tr.VerifySourceAddress = func(net.Addr) bool { return true }
	}
	ln, err := s.tr.ListenEarly(p.serverTLS(name), &quic.Config{Versions: so.versions, Allow0RTT: so.allow0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close(); s.tr.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *echoServer) serve(c *quic.Conn) {
	for {
		st, err := c.AcceptStream(context.Background())
		if err != nil {
			return
		}
		if err := func() error {
			// Record once the first stream's bytes have arrived: by then
			// 0-RTT is decided.
			b, err := io.ReadAll(st)
			if err != nil {
				return err
			}
			<-c.HandshakeComplete()
			cs := c.ConnectionState()
			s.mu.Lock()
			s.seen = append(s.seen, record{sni: cs.TLS.ServerName, remote: c.RemoteAddr().String(), used0RTT: cs.Used0RTT, version: cs.Version})
			s.mu.Unlock()
			_, err = st.Write(append([]byte(s.name+"|"), b...))
			st.Close()
			return err
		}(); err != nil {
			return
		}
	}
}

func (s *echoServer) records() []record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]record(nil), s.seen...)
}

// forwarder is a QUIC passthrough in front of servers, each server's
// name its filter chain's only server name.
type forwarder struct {
	*QUIC
	m   *Metrics
	reg *prometheus.Registry
}

func newForwarder(t testing.TB, o QUICOptions, servers ...*echoServer) *forwarder {
	t.Helper()
	fw := newForwarderStopped(t, o, servers...)
	go fw.Serve()
	return fw
}

func newForwarderStopped(t testing.TB, o QUICOptions, servers ...*echoServer) *forwarder {
	t.Helper()
	var chains []FilterChain
	up := StaticUpstreams{}
	for _, s := range servers {
		chains = append(chains, FilterChain{Name: s.name, ServerNames: []string{s.name}, Cluster: "cl-" + s.name})
		up["cl-"+s.name] = s.addr
	}
	routes, err := NewRoutes(chains)
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	pc.SetReadBuffer(4 << 20)
	reg := prometheus.NewRegistry()
	o.Metrics = NewMetrics(reg)
	if o.Name == "" {
		o.Name = "udp-18009"
	}
	fw := &forwarder{QUIC: NewQUIC(pc, routes, up, o), m: o.Metrics, reg: reg}
	t.Cleanup(func() { fw.Close() })
	return fw
}

func (f *forwarder) addrPort() netip.AddrPort { return f.Addr().(*net.UDPAddr).AddrPort() }

func (f *forwarder) dropped(reason string) float64 {
	return testutil.ToFloat64(f.m.dropped.WithLabelValues(f.opts.Name, "udp", reason))
}

func (f *forwarder) event(ev string) float64 {
	return testutil.ToFloat64(f.m.events.WithLabelValues(f.opts.Name, "udp", ev))
}

func (f *forwarder) flowsTo(cluster string) float64 {
	return testutil.ToFloat64(f.m.flows.WithLabelValues(f.opts.Name, "udp", cluster))
}

// rebindConn is a client socket that can be swapped for a new one under
// quic-go, which keeps sending on it unaware: what a NAT rebinding looks
// like from the far side.
type rebindConn struct {
	mu  sync.Mutex
	cur *net.UDPConn
}

func newRebindConn(t testing.TB) *rebindConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r := &rebindConn{cur: c}
	t.Cleanup(func() { r.Close() })
	return r
}

func (r *rebindConn) conn() *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// rebind moves the client to a new local port.
func (r *rebindConn) rebind(t testing.TB) (old, now net.Addr) {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	prev := r.cur
	r.cur = c
	r.mu.Unlock()
	prev.Close()
	return prev.LocalAddr(), c.LocalAddr()
}

func (r *rebindConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		c := r.conn()
		n, a, err := c.ReadFrom(b)
		if err != nil && c != r.conn() {
			continue // swapped under the read
		}
		return n, a, err
	}
}
func (r *rebindConn) WriteTo(b []byte, a net.Addr) (int, error) { return r.conn().WriteTo(b, a) }
func (r *rebindConn) Close() error                              { return r.conn().Close() }
func (r *rebindConn) LocalAddr() net.Addr                       { return r.conn().LocalAddr() }
func (r *rebindConn) SetDeadline(t time.Time) error             { return r.conn().SetDeadline(t) }
func (r *rebindConn) SetReadDeadline(t time.Time) error         { return r.conn().SetReadDeadline(t) }
func (r *rebindConn) SetWriteDeadline(t time.Time) error        { return r.conn().SetWriteDeadline(t) }

type clientOpts struct {
	versions []quic.Version
	conn     net.PacketConn
	early    bool
	tls      *tls.Config
	timeout  time.Duration
}

// dial connects a quic-go client to the forwarder for name.
func dial(t testing.TB, p *pki, fw *forwarder, name string, co clientOpts) (*quic.Conn, error) {
	t.Helper()
	pc := co.conn
	if pc == nil {
		c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		pc = c
	}
	tr := &quic.Transport{Conn: pc}
	t.Cleanup(func() { tr.Close(); pc.Close() })
	tc := co.tls
	if tc == nil {
		tc = p.clientTLS(name)
	}
	if co.timeout == 0 {
		co.timeout = 10 * time.Second
	}
	cfg := &quic.Config{Versions: co.versions, HandshakeIdleTimeout: co.timeout}
	ctx, cancel := context.WithTimeout(context.Background(), co.timeout)
	defer cancel()
	addr := net.UDPAddrFromAddrPort(fw.addrPort())
	if co.early {
		return tr.DialEarly(ctx, addr, tc, cfg)
	}
	return tr.Dial(ctx, addr, tc, cfg)
}

// echo sends payload on a new stream and returns the answer.
func echo(c *quic.Conn, payload string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	st, err := c.OpenStreamSync(ctx)
	if err != nil {
		return "", fmt.Errorf("open stream: %w", err)
	}
	st.SetDeadline(time.Now().Add(timeout))
	if _, err := st.Write([]byte(payload)); err != nil {
		return "", fmt.Errorf("write: %w", err)
	}
	st.Close()
	b, err := io.ReadAll(st)
	if err != nil {
		return string(b), fmt.Errorf("read: %w", err)
	}
	return string(b), nil
}

// waitFor polls cond until it holds; the bound only ends a broken run.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

var errNoRecord = errors.New("no record")
