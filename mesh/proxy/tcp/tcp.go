// Package tcp is the transparent TCP capture listener on the same 18082 as
// UDP (R3: one number for both transports). Under mark-and-divert an
// accepted connection's local address is the original destination, so the
// filter chain is chosen by it (prefix_ranges, most specific first) and the
// connection is handed to tcp_proxy: one upstream connection from the
// proxy's own netns (with no SO_MARK unless Options.Mark sets one) to a
// host of the chain's cluster.
//
// Connections follow Envoy's tcp_proxy: a FIN from one side becomes a
// half-close (CloseWrite) of the other while the other direction keeps
// flowing; an error either way closes both; idle_timeout closes both after
// no bytes moved either way for that long. A failing accept (EMFILE, say)
// backs off instead of spinning.
package tcp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"syscall"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/internal/accept"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// Clusters resolves a cluster name to its active (warm) cluster.
type Clusters interface {
	Active(name string) *cluster.Cluster
}

// Options tune the listener.
type Options struct {
	Mark          uint32
	UpstreamNetns string
	Log           *slog.Logger
	Metrics       *metrics.Metrics
	// From is the socket a hot restart's previous process handed over for
	// this address; nil binds a new one.
	From *os.File
}

// Listener is one running TCP capture listener.
type Listener struct {
	name     string
	ln       acceptor
	cfg      atomic.Pointer[listener.TCP]
	clusters Clusters
	opts     Options
	stats    *metrics.TCPListener
	clock    clock
	loop     *accept.Loop[*net.TCPConn]
}

// acceptor is the listening socket; tests inject failing ones.
type acceptor interface {
	accept.Listener[*net.TCPConn]
	Addr() net.Addr
}

// tcpListener accepts *net.TCPConn, whose CloseWrite the half-close needs.
type tcpListener struct{ *net.TCPListener }

func (l tcpListener) Accept() (*net.TCPConn, error) { return l.AcceptTCP() }

// Listen opens the listener's socket in its netns and starts accepting.
func Listen(spec *listener.Spec, clusters Clusters, o Options) (*Listener, error) {
	ln, err := transparent.ListenTCP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true, From: o.From})
	if err != nil {
		return nil, err
	}
	return serve(spec, tcpListener{ln}, clusters, o, realClock), nil
}

func serve(spec *listener.Spec, ln acceptor, clusters Clusters, o Options, clk clock) *Listener {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	l := &Listener{name: spec.Name, ln: ln, clusters: clusters, opts: o, stats: o.Metrics.TCPListener(spec.Name), clock: clk}
	l.cfg.Store(spec.TCP)
	l.loop = accept.New(ln, accept.Options{Name: spec.Name, Protocol: "tcp", Log: o.Log, Errors: l.stats.AcceptErrors})
	l.loop.Serve(l.handle)
	return l
}

// Name is the listener's resource name.
func (l *Listener) Name() string { return l.name }

// Update swaps the filter chains; established connections are kept.
func (l *Listener) Update(cfg *listener.TCP) { l.cfg.Store(cfg) }

// Close stops accepting and closes every proxied connection.
func (l *Listener) Close() error { return l.loop.Close() }

// Drain stops accepting, leaving the socket open (a hot restart's child
// accepts on it) and every proxied connection running until it ends, as
// Envoy's tcp_proxy does while its listener drains.
func (l *Listener) Drain() error { return l.loop.Pause() }

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

// handle proxies one accepted connection; the loop holds and closes it.
func (l *Listener) handle(down *net.TCPConn) {
	local := down.LocalAddr().(*net.TCPAddr).AddrPort()
	chain, ok := l.cfg.Load().Select(local.Addr())
	if !ok {
		// Envoy closes a connection no filter chain matches.
		l.stats.NoChain.Inc()
		return
	}
	cs := l.opts.Metrics.Cluster(chain.Cluster)
	c := l.clusters.Active(chain.Cluster)
	if c == nil {
		l.stats.NoCluster.Inc()
		return
	}
	host, err := c.Pick()
	if err != nil {
		cs.NoneHealthy.Inc()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Spec.ConnectTimeout)
	up, err := transparent.DialTCP(ctx, l.opts.UpstreamNetns, host, transparent.Options{Mark: l.opts.Mark})
	cancel()
	if err != nil {
		cs.Errors.Inc()
		l.stats.Errors.Inc()
		l.opts.Log.Warn("tcp upstream connect failed", "listener", l.name, "cluster", chain.Cluster, "host", host, "err", err)
		return
	}
	defer up.Close()
	if !l.loop.Track(up) {
		return
	}
	defer l.loop.Untrack(up)
	cs.Sessions.Inc()
	l.stats.Conn(chain.Cluster)
	l.pipe(down, up, chain.IdleTimeout)
}

// Addr is the bound address.
func (l *Listener) Addr() netip.AddrPort { return l.ln.Addr().(*net.TCPAddr).AddrPort() }
