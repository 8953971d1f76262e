// Package tcp is the transparent TCP capture listener on the same 18082 as
// UDP (R3: one number for both transports). Under mark-and-divert an
// accepted connection's local address is the original destination, so the
// filter chain is chosen by it (prefix_ranges, most specific first) and the
// connection is handed to tcp_proxy: one upstream connection from the
// proxy's own netns, carrying the passthrough mark, to a host of the
// chain's cluster.
package tcp

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
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
}

// Listener is one running TCP capture listener.
type Listener struct {
	name     string
	ln       *net.TCPListener
	cfg      atomic.Pointer[listener.TCP]
	clusters Clusters
	opts     Options
	stats    *metrics.TCPListener

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// Listen opens the listener's socket in its netns and starts accepting.
func Listen(spec *listener.Spec, clusters Clusters, o Options) (*Listener, error) {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	ln, err := transparent.ListenTCP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true})
	if err != nil {
		return nil, err
	}
	l := &Listener{name: spec.Name, ln: ln, clusters: clusters, opts: o, stats: o.Metrics.TCPListener(spec.Name), conns: map[net.Conn]struct{}{}}
	l.cfg.Store(spec.TCP)
	l.wg.Add(1)
	go l.serve()
	return l, nil
}

// Name is the listener's resource name.
func (l *Listener) Name() string { return l.name }

// Update swaps the filter chains; established connections are kept.
func (l *Listener) Update(cfg *listener.TCP) { l.cfg.Store(cfg) }

// Close stops accepting and closes every proxied connection.
func (l *Listener) Close() error {
	l.mu.Lock()
	l.closed = true
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

func (l *Listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Listener) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

func (l *Listener) serve() {
	defer l.wg.Done()
	for {
		c, err := l.ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			l.opts.Log.Warn("tcp accept failed", "listener", l.name, "err", err)
			continue
		}
		l.wg.Add(1)
		go l.handle(c)
	}
}

func (l *Listener) handle(down *net.TCPConn) {
	defer l.wg.Done()
	defer down.Close()
	if !l.track(down) {
		return
	}
	defer l.untrack(down)
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
	if !l.track(up) {
		return
	}
	defer l.untrack(up)
	cs.Sessions.Inc()
	l.stats.Conn(chain.Cluster)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, _ := io.Copy(up, down)
		l.stats.BytesUp.Add(float64(n))
		_ = up.CloseWrite()
	}()
	n, _ := io.Copy(down, up)
	l.stats.BytesDown.Add(float64(n))
	_ = down.CloseWrite()
	wg.Wait()
}

// Addr is the bound address.
func (l *Listener) Addr() netip.AddrPort { return l.ln.Addr().(*net.TCPAddr).AddrPort() }
