// Package h2 runs the HTTP listeners of the mTLS path: the per-pod inbound
// listener on 18008 (TLS 1.3, client certificate required and validated as
// Envoy's SPIFFE validator does, HTTP/2, chains by SNI, XFCC SANITIZE_SET)
// and the per-pod outbound listener on 18081 (plain HTTP/1.1 or h2c, routes
// by authority to h2 clusters, the pod's identity in filter state), with
// the upstream pool between them and a JSON access log
// (ARCHITECTURE.md, "The mTLS HTTP/2 path").
package h2

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/internal/accept"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"
	"github.com/aether-mesh/aether/mesh/proxy/ondemand"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// handshakeTimeout bounds a downstream TLS handshake, as Envoy's
// transport_socket_connect_timeout would; a client that stalls it holds
// nothing after.
const handshakeTimeout = 10 * time.Second

// IdleTimeout closes a connection, downstream or upstream, with no stream
// for this long: Envoy's default common_http_protocol_options.idle_timeout,
// which keeps an idle peer from holding a connection for ever.
const IdleTimeout = time.Hour

// Clusters resolves a cluster name to its active (warm) cluster.
type Clusters interface {
	Active(name string) *cluster.Cluster
}

// Options are what every HTTP listener of a proxy shares.
type Options struct {
	Store   *secret.Store
	Pool    *Pool
	Logs    *LogFiles
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// OnDemand fetches a route's missing cluster when its connection
	// manager has the on_demand filter.
	OnDemand *ondemand.Discovery
	// From is the socket a hot restart's previous process handed over for
	// this listener's address; nil binds a new one.
	From *os.File
	// QUIC carries a QUIC listener's part in a hot restart; nil serves
	// the socket directly with quic-go's own connection IDs.
	QUIC *QUICRestart
}

// Listener is one running HTTP listener.
type Listener struct {
	name     string
	ln       net.Listener
	cfg      atomic.Pointer[listener.HTTP]
	clusters Clusters
	opts     Options
	stats    *metrics.HTTPListener
	h2       *http2.Server
	loop     *accept.Loop[net.Conn]
	// graceful's Shutdown sends GOAWAY on every connection h2 serves.
	graceful *http.Server
	// plain are the servers of plain-HTTP connections, each shut
	// gracefully by Drain.
	mu    sync.Mutex
	plain map[*http.Server]struct{}
}

// Listen opens the listener's socket in its netns and starts serving.
func Listen(spec *listener.Spec, clusters Clusters, o Options) (*Listener, error) {
	ln, err := transparent.ListenTCP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true, From: o.From})
	if err != nil {
		return nil, err
	}
	return Serve(spec, ln, clusters, o), nil
}

// Serve serves spec on an open listening socket.
func Serve(spec *listener.Spec, ln net.Listener, clusters Clusters, o Options) *Listener {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	l := &Listener{name: spec.Name, ln: ln, clusters: clusters, opts: o, h2: &http2.Server{IdleTimeout: IdleTimeout},
		graceful: &http.Server{}, plain: map[*http.Server]struct{}{}}
	// Only registers the h2 server's connections with graceful; it cannot
	// fail without a TLS configuration.
	_ = http2.ConfigureServer(l.graceful, l.h2)
	l.cfg.Store(spec.HTTP)
	l.stats = o.Metrics.HTTPListener(spec.Name)
	l.loop = accept.New(ln, accept.Options{Name: spec.Name, Protocol: "http", Log: o.Log, Errors: l.stats.AcceptErrors})
	l.loop.Serve(l.handle)
	return l
}

// Name is the listener's resource name.
func (l *Listener) Name() string { return l.name }

// Addr is the bound address.
func (l *Listener) Addr() netip.AddrPort { return l.ln.Addr().(*net.TCPAddr).AddrPort() }

// Update swaps the filter chains; established connections keep the chain
// they were accepted with, as Envoy drains them on their old chain.
func (l *Listener) Update(cfg *listener.HTTP) { l.cfg.Store(cfg) }

// Close stops accepting and closes every connection.
func (l *Listener) Close() error { return l.loop.Close() }

// Drain stops accepting, leaving the socket open (a hot restart's child
// accepts on it), and shuts every connection gracefully: HTTP/2 gets
// GOAWAY, HTTP/1.1 closes after its response; requests in flight finish.
// Those still open when ctx ends are closed.
func (l *Listener) Drain(ctx context.Context) error {
	if err := l.loop.Pause(); err != nil {
		return err
	}
	// Only the connections open now are drained: after a Resume, new ones
	// serve on.
	conns := l.loop.Conns()
	l.mu.Lock()
	plain := make([]*http.Server, 0, len(l.plain))
	for s := range l.plain {
		plain = append(plain, s)
	}
	l.mu.Unlock()
	go func() { _ = l.graceful.Shutdown(ctx) }()
	for _, s := range plain {
		go func() { _ = s.Shutdown(ctx) }()
	}
	go func() {
		<-ctx.Done()
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	return nil
}

// Resume accepts again after Drain.
func (l *Listener) Resume() error { return l.loop.Resume() }

// SyscallConn is the listening socket's, to hand it over.
func (l *Listener) SyscallConn() (syscall.RawConn, error) {
	sc, ok := l.ln.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("listener %q: socket %T cannot be handed over", l.name, l.ln)
	}
	return sc.SyscallConn()
}

// handle serves one accepted connection; the loop holds and closes it.
func (l *Listener) handle(c net.Conn) {
	cfg := l.cfg.Load()
	if cfg.Chains[0].TLS == nil {
		chain, _ := cfg.Select("")
		l.servePlain(c, chain)
		return
	}
	tc, chain, ok := l.handshake(c, cfg)
	if !ok {
		return
	}
	peer, _ := mtls.PeerID(tc.ConnectionState())
	own := ""
	if cert, err := l.opts.Store.Certificate(chain.TLS.CertSecret); err == nil {
		own = leafURI(cert)
	}
	conn := &downstream{chain: chain, peer: peer.String(), own: own}
	l.h2.ServeConn(tc, &http2.ServeConnOpts{Handler: l.handler(conn)})
	l.opts.Pool.releaseDownstream(conn)
}

// handshake runs the server handshake with the chain the SNI selects and
// counts a refusal by its reason.
func (l *Listener) handshake(c net.Conn, cfg *listener.HTTP) (*tls.Conn, *listener.HTTPChain, bool) {
	var chain *listener.HTTPChain
	noChain, sawPeer := false, false
	tc := tls.Server(c, &tls.Config{GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		ch, ok := cfg.Select(hello.ServerName)
		if !ok {
			noChain = true
			return nil, fmt.Errorf("no filter chain matches server name %q", hello.ServerName)
		}
		chain = ch
		sc := ch.TLS.ServerConfig(l.opts.Store)
		verify := sc.VerifyConnection
		sc.VerifyConnection = func(cs tls.ConnectionState) error {
			sawPeer = len(cs.PeerCertificates) > 0
			return verify(cs)
		}
		return sc, nil
	}})
	ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		reason := metrics.RefusedHandshake
		switch {
		case noChain:
			reason = metrics.RefusedNoChain
		case sawPeer:
			reason = metrics.RefusedPeer
		case chain != nil && strings.Contains(err.Error(), "didn't provide a certificate"):
			reason = metrics.RefusedNoClientCert
		}
		l.opts.Metrics.HTTPRefused(l.name, reason)
		l.opts.Log.Info("downstream TLS handshake refused", "listener", l.name, "reason", reason, "remote", c.RemoteAddr(), "err", err)
		return nil, nil, false
	}
	return tc, chain, true
}

func (l *Listener) servePlain(c net.Conn, chain *listener.HTTPChain) {
	conn := &downstream{chain: chain}
	srv := &http.Server{Handler: l.handler(conn), Protocols: new(http.Protocols), IdleTimeout: IdleTimeout}
	srv.Protocols.SetHTTP1(true)
	srv.Protocols.SetUnencryptedHTTP2(true)
	one := newOneConn(c)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed || s == http.StateHijacked {
			one.finish()
		}
	}
	l.mu.Lock()
	l.plain[srv] = struct{}{}
	l.mu.Unlock()
	go func() { _ = srv.Serve(one) }()
	<-one.done
	_ = srv.Close()
	l.mu.Lock()
	delete(l.plain, srv)
	l.mu.Unlock()
	l.opts.Pool.releaseDownstream(conn)
}

// oneConn is a net.Listener that yields one connection, so that net/http
// serves it (HTTP/1.1 or h2c by its preface) and returns once it closes.
// Closing the listener, as a graceful Shutdown does first (it then waits
// for Serve to return before closing idle connections), does not end the
// connection: done is closed by the connection's own end.
type oneConn struct {
	c      net.Conn
	once   sync.Once
	took   bool
	done   chan struct{}
	shut   sync.Once
	closed chan struct{}
}

func newOneConn(c net.Conn) *oneConn {
	return &oneConn{c: c, done: make(chan struct{}), closed: make(chan struct{})}
}

func (o *oneConn) Accept() (net.Conn, error) {
	if !o.took {
		o.took = true
		return o.c, nil
	}
	select {
	case <-o.done:
	case <-o.closed:
	}
	return nil, net.ErrClosed
}

func (o *oneConn) finish() { o.once.Do(func() { close(o.done) }) }

func (o *oneConn) Close() error   { o.shut.Do(func() { close(o.closed) }); return nil }
func (o *oneConn) Addr() net.Addr { return o.c.LocalAddr() }
