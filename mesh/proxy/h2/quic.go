package h2

import (
	"crypto/tls"
	"fmt"
	"net/http"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

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

// ListenQUIC opens spec's UDP socket in its netns, on the address the
// listener names (the agent's is the pod's own, ARCHITECTURE.md,
// "On-demand twins"), and serves HTTP/3 on it.
func ListenQUIC(spec *listener.Spec, clusters Clusters, o Options) (*QUICListener, error) {
	if spec.HTTP == nil || spec.HTTP.QUIC == nil {
		return nil, fmt.Errorf("listener %s: not a QUIC listener", spec.Name)
	}
	conn, err := transparent.ListenUDP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true})
	if err != nil {
		return nil, err
	}
	base := &Listener{name: spec.Name, clusters: clusters, opts: o}
	base.cfg.Store(spec.HTTP)
	o.Metrics.HTTPListener(spec.Name)
	q := &QUICListener{Listener: base, conn: conn}
	q.in, err = h3.ServeInbound(conn.UDPConn, h3.InboundOptions{
		TLS:              q.serverConfig,
		EnableResumption: spec.HTTP.QUIC.EnableResumption,
		EnableEarlyData:  spec.HTTP.QUIC.EnableEarlyData,
		Handler:          http.HandlerFunc(q.serve),
		Observer:         o.Metrics.QUICInbound(spec.Name),
		Trusted:          q.trusted,
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

// Close stops serving and closes the socket.
func (q *QUICListener) Close() error {
	err := q.in.Close()
	if cerr := q.conn.Close(); err == nil {
		err = cerr
	}
	return err
}
