// Package h2 runs the HTTP listeners of the mTLS path: the per-pod inbound
// listener on 18008 (TLS 1.3, client certificate required and validated as
// Envoy's SPIFFE validator does, HTTP/2, chains by SNI, XFCC SANITIZE_SET)
// and the per-pod outbound listener on 18081 (plain HTTP/1.1 or h2c, routes
// by authority to h2 clusters, the pod's identity in filter state), with
// the upstream pool between them and a JSON access log
// (ARCHITECTURE.md, "The mTLS HTTP/2 path").
package h2

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
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
	// HeaderTimeout is the HTTP/1.1 request headers timeout; zero is
	// RequestHeadersTimeout.
	HeaderTimeout time.Duration
	// HandshakeTimeout bounds a downstream TLS handshake; zero is
	// handshakeTimeout.
	HandshakeTimeout time.Duration
}

func (o Options) handshakeTimeout() time.Duration {
	if o.HandshakeTimeout > 0 {
		return o.HandshakeTimeout
	}
	return handshakeTimeout
}

func (o Options) headerTimeout() time.Duration {
	if o.HeaderTimeout > 0 {
		return o.HeaderTimeout
	}
	return RequestHeadersTimeout
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
	// errorLog is the h2 server's: it counts the connection errors
	// x/net's CountError misses.
	errorLog *log.Logger
	loop     *accept.Loop[net.Conn]
	// graceful's Shutdown sends GOAWAY on every connection h2 serves:
	// TLS and h2c alike.
	graceful *http.Server
	// http1 are the servers of HTTP/1.1 connections, one each; Drain
	// turns their keep-alives off. draining is set from Drain to Resume,
	// so that a connection whose server starts meanwhile is drained too.
	mu       sync.Mutex
	http1    map[*http.Server]struct{}
	draining bool
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
	l := &Listener{name: spec.Name, ln: ln, clusters: clusters, opts: o, graceful: &http.Server{}, http1: map[*http.Server]struct{}{}}
	l.stats = o.Metrics.HTTPListener(spec.Name)
	l.h2 = &http2.Server{IdleTimeout: IdleTimeout, MaxConcurrentStreams: MaxConcurrentStreams, CountError: l.stats.ProtocolError}
	l.errorLog = connErrorLog(l.stats, o.Log, spec.Name)
	// Only registers the h2 server's connections with graceful; it cannot
	// fail without a TLS configuration.
	_ = http2.ConfigureServer(l.graceful, l.h2)
	l.cfg.Store(spec.HTTP)
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
// accepts on it), and drains every connection as Envoy does: HTTP/2 gets
// GOAWAY and finishes its streams; HTTP/1.1 is closed once idle, and a
// request read on it, now or later, is answered with Connection: close.
// Those still open when ctx ends are closed.
//
// An HTTP/1.1 server is never shut down: net/http's Shutdown drops,
// unanswered, a request it reads after shutdown began, and a connection
// accepted just before the drain has its request still to read.
func (l *Listener) Drain(ctx context.Context) error {
	if err := l.loop.Pause(); err != nil {
		return err
	}
	// Only the connections open now are closed at ctx's end: after a
	// Resume, new ones serve on.
	conns := l.loop.Conns()
	l.mu.Lock()
	l.draining = true
	for s := range l.http1 {
		s.SetKeepAlivesEnabled(false)
	}
	l.mu.Unlock()
	go func() { _ = l.graceful.Shutdown(ctx) }()
	go func() {
		<-ctx.Done()
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	return nil
}

// Resume accepts again after Drain.
func (l *Listener) Resume() error {
	l.mu.Lock()
	l.draining = false
	l.mu.Unlock()
	return l.loop.Resume()
}

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
	conn := newDownstream(chain, peer.String(), own)
	l.h2.ServeConn(tc, l.h2Opts(conn))
	l.opts.Pool.releaseDownstream(conn)
}

// h2Opts serves one HTTP/2 connection. Its first state comes once h2 has
// registered it with graceful: if the listener drains by then, Drain's
// GOAWAY may have passed it by (its handshake or preface was under way),
// and graceful sends GOAWAY again, to the connections that lack one.
func (l *Listener) h2Opts(conn *downstream) *http2.ServeConnOpts {
	first := true
	// Called on the connection's serving goroutine only.
	state := func(net.Conn, http.ConnState) {
		if first && l.isDraining() {
			go func() { _ = l.graceful.Shutdown(context.Background()) }()
		}
		first = false
	}
	return &http2.ServeConnOpts{Handler: l.handler(conn), BaseConfig: &http.Server{ConnState: state, MaxHeaderBytes: MaxHeaderBytes, ErrorLog: l.errorLog}}
}

func (l *Listener) isDraining() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.draining
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
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.handshakeTimeout())
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		reason := metrics.RefusedHandshake
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			reason = metrics.RefusedHandshakeTimeout
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

// servePlain serves a plain connection by its first bytes, as net/http
// would: h2c's preface goes to the HTTP/2 server the TLS connections use
// (so Drain's GOAWAY reaches it), anything else to an HTTP/1.1 server.
func (l *Listener) servePlain(c net.Conn, chain *listener.HTTPChain) {
	conn := newDownstream(chain, "", "")
	defer l.opts.Pool.releaseDownstream(conn)
	pc := &peekedConn{Conn: c, r: bufio.NewReaderSize(c, len(http2.ClientPreface))}
	// A client that sends less than the preface's first line would hold
	// the peek for ever: it gets the request headers timeout.
	_ = c.SetReadDeadline(time.Now().Add(l.opts.headerTimeout()))
	h2c, err := hasPreface(pc.r)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		l.stats.ProtocolError(metrics.ProtocolHeadersTimeout)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if h2c {
		l.h2.ServeConn(pc, l.h2Opts(conn))
		return
	}
	l.serveHTTP1(pc, conn)
}

// hasPreface reports whether the connection starts with HTTP/2's client
// preface. Its first 14 bytes are read first: an HTTP/1.1 request may be
// shorter than the whole preface, and is told apart without waiting for
// more.
func hasPreface(r *bufio.Reader) (bool, error) {
	for _, n := range []int{len("PRI * HTTP/2.0"), len(http2.ClientPreface)} {
		got, err := r.Peek(n)
		if err != nil || string(got) != http2.ClientPreface[:n] {
			return false, err
		}
	}
	return true, nil
}

// peekedConn reads first what hasPreface peeked.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one whose request body it did not read.
func (p *peekedConn) CloseWrite() error {
	if cw, ok := p.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// serveHTTP1 serves an HTTP/1.1 connection to its end. Its server is one
// of l.http1 while it runs, and starts with keep-alives off if the
// listener is draining: the connection was accepted as the drain began.
func (l *Listener) serveHTTP1(c net.Conn, conn *downstream) {
	watch := &h1Watch{Conn: c}
	handler := l.handler(conn)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		watch.handled.Store(true)
		handler.ServeHTTP(w, r)
	}), Protocols: new(http.Protocols), IdleTimeout: IdleTimeout, MaxHeaderBytes: MaxHeaderBytes, ReadHeaderTimeout: l.opts.headerTimeout()}
	srv.Protocols.SetHTTP1(true)
	one := newOneConn(watch)
	srv.ConnState = func(_ net.Conn, s http.ConnState) {
		watch.state(s, l.stats)
		if s == http.StateClosed || s == http.StateHijacked {
			one.finish()
		}
	}
	l.mu.Lock()
	if l.draining {
		srv.SetKeepAlivesEnabled(false)
	}
	l.http1[srv] = struct{}{}
	l.mu.Unlock()
	go func() { _ = srv.Serve(one) }()
	<-one.done
	_ = srv.Close()
	l.mu.Lock()
	delete(l.http1, srv)
	l.mu.Unlock()
}

// oneConn is a net.Listener that yields one connection, so that net/http
// serves it and returns once it closes: done is closed by the
// connection's own end, not by the listener's Close.
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
