package h2

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"

	"github.com/quic-go/quic-go"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// QUICRestart is a QUIC listener's part in a hot restart
// (mesh/proxy/hotrestart): the process's connection IDs, and the gate its
// socket is read through.
type QUICRestart struct {
	IDs *hotrestart.ConnectionIDs
	// Gate wraps the listener's socket; it holds the gate for the parent's
	// forwarded packets when the socket was handed over.
	Gate func(*net.UDPConn) *hotrestart.Gate
}

// QUICListener is a pod's QUIC inbound on UDP 18008: the HTTP/3 twin of
// the TCP inbound. Its chains are selected by SNI and serve requests
// exactly as the TCP inbound's do (the same handler: routes to the pod's
// app clusters, XFCC, access log).
type QUICListener struct {
	*Listener
	conn *transparent.UDPConn
	in   *h3.Inbound
	gate *hotrestart.Gate
}

// ListenQUIC opens spec's UDP socket in its netns, on the address the
// listener names (the agent's is the pod's own, ARCHITECTURE.md,
// "On-demand twins"), and serves HTTP/3 on it.
func ListenQUIC(spec *listener.Spec, clusters Clusters, o Options) (*QUICListener, error) {
	if spec.HTTP == nil || spec.HTTP.QUIC == nil {
		return nil, fmt.Errorf("listener %s: not a QUIC listener", spec.Name)
	}
	conn, err := transparent.ListenUDP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true, From: o.From})
	if err != nil {
		return nil, err
	}
	base := &Listener{name: spec.Name, clusters: clusters, opts: o, stats: o.Metrics.HTTPListener(spec.Name)}
	base.cfg.Store(spec.HTTP)
	q := &QUICListener{Listener: base, conn: conn}
	var pc net.PacketConn = conn.UDPConn
	var ids quic.ConnectionIDGenerator
	if o.QUIC != nil {
		q.gate = o.QUIC.Gate(conn.UDPConn)
		pc, ids = q.gate, o.QUIC.IDs
	}
	q.in, err = h3.ServeInbound(pc, h3.InboundOptions{
		TLS:              q.serverConfig,
		EnableResumption: spec.HTTP.QUIC.EnableResumption,
		EnableEarlyData:  spec.HTTP.QUIC.EnableEarlyData,
		Handler:          http.HandlerFunc(q.serve),
		ConnContext:      withQUICConn,
		ConnectionIDs:    ids,
		Observer:         o.Metrics.QUICInbound(spec.Name),
		Trusted:          q.trusted,
		HeadersTooLarge:  func() { base.stats.ProtocolError(metrics.ProtocolH3HeadersTooLarge) },
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	return q, nil
}

// serverConfig is the handshake's chain's TLS configuration; a handshake
// no chain takes is refused and counted, as on the TCP inbound.
func (q *QUICListener) serverConfig(hello *tls.ClientHelloInfo) (*tls.Config, error) {
	chain, ok := q.cfg.Load().Select(hello.ServerName)
	if !ok {
		q.opts.Metrics.HTTPRefused(q.name, metrics.RefusedNoChain)
		return nil, fmt.Errorf("no filter chain matches server name %q", hello.ServerName)
	}
	return chain.TLS.ServerConfig(q.opts.Store), nil
}

// trusted says whether the listener's chains have a bundle for td: a
// refused peer from elsewhere is counted as foreign.
func (q *QUICListener) trusted(td spiffeid.TrustDomain) bool {
	for _, c := range q.cfg.Load().Chains {
		if q.opts.Store.HasBundle(c.TLS.ValidationSecret, td) {
			return true
		}
	}
	return false
}

// quicConn is what one QUIC connection's requests share: the handler of
// its downstream, made at its first request after the handshake. The TCP
// inbound makes it once per accepted connection; made per request, it
// would select the chain, parse the peer's SPIFFE ID and look up the
// listener's own certificate again for every stream, and a listener
// update would move a live connection to another chain, where Envoy
// drains it on the chain it was accepted with.
type quicConn struct {
	mu sync.Mutex
	h  http.Handler
}

type quicConnKey struct{}

func withQUICConn(ctx context.Context, _ *quic.Conn) context.Context {
	return context.WithValue(ctx, quicConnKey{}, &quicConn{})
}

// serve hands a request to the TCP inbound's handler, with the chain its
// connection's SNI selected and the verified peer.
func (q *QUICListener) serve(w http.ResponseWriter, r *http.Request) {
	qc, _ := r.Context().Value(quicConnKey{}).(*quicConn)
	if qc == nil {
		// Not a connection this listener's server accepted.
		http.Error(w, "no QUIC connection state", http.StatusInternalServerError)
		return
	}
	h, ok := qc.handler(q, r.TLS)
	if !ok {
		http.Error(w, "no filter chain", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// handler is the connection's handler, made once the handshake is
// complete: a 0-RTT request, before it, is served with one of its own.
func (qc *quicConn) handler(q *QUICListener, cs *tls.ConnectionState) (http.Handler, bool) {
	qc.mu.Lock()
	defer qc.mu.Unlock()
	if qc.h != nil {
		return qc.h, true
	}
	chain, ok := q.cfg.Load().Select(cs.ServerName)
	if !ok {
		return nil, false
	}
	peer, _ := mtls.PeerID(*cs)
	own := ""
	if cert, err := q.opts.Store.Certificate(chain.TLS.CertSecret); err == nil {
		own = leafURI(cert)
	}
	h := q.handler(newDownstream(chain, peer.String(), own))
	if cs.HandshakeComplete {
		qc.h = h
	}
	return h, true
}

// Addr is the bound address: the embedded Listener's has no TCP socket.
func (q *QUICListener) Addr() netip.AddrPort { return q.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Drain stops accepting connections and shuts the open ones gracefully
// (GOAWAY; requests in flight finish, and what is open when ctx ends is
// closed); the socket stays read, and every packet not for one of this
// process's connections goes to forward.
func (q *QUICListener) Drain(ctx context.Context, forward func(hotrestart.Packet) error) error {
	if q.gate == nil {
		return fmt.Errorf("listener %s: no hot restart gate", q.name)
	}
	q.gate.Forward(forward)
	q.in.Drain(ctx)
	return nil
}

// Resume serves again after Drain.
func (q *QUICListener) Resume() error {
	if q.gate != nil {
		q.gate.Forward(nil)
	}
	return q.in.Resume()
}

// SyscallConn is the socket's, to hand it over.
func (q *QUICListener) SyscallConn() (syscall.RawConn, error) { return q.conn.SyscallConn() }

// Close stops serving and closes the socket.
func (q *QUICListener) Close() error {
	err := q.in.Close()
	if cerr := q.conn.Close(); err == nil {
		err = cerr
	}
	return err
}
