package agent

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/identity/federation"
	proxymtls "github.com/aether-mesh/aether/mesh/proxy/mtls"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// staticBundles is a fixed federated set.
type staticBundles []*x509bundle.Bundle

func (s staticBundles) Bundles() []*x509bundle.Bundle { return s }
func (s staticBundles) Subscribe() (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

// trustDomainPath is testHTTPPath in trust domain td, with its CA.
func trustDomainPath(t testing.TB, st *registry.State, node, td string) (*HTTPPath, *identity.CA) {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: td, MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	rot, err := identity.NewRotator(ca, store, identity.RotatorConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rot.Keep(LocalAccounts(st, node)); err != nil {
		t.Fatal(err)
	}
	return &HTTPPath{TrustDomain: ca.TrustDomain(), MeshDomain: "mesh.test", AccessLog: "/var/log/aether/access-" + node + ".log", Identities: store}, ca
}

func trustDomainsOf(t testing.TB, s *tlsv3.Secret) []string {
	t.Helper()
	var cfg tlsv3.SPIFFECertValidatorConfig
	if err := s.GetValidationContext().GetCustomValidatorConfig().GetTypedConfig().UnmarshalTo(&cfg); err != nil {
		t.Fatalf("trust bundle secret: %v", err)
	}
	var out []string
	for _, td := range cfg.GetTrustDomains() {
		out = append(out, td.GetName())
	}
	return out
}

// A federated trust domain is one more entry of the trust bundle secret's
// SPIFFE validator, sorted with the local one, and changes nothing else:
// every other resource is the single-cluster build's. The secret (bundles
// redacted) is testdata/federated-trust-bundle.json.
func TestFederatedTrustBundle(t *testing.T) {
	st, err := registry.ParseScenario("mtls", readFixture(t, "mtls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h, _ := trustDomainPath(t, st, "node-b", "b.test")
	peer, err := identity.NewCA(identity.CAConfig{TrustDomain: "a.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	build := func(f FederatedBundles) map[resource.Type][]types.Resource {
		t.Helper()
		b := NewBuilder("node-b", constants.CaptureTProxy)
		hp := *h
		hp.Federated = f
		b.HTTP = &hp
		out, err := b.Build(st, "v1")
		if err != nil {
			t.Fatal(err)
		}
		if err := validate.Check(out.Resources); err != nil {
			t.Fatalf("gates: %v", err)
		}
		return out.Resources
	}
	single, federated := build(nil), build(staticBundles{peer.Bundle()})

	bundleOf := func(res map[resource.Type][]types.Resource) *tlsv3.Secret {
		for _, r := range res[resource.SecretType] {
			if s := r.(*tlsv3.Secret); s.GetName() == xdsnames.TrustBundleSecret {
				return s
			}
		}
		t.Fatal("no trust bundle secret")
		return nil
	}
	if got := strings.Join(trustDomainsOf(t, bundleOf(single)), ","); got != "b.test" {
		t.Fatalf("single cluster: trust domains %s, want b.test", got)
	}
	fb := bundleOf(federated)
	if got := strings.Join(trustDomainsOf(t, fb), ","); got != "a.test,b.test" {
		t.Fatalf("federated: trust domains %s, want a.test,b.test", got)
	}
	for typ, list := range federated {
		want := byName(single[typ])
		if len(list) != len(want) {
			t.Fatalf("%s: %d resources federated, %d single", typ, len(list), len(want))
		}
		for _, r := range list {
			if n := resourceName(r); n != xdsnames.TrustBundleSecret && !proto.Equal(r, want[n]) {
				t.Errorf("%s %q differs with a federated trust domain", typ, n)
			}
		}
	}
	dump, err := DumpResources("node-b", constants.CaptureTProxy, "", map[resource.Type][]types.Resource{resource.SecretType: {fb}})
	if err != nil {
		t.Fatal(err)
	}
	if err := golden.Check(filepath.Join("testdata", "federated-trust-bundle.json"), "generated trust bundle secret", dump); err != nil {
		t.Error(err)
	}

	// The local trust domain is the local CA's alone.
	b := NewBuilder("node-b", constants.CaptureTProxy)
	hp := *h
	impostor, err := identity.NewCA(identity.CAConfig{TrustDomain: "b.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	hp.Federated = staticBundles{impostor.Bundle()}
	b.HTTP = &hp
	if _, err := b.Build(st, "v1"); err == nil || !strings.Contains(err.Error(), `claims the local trust domain "b.test"`) {
		t.Fatalf("federated bundle of the local trust domain: err %v, want a refusal naming it", err)
	}
}

// proxySide compiles what the agent serves the way the proxy does: every
// secret into a secret.Store, and the inbound listener's TLS chain into
// the Go server config its handshakes use.
func proxySide(t *testing.T, a *Agent, listener string) (*tls.Config, *secret.Store) {
	t.Helper()
	res := served(a)
	store := secret.NewStore()
	var put []*secret.Secret
	for _, r := range res[resource.SecretType] {
		s, err := secret.FromProto(r.(*tlsv3.Secret))
		if err != nil {
			t.Fatal(err)
		}
		put = append(put, s)
	}
	store.Apply(put, nil)
	l, ok := res[resource.ListenerType][listener].(*listenerv3.Listener)
	if !ok {
		t.Fatalf("no listener %s served", listener)
	}
	for i, fc := range l.GetFilterChains() {
		if fc.GetTransportSocket() == nil {
			continue
		}
		d, err := proxymtls.DownstreamFromProto(fc.GetTransportSocket(), fmt.Sprintf("%s.filter_chains[%d].transport_socket", listener, i))
		if err != nil {
			t.Fatal(err)
		}
		return d.ServerConfig(store), store
	}
	t.Fatalf("listener %s has no TLS chain", listener)
	return nil, nil
}

// handshakeLoopback runs one TLS handshake over loopback TCP and returns
// the peer ID the server verified, with each side's error.
func handshakeLoopback(t *testing.T, client, server *tls.Config) (spiffeid.ID, error, error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	type result struct {
		id  spiffeid.ID
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		ts := tls.Server(c, server)
		if err := ts.Handshake(); err != nil {
			done <- result{err: err}
			return
		}
		id, _ := proxymtls.PeerID(ts.ConnectionState())
		_, err = ts.Write([]byte("k"))
		done <- result{id: id, err: err}
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	tc := tls.Client(c, client)
	cerr := tc.Handshake()
	if cerr == nil {
		// TLS 1.3: the client is done before the server has checked its
		// certificate; the server's byte, or its alert, is its verdict.
		_, cerr = tc.Read(make([]byte, 1))
	}
	c.Close()
	r := <-done
	return r.id, cerr, r.err
}

// (a) A client of cluster 1 (trust domain a.test, its own CA) calls a
// pod's inbound in cluster 2 (b.test, its own CA), through the TLS config
// the proxy compiles from what cluster 2's agent serves. Without
// federation the inbound refuses it, naming the unknown trust domain;
// once the agent's fetcher has fetched a.test's bundle from a.test's own
// bundle endpoint on loopback, the agent republishes the trust bundle and
// the same handshake is accepted, the inbound seeing the client's own
// a.test ID.
func TestFederationAdmitsTheOtherTrustDomain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Cluster 1: its CA, its bundle endpoint, a client's SVID.
	caA, err := identity.NewCA(identity.CAConfig{TrustDomain: "a.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	storeA := identity.NewStore()
	storeA.PutBundle(caA.Bundle())
	endpointSVID, err := identity.NewEndpointSVID(caA, federation.EndpointID(caA.TrustDomain()), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := federation.NewServer(federation.ServerConfig{TrustDomain: caA.TrustDomain(), Bundles: storeA, SVID: endpointSVID, RefreshHint: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	el, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served1 := make(chan error, 1)
	go func() { served1 <- srv.Serve(ctx, el) }()
	defer func() { cancel(); <-served1 }()
	clientSVID, err := caA.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "sa-a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}

	// Cluster 2: node-b's agent, in b.test, federating a.test.
	st, err := registry.ParseScenario("mtls", readFixture(t, "mtls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h, caB := trustDomainPath(t, st, "node-b", "b.test")
	reg := prometheus.NewRegistry()
	fetcher, err := federation.NewFetcher(federation.FetcherConfig{Local: caB.TrustDomain(), Registerer: reg,
		MinRefresh: time.Second, Peers: []federation.Peer{{TrustDomain: caA.TrustDomain(), URL: "https://" + el.Addr().String() + "/", Bootstrap: caA.Bundle()}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Federated = fetcher
	a := quietHTTPAgent(t, "node-b", "", h)
	go a.Run(ctx, oneState{st})
	first := waitTrustDomains(t, a, "b.test", nil)

	client := tlsconfig.MTLSClientConfig(clientSVID, caB.Bundle(), tlsconfig.AuthorizeMemberOf(caB.TrustDomain()))
	server, _ := proxySide(t, a, "http-inbound~demo~dst-0")
	_, _, serr := handshakeLoopback(t, client, server)
	if serr == nil || !strings.Contains(serr.Error(), `trust domain "a.test"`) {
		t.Fatalf("without federation: server err %v, want a refusal naming trust domain a.test", serr)
	}
	t.Logf("without federation the inbound refuses: %v", serr)

	fetched := make(chan struct{})
	go func() { _ = fetcher.Run(ctx); close(fetched) }()
	defer func() { cancel(); <-fetched }()
	waitTrustDomains(t, a, "a.test,b.test", first)
	server, _ = proxySide(t, a, "http-inbound~demo~dst-0")
	id, cerr, serr := handshakeLoopback(t, client, server)
	if cerr != nil || serr != nil {
		t.Fatalf("with a.test federated: client err %v, server err %v", cerr, serr)
	}
	if id != clientSVID.ID || id.String() != "spiffe://a.test/ns/demo/sa/sa-a" {
		t.Fatalf("the inbound saw peer %s, want the client's own %s", id, clientSVID.ID)
	}

	// Cluster 1 adds a root; its SVIDs verify in cluster 2 once the
	// fetcher has refreshed (the hint is a second) and the agent has
	// republished, and not before.
	next, err := identity.NewCA(identity.CAConfig{TrustDomain: "a.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	nextSVID, err := next.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "sa-b"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	nextClient := tlsconfig.MTLSClientConfig(nextSVID, caB.Bundle(), tlsconfig.AuthorizeMemberOf(caB.TrustDomain()))
	if _, _, serr := handshakeLoopback(t, nextClient, server); serr == nil {
		t.Fatal("an SVID of a root cluster 1 has not published is accepted")
	}
	current := waitTrustDomains(t, a, "a.test,b.test", nil)
	rotated := caA.Bundle()
	rotated.AddX509Authority(next.Bundle().X509Authorities()[0])
	storeA.PutBundle(rotated)
	waitTrustDomains(t, a, "a.test,b.test", current)
	server, _ = proxySide(t, a, "http-inbound~demo~dst-0")
	for _, c := range []struct {
		client *tls.Config
		want   spiffeid.ID
	}{{client, clientSVID.ID}, {nextClient, nextSVID.ID}} {
		if id, cerr, serr := handshakeLoopback(t, c.client, server); cerr != nil || serr != nil || id != c.want {
			t.Fatalf("after cluster 1's rotation: peer %s (client err %v, server err %v), want %s", id, cerr, serr, c.want)
		}
	}
}

// waitTrustDomains waits until a serves a trust bundle secret listing
// want (comma-joined), other than not, and returns it.
func waitTrustDomains(t *testing.T, a *Agent, want string, not *tlsv3.Secret) *tlsv3.Secret {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, ok := served(a)[resource.SecretType][xdsnames.TrustBundleSecret].(*tlsv3.Secret)
		if ok && !proto.Equal(s, not) && strings.Join(trustDomainsOf(t, s), ",") == want {
			return s
		}
		if time.Now().After(deadline) {
			have := ""
			if ok {
				have = strings.Join(trustDomainsOf(t, s), ",")
			}
			t.Fatalf("trust bundle secret lists %q, want %q", have, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
