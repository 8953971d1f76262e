package h2

import (
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
	clients map[string]*twinClient
}

type twinClient struct {
	spec *cluster.Spec
	up   *h3.Upstream
}

// roundTripH3 sends req to ep of twin c. A twin presents its cluster's one
// certificate (there is no per-connection selector on QUIC, Q2a), so the
// downstream's filter state plays no part in the connection it rides.
func (p *Pool) roundTripH3(c *cluster.Cluster, ep cluster.Endpoint, req *http.Request) (*http.Response, error) {
	up, err := p.twin(c.Spec)
	if err != nil {
		return nil, err
	}
	return up.RoundTrip(req, ep.Addr)
}

func (p *Pool) twin(s *cluster.Spec) (*h3.Upstream, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.twins.tr == nil {
		conn, err := transparent.ListenUDP(p.UpstreamNetns, netip.AddrPortFrom(netip.IPv4Unspecified(), 0), transparent.Options{Mark: p.Mark})
		if err != nil {
			return nil, fmt.Errorf("twin %s: upstream QUIC socket: %w", s.Name, err)
		}
		p.twins.tr = &quic.Transport{Conn: conn.UDPConn}
		p.twins.clients = map[string]*twinClient{}
	}
	if tc, ok := p.twins.clients[s.Name]; ok && tc.spec == s {
		return tc.up, nil
	} else if ok {
		// The twin changed (a new certificate name, say): its old
		// connections go with its old client.
		_ = tc.up.Close()
	}
	up := h3.NewUpstreamTLS(p.twins.tr, h3.WithNameCheck(s.TLS.ClientConfig(p.Store, "")))
	p.twins.clients[s.Name] = &twinClient{spec: s, up: up}
	return up, nil
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
