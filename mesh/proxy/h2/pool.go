package h2

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// Pool holds the upstream connections of every HTTP cluster. As in Envoy,
// a connection is reused by any request with the same pool key, and the key
// is the cluster, the host and the hash of the downstream's shared filter
// state objects that are Hashable, nothing else. The certificate a TLS
// connection presents is chosen once, at its handshake, from the filter
// state of the request that opened it (ARCHITECTURE.md, "The mTLS HTTP/2
// path", why per-source identity holds).
type Pool struct {
	Store         *secret.Store
	UpstreamNetns string
	Mark          uint32
	Metrics       *metrics.Metrics

	mu sync.Mutex
	// per cluster name: the spec the transports were made for, and one
	// transport per hashed filter state (each pools per host itself).
	clusters map[string]*clusterPool
	// twins are the HTTP/3 clusters' clients (twins.go).
	twins twinPool
}

type clusterPool struct {
	spec       *cluster.Spec
	transports map[string]*http.Transport
}

// dial is what the request that opens a connection tells the dialer.
type dial struct {
	endpoint cluster.Endpoint
	// source is the value of the mapper's filter state object, shared with
	// upstream; empty when the downstream has none.
	source string
}

type dialKey struct{}

// RoundTrip sends req to ep of c on behalf of a downstream connection with
// filter state fs.
func (p *Pool) RoundTrip(c *cluster.Cluster, ep cluster.Endpoint, fs []hcm.FilterState, req *http.Request) (*http.Response, error) {
	k := upstreamKeyOf(fs)
	if !c.Spec.QUIC {
		req = req.WithContext(context.WithValue(req.Context(), dialKey{}, dial{endpoint: ep, source: k.source}))
	}
	return p.roundTrip(c, ep, k, req)
}

// roundTrip is RoundTrip for a request whose context already carries its
// dial (an HTTP/2 cluster's) and, for a twin pooled per downstream, its
// downstream.
func (p *Pool) roundTrip(c *cluster.Cluster, ep cluster.Endpoint, k upstreamKey, req *http.Request) (*http.Response, error) {
	if c.Spec.QUIC {
		return p.roundTripH3(c, ep, req)
	}
	return p.transport(c.Spec, k.hash).RoundTrip(req)
}

// upstreamKey is what a downstream's filter state gives its upstream
// requests: the value of the mapper's object shared with upstream, and the
// filter state's part of the pool key.
type upstreamKey struct {
	source, hash string
}

func upstreamKeyOf(fs []hcm.FilterState) upstreamKey {
	var k upstreamKey
	for _, f := range fs {
		if f.Shared && f.Key == mtls.MapperKey {
			k.source = f.Value
		}
	}
	k.hash = poolHash(fs)
	return k
}

// poolHash is the filter state's part of the pool key: the values of the
// shared objects that are Hashable.
func poolHash(fs []hcm.FilterState) string {
	var b []byte
	for _, f := range fs {
		if f.Shared && f.Hashable {
			b = append(b, f.Key...)
			b = append(b, '=')
			b = strconv.AppendQuote(b, f.Value)
			b = append(b, ';')
		}
	}
	return string(b)
}

// transport is the one of cluster s for the pool key's filter state part h.
func (p *Pool) transport(s *cluster.Spec, h string) *http.Transport {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.clusters == nil {
		p.clusters = map[string]*clusterPool{}
	}
	cp := p.clusters[s.Name]
	if cp == nil || cp.spec != s {
		// A changed cluster drains its old connections, as Envoy drains a
		// cluster's pools when the cluster is updated.
		if cp != nil {
			for _, t := range cp.transports {
				t.CloseIdleConnections()
			}
		}
		cp = &clusterPool{spec: s, transports: map[string]*http.Transport{}}
		p.clusters[s.Name] = cp
	}
	if t := cp.transports[h]; t != nil {
		return t
	}
	t := p.newTransport(s)
	cp.transports[h] = t
	return t
}

// The upstream HTTP/2 health check. A peer partitioned away sends no FIN
// and no RST, and a connection with no stream in flight has nothing
// unacknowledged for the kernel to give up on, so without a check the
// pool holds it (and its socket) until the idle timeout, an hour, and every
// fault adds more. A PING after sendPingTimeout with no frame read, and
// the connection closed when none comes back within pingTimeout (Go's
// own default for it), bounds a dead connection at 45 s. Envoy sends no
// keepalive PING unless connection_keepalive is set; this is that
// option, always on.
var (
	sendPingTimeout = 30 * time.Second
	pingTimeout     = 15 * time.Second
)

func (p *Pool) newTransport(s *cluster.Spec) *http.Transport {
	t := &http.Transport{
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     s.IdleTimeout,
		// A proxy forwards Accept-Encoding as its client sent it; the
		// transport would otherwise ask for gzip and inflate the answer.
		DisableCompression: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return p.dialTCP(ctx, s)
		},
	}
	if s.TLS == nil {
		return t
	}
	t.ForceAttemptHTTP2 = s.HTTP == cluster.HTTP2
	t.Protocols = new(http.Protocols)
	t.Protocols.SetHTTP2(s.HTTP == cluster.HTTP2)
	t.Protocols.SetHTTP1(s.HTTP != cluster.HTTP2)
	t.HTTP2 = &http.HTTP2Config{SendPingTimeout: sendPingTimeout, PingTimeout: pingTimeout}
	t.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := p.dialTCP(ctx, s)
		if err != nil {
			return nil, err
		}
		d, _ := ctx.Value(dialKey{}).(dial)
		cfg := s.TLS.ClientConfig(p.Store, d.source)
		var identity string
		get := cfg.GetClientCertificate
		cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := get(cri)
			identity = leafURI(cert)
			return cert, err
		}
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, fmt.Errorf("cluster %q: TLS handshake with %s: %w", s.Name, d.endpoint.Addr, err)
		}
		p.Metrics.HTTPUpstreamConn(s.Name, identity)
		return tc, nil
	}
	return t
}

// leafURI is the URI SAN of the certificate a handshake presents.
func leafURI(c *tls.Certificate) string {
	if c == nil || c.Leaf == nil || len(c.Leaf.URIs) == 0 {
		return ""
	}
	return c.Leaf.URIs[0].String()
}

func (p *Pool) dialTCP(ctx context.Context, s *cluster.Spec) (net.Conn, error) {
	d, ok := ctx.Value(dialKey{}).(dial)
	if !ok {
		return nil, fmt.Errorf("cluster %q: dial without an endpoint", s.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, s.ConnectTimeout)
	defer cancel()
	netns := d.endpoint.Netns
	if netns == "" {
		netns = p.UpstreamNetns
	}
	return transparent.DialTCP(ctx, netns, d.endpoint.Addr, transparent.Options{Mark: p.Mark})
}

// Close closes every idle upstream connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, cp := range p.clusters {
		for _, t := range cp.transports {
			t.CloseIdleConnections()
		}
	}
	p.closeTwins()
}
