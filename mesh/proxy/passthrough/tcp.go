package passthrough

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/internal/accept"
	"github.com/aether-mesh/aether/mesh/proxy/sni"
)

// Envoy's defaults the TCP forwarder keeps.
const (
	// DefaultInspectTimeout is listener_filters_timeout's default: a
	// client whose ClientHello is not whole by then is closed.
	DefaultInspectTimeout = 15 * time.Second
	// DefaultConnectTimeout is a cluster's connect_timeout default.
	DefaultConnectTimeout = 5 * time.Second
)

// TCPOptions tune the TCP forwarder; zero values are Envoy's defaults.
type TCPOptions struct {
	// Name is the listener's, for counters and logs.
	Name string
	// MaxClientHello is tls_inspector's max_client_hello_size
	// (sni.DefaultMaxClientHello, 16 KiB).
	MaxClientHello int
	// InspectTimeout is listener_filters_timeout; negative is none.
	InspectTimeout time.Duration
	// ConnectTimeout bounds the upstream dial.
	ConnectTimeout time.Duration
	// Dial makes the upstream connection; nil is a plain dial from the
	// process's own netns. The proxy dials from its upstream netns, with
	// its mark.
	Dial    func(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error)
	Metrics *Metrics
	Log     *slog.Logger
}

// TCP is TLS passthrough by SNI on one listening socket: each accepted
// connection's ClientHello is read (tls_inspector), a filter chain picked
// by its server name, the chain's upstream dialed, the bytes read so far
// replayed to it, and the two connections spliced both ways (tcp_proxy).
// A stream that is not TLS, or whose ClientHello does not parse, goes on
// with no server name, to the default chain if there is one, as
// tls_inspector lets it; no chain refuses it.
type TCP struct {
	loop  *accept.Loop[*net.TCPConn]
	ln    *net.TCPListener
	table table
	opts  TCPOptions
	lm    *listenerMetrics
}

// NewTCP forwards connections accepted on ln by routes to upstreams.
func NewTCP(ln *net.TCPListener, routes *Routes, upstreams Upstreams, o TCPOptions) *TCP {
	if o.MaxClientHello <= 0 {
		o.MaxClientHello = sni.DefaultMaxClientHello
	}
	if o.InspectTimeout == 0 {
		o.InspectTimeout = DefaultInspectTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Dial == nil {
		o.Dial = func(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", addr.String())
			if err != nil {
				return nil, err
			}
			return c.(*net.TCPConn), nil
		}
	}
	t := &TCP{ln: ln, opts: o, lm: o.Metrics.listener(o.Name, "tcp")}
	t.table.set(routes, upstreams)
	t.loop = accept.New[*net.TCPConn](tcpListener{ln}, accept.Options{
		Name: o.Name, Protocol: "tcp passthrough", Log: o.Log,
		Errors: t.lm.m.dropped.WithLabelValues(o.Name, "tcp", "accept_error"),
	})
	return t
}

// tcpListener yields *net.TCPConn, for the accept loop.
type tcpListener struct{ *net.TCPListener }

func (l tcpListener) Accept() (*net.TCPConn, error) { return l.AcceptTCP() }

// SetRoutes replaces the routes and upstreams for new connections.
func (t *TCP) SetRoutes(r *Routes, u Upstreams) { t.table.set(r, u) }

// Addr is the listening address.
func (t *TCP) Addr() net.Addr { return t.ln.Addr() }

// Serve starts accepting.
func (t *TCP) Serve() { t.loop.Serve(t.handle) }

// Close stops accepting and closes every connection.
func (t *TCP) Close() error { return t.loop.Close() }

func (t *TCP) handle(down *net.TCPConn) {
	if t.opts.InspectTimeout > 0 {
		down.SetReadDeadline(time.Now().Add(t.opts.InspectTimeout))
	}
	hello, read, err := sni.ReadClientHello(down, t.opts.MaxClientHello)
	switch {
	case err == nil:
	case errors.Is(err, sni.ErrNotTLS), errors.Is(err, sni.ErrMalformed):
		t.lm.event(EventNoSNI)
		hello = sni.ClientHello{}
	case errors.Is(err, os.ErrDeadlineExceeded):
		t.lm.drop(DropTimeout)
		return
	case errors.Is(err, sni.ErrTooLarge):
		t.lm.drop(DropTooLarge)
		return
	default:
		t.lm.drop(DropClientError)
		return
	}
	down.SetReadDeadline(time.Time{})
	chain, addr, reason := t.table.route(hello.ServerName)
	if reason != "" {
		t.lm.drop(reason)
		t.opts.Log.Debug("tcp passthrough refused", "listener", t.opts.Name, "sni", hello.ServerName, "reason", reason)
		return
	}
	timeout := t.opts.ConnectTimeout
	if d, ok := t.table.connectTimeout(chain.Cluster); ok && d > 0 {
		timeout = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	up, err := t.opts.Dial(ctx, addr)
	cancel()
	if err != nil {
		t.lm.drop(DropUpstreamError)
		t.opts.Log.Debug("tcp passthrough dial", "listener", t.opts.Name, "cluster", chain.Cluster, "err", err)
		return
	}
	if !t.loop.Track(up) {
		up.Close()
		return
	}
	defer func() { t.loop.Untrack(up); up.Close() }()
	if _, err := up.Write(read); err != nil {
		t.lm.drop(DropUpstreamError)
		return
	}
	t.lm.flow(chain.Cluster)
	t.lm.rx.Add(float64(len(read)))
	t.lm.active.Inc()
	defer t.lm.active.Dec()
	splice(down, up, t.lm)
}

// splice copies both ways until both directions end: a FIN either way is
// passed on as a half-close, as tcp_proxy does; an error closes both.
// io.Copy between two TCP connections uses splice(2) on Linux.
func splice(down, up *net.TCPConn, lm *listenerMetrics) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		n, err := io.Copy(up, down)
		lm.rx.Add(float64(n))
		if err != nil {
			up.Close()
			down.Close()
			return
		}
		up.CloseWrite()
	}()
	n, err := io.Copy(down, up)
	lm.tx.Add(float64(n))
	if err != nil {
		up.Close()
		down.Close()
	} else {
		down.CloseWrite()
	}
	wg.Wait()
}
