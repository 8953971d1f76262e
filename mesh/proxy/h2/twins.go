package h2

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"

	"github.com/quic-go/quic-go"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// twinPool is the pool's HTTP/3 half: one client per twin cluster, each
// keeping one QUIC connection per endpoint for every request (#1021), all
// on one UDP socket in the upstream netns.
type twinPool struct {
	tr      *quic.Transport
	clients map[twinKey]*twinClient
	// perDownstream counts the clients keyed by a downstream, so that
	// a closing downstream looks through the map only when there are any.
	perDownstream int
}

// twinKey is a twin's name, and the downstream connection when the twin
// pools per downstream connection (connection_pool_per_downstream_connection,
// which the mesh never sets: a suite's control does).
type twinKey struct {
	name       string
	downstream *downstream
}

type downstreamKey struct{}

// withDownstream marks req as sent on behalf of downstream d, for a twin
// that pools per downstream connection.
func withDownstream(req *http.Request, d *downstream) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), downstreamKey{}, d))
}

type twinClient struct {
	spec *cluster.Spec
	up   *h3.Upstream
}

// roundTripH3 sends req to ep of twin c. A twin presents its cluster's one
// certificate (there is no per-connection selector on QUIC, Q2a), so the
// downstream's filter state plays no part in the connection it rides.
func (p *Pool) roundTripH3(c *cluster.Cluster, ep cluster.Endpoint, req *http.Request) (*http.Response, error) {
	k := twinKey{name: c.Spec.Name}
	if c.Spec.PerDownstreamPool {
		if k.downstream, _ = req.Context().Value(downstreamKey{}).(*downstream); k.downstream == nil {
			return nil, fmt.Errorf("twin %s pools per downstream connection, and the request names none", c.Spec.Name)
		}
	}
	up, err := p.twin(c.Spec, k)
	if err != nil {
		return nil, err
	}
	return up.RoundTrip(req, ep.Addr)
}

func (p *Pool) twin(s *cluster.Spec, k twinKey) (*h3.Upstream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.twins.tr == nil {
		conn, err := transparent.ListenUDP(p.UpstreamNetns, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), transparent.Options{Mark: p.Mark})
		if err != nil {
			return nil, fmt.Errorf("twin %s: upstream QUIC socket: %w", s.Name, err)
		}
		p.twins.tr = &quic.Transport{Conn: conn.UDPConn}
		p.twins.clients = map[twinKey]*twinClient{}
	}
	if tc, ok := p.twins.clients[k]; ok && tc.spec == s {
		return tc.up, nil
	} else if ok {
		// The twin changed (a new certificate name, say): its old
		// connections go with its old client.
		_ = tc.up.Close()
	}
	up := h3.NewUpstreamTLS(p.twins.tr, h3.WithNameCheck(s.TLS.ClientConfig(p.Store, "")))
	if _, ok := p.twins.clients[k]; !ok && k.downstream != nil {
		p.twins.perDownstream++
	}
	p.twins.clients[k] = &twinClient{spec: s, up: up}
	return up, nil
}

// releaseDownstream closes the twin connections downstream d had of its
// own, once d has closed, as Envoy drains a per-downstream pool with its
// connection.
func (p *Pool) releaseDownstream(d *downstream) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.twins.perDownstream == 0 {
		return
	}
	for k, tc := range p.twins.clients {
		if k.downstream == d {
			_ = tc.up.Close()
			delete(p.twins.clients, k)
			p.twins.perDownstream--
		}
	}
}

func (p *Pool) closeTwins() {
	for _, tc := range p.twins.clients {
		_ = tc.up.Close()
	}
	if p.twins.tr != nil {
		_ = p.twins.tr.Close()
		_ = p.twins.tr.Conn.Close()
	}
	p.twins = twinPool{}
}
