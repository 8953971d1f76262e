package h2

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"

	"github.com/quic-go/quic-go"

	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// QUICListener is a pod's QUIC inbound on UDP 18008: the HTTP/3 twin of
// the TCP inbound. Its chains are selected by SNI and serve requests
// exactly as the TCP inbound's do (the same handler: routes to the pod's
// app clusters, XFCC, access log).
type QUICListener struct {
	*Listener
	conn *transparent.UDPConn
	in   *h3.Inbound
}

// ListenQUIC opens spec's UDP socket in its netns (bound to the unspecified
// address, so quic-go answers from the address each packet was sent to)
// and serves HTTP/3 on it.
func ListenQUIC(spec *listener.Spec, clusters Clusters, o Options) (*QUICListener, error) {
	if spec.HTTP == nil || spec.HTTP.QUIC == nil {
		return nil, fmt.Errorf("listener %s: not a QUIC listener", spec.Name)
	}
	conn, err := transparent.ListenUDP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true})
	if err != nil {
		return nil, err
	}
	base := &Listener{name: spec.Name, clusters: clusters, opts: o, stats: o.Metrics.HTTPListener(spec.Name)}
	base.cfg.Store(spec.HTTP)
	q := &QUICListener{Listener: base, conn: conn}
	q.in, err = h3.ServeInbound(conn.UDPConn, h3.InboundOptions{
		TLS:              q.serverConfig,
		EnableResumption: spec.HTTP.QUIC.EnableResumption,
		EnableEarlyData:  spec.HTTP.QUIC.EnableEarlyData,
		Handler:          http.HandlerFunc(q.serve),
		ConnContext:      withQUICConn,
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
	h := q.handler(&downstream{chain: chain, peer: peer.String(), own: own})
	if cs.HandshakeComplete {
		qc.h = h
	}
	return h, true
}

// Addr is the bound address: the embedded Listener's has no TCP socket.
func (q *QUICListener) Addr() netip.AddrPort { return q.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Close stops serving and closes the socket.
func (q *QUICListener) Close() error {
	err := q.in.Close()
	if cerr := q.conn.Close(); err == nil {
		err = cerr
	}
	return err
}
