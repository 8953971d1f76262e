package h2

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/quic-go/quic-go"

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

// ListenQUIC opens spec's UDP socket in its netns (bound to the unspecified
// address, so quic-go answers from the address each packet was sent to)
// and serves HTTP/3 on it.
func ListenQUIC(spec *listener.Spec, clusters Clusters, o Options) (*QUICListener, error) {
	if spec.HTTP == nil || spec.HTTP.QUIC == nil {
		return nil, fmt.Errorf("listener %s: not a QUIC listener", spec.Name)
	}
	conn, err := transparent.ListenUDP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true, From: o.From})
	if err != nil {
		return nil, err
	}
	base := &Listener{name: spec.Name, clusters: clusters, opts: o}
	base.cfg.Store(spec.HTTP)
	o.Metrics.HTTPListener(spec.Name)
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
		ConnectionIDs:    ids,
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

// serve hands a request to the TCP inbound's handler, with the chain its
// connection's SNI selected and the verified peer.
func (q *QUICListener) serve(w http.ResponseWriter, r *http.Request) {
	chain, ok := q.cfg.Load().Select(r.TLS.ServerName)
	if !ok {
		http.Error(w, "no filter chain", http.StatusServiceUnavailable)
		return
	}
	peer, _ := mtls.PeerID(*r.TLS)
	own := ""
	if cert, err := q.opts.Store.Certificate(chain.TLS.CertSecret); err == nil {
		own = leafURI(cert)
	}
	q.handler(&downstream{chain: chain, peer: peer.String(), own: own}).ServeHTTP(w, r)
}

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
