package h2

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// handshakes is the destination's count of the QUIC connections it
// accepted: an h3.Observer.
type handshakes struct {
	mu sync.Mutex
	n  int
}

func (h *handshakes) Started()              {}
func (h *handshakes) Refused(string)        {}
func (h *handshakes) Dropped(string)        {}
func (h *handshakes) Accepted(string, bool) { h.mu.Lock(); h.n++; h.mu.Unlock() }
func (h *handshakes) count() int            { h.mu.Lock(); defer h.mu.Unlock(); return h.n }

// TestTwinPoolsPerDownstreamWhenTold: twelve downstream connections' requests
// through one twin open one QUIC connection at the destination, and twelve
// with connection_pool_per_downstream_connection, whose connections go
// when their downstream closes. Counted at the destination's inbound.
func TestTwinPoolsPerDownstreamWhenTold(t *testing.T) {
	const downstreams = 12
	for _, c := range []struct {
		perDownstream bool
		want          int
	}{{false, 1}, {true, downstreams}} {
		t.Run(fmt.Sprintf("per_downstream=%v", c.perDownstream), func(t *testing.T) {
			pool, tw, ep, dst := twinRig(t, c.perDownstream)
			ds := make([]*downstream, downstreams)
			for i := range ds {
				ds[i] = &downstream{}
				for range 2 {
					req, _ := http.NewRequest(http.MethodGet, "http://api.demo.mesh.test/", nil)
					if c.perDownstream {
						req = withDownstream(req, ds[i])
					}
					resp, err := pool.RoundTrip(tw, ep, nil, req)
					if err != nil {
						t.Fatalf("downstream %d: %v", i, err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
			if n := dst.count(); n != c.want {
				t.Fatalf("the destination accepted %d QUIC connections for %d downstreams, want %d", n, downstreams, c.want)
			}
			for _, d := range ds {
				pool.releaseDownstream(d)
			}
			pool.mu.Lock()
			left := len(pool.twins.clients)
			pool.mu.Unlock()
			if want := map[bool]int{false: 1, true: 0}[c.perDownstream]; left != want {
				t.Fatalf("%d twin clients left after every downstream closed, want %d", left, want)
			}
		})
	}
	// The field on a cluster the twin pool does not serve is refused,
	// not ignored.
	h2c, err := agentmtls.H2ClusterFor(agentmtls.Mesh{Domain: "mesh.test"}, agentmtls.Service{Name: "api", Namespace: "demo", Port: 8080, Accounts: []string{"spiffe://aether.test/ns/demo/sa/api"}}, agentmtls.Upstream{})
	if err != nil {
		t.Fatal(err)
	}
	h2c.ConnectionPoolPerDownstreamConnection = true
	if _, err := cluster.FromProto(h2c); err == nil {
		t.Fatal("connection_pool_per_downstream_connection on an h2 cluster was accepted")
	}
}

// twinRig is web's twin of api, pointed at an HTTP/3 inbound on loopback
// that counts its handshakes.
func twinRig(t *testing.T, perDownstream bool) (*Pool, *cluster.Cluster, cluster.Endpoint, *handshakes) {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	store := secret.NewStore()
	put := func(s any) {
		var sec *secret.Secret
		switch v := s.(type) {
		case *x509svid.SVID:
			p, err := agentmtls.SVIDSecret(v)
			if err != nil {
				t.Fatal(err)
			}
			sec, err = secret.FromProto(p)
			if err != nil {
				t.Fatal(err)
			}
		case *x509bundle.Bundle:
			p, err := agentmtls.BundleSecret([]*x509bundle.Bundle{v})
			if err != nil {
				t.Fatal(err)
			}
			sec, err = secret.FromProto(p)
			if err != nil {
				t.Fatal(err)
			}
		}
		store.Apply([]*secret.Secret{sec}, nil)
	}
	issue := func(sa string) *x509svid.SVID {
		s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: sa}, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	put(ca.Bundle())
	put(issue("web"))
	api := issue("api")

	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	dst := &handshakes{}
	cert := tls.Certificate{PrivateKey: api.PrivateKey, Leaf: api.Certificates[0], Certificate: [][]byte{api.Certificates[0].Raw}}
	in, err := h3.ServeInbound(conn, h3.InboundOptions{
		TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAnyClientCert}, nil
		},
		Handler:  http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
		Observer: dst,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })

	tc, err := eastwest.TwinCluster(eastwest.Twin{
		Twin: xdsnames.Twin{Service: "api", Namespace: "demo", SA: "web", SANamespace: "demo"},
		Port: 8080, Domain: "mesh.test", SourceID: "spiffe://aether.test/ns/demo/sa/web", Accounts: []string{"spiffe://aether.test/ns/demo/sa/api"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tc.ConnectionPoolPerDownstreamConnection = perDownstream
	spec, err := cluster.FromProto(tc)
	if err != nil {
		t.Fatal(err)
	}
	pool := &Pool{Store: store, Metrics: metrics.New()}
	t.Cleanup(pool.Close)
	ep := cluster.Endpoint{Addr: netip.MustParseAddrPort(conn.LocalAddr().String()), Weight: 1}
	return pool, cluster.New(spec), ep, dst
}
