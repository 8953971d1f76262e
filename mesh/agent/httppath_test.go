package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
)

// oneState is a registry source that sends one State and then waits.
type oneState struct{ st *registry.State }

func (s oneState) Watch(ctx context.Context) <-chan registry.Update {
	ch := make(chan registry.Update, 1)
	ch <- registry.Update{State: s.st}
	go func() { <-ctx.Done(); close(ch) }()
	return ch
}

// A rotated SVID is pushed without a registry change: the identity
// source's notification rebuilds the last State, and the served secret is
// the new one.
func TestRotationPushesTheNewSecret(t *testing.T) {
	st, err := registry.ParseScenario("mtls", readFixture(t, "mtls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h := testHTTPPath(t, st, "node-a")
	a := quietHTTPAgent(t, "node-a", "", h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go a.Run(ctx, oneState{st})
	id := "spiffe://aether.test/ns/demo/sa/sa-a"
	first := waitSecret(t, a, id, nil)

	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	svid, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "sa-a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h.Identities.(*identity.Store).PutSVID(svid)
	waitSecret(t, a, id, first)
}

// waitSecret waits until the cache serves secret name with a certificate
// chain other than not's.
func waitSecret(t *testing.T, a *Agent, name string, not *tlsv3.Secret) *tlsv3.Secret {
	t.Helper()
	chain := func(s *tlsv3.Secret) string {
		return string(s.GetTlsCertificate().GetCertificateChain().GetInlineBytes())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if s, ok := served(a)[resource.SecretType][name].(*tlsv3.Secret); ok && chain(s) != chain(not) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("secret %s was not (re)published", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// The identity's factory decides whether it reaches the pool key: the
// mesh stamps envoy.hashable_string, the unhashed-identity control
// envoy.string.
func TestOutboundIdentityFactory(t *testing.T) {
	st, err := registry.ParseScenario("mtls", readFixture(t, "mtls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		unhashed bool
		want     string
	}{{false, "envoy.hashable_string"}, {true, "envoy.string"}} {
		b := NewBuilder("node-a", constants.CaptureTProxy)
		b.HTTP = testHTTPPath(t, st, "node-a")
		b.HTTP.UnhashedIdentity = c.unhashed
		out, err := b.Build(st, "v1")
		if err != nil {
			t.Fatal(err)
		}
		dump, err := DumpResources("node-a", constants.CaptureTProxy, "", out.Resources)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(dump), `"factory_key": "`+c.want+`"`); got != 2 {
			t.Errorf("unhashed %v: %d outbound listeners stamp with %s, want both", c.unhashed, got, c.want)
		}
	}
}

// TestLocalAccountsAreHandedOverPods: on kind, the mesh's own installer
// pod (aether-system, account default, in a namespace the CNI excludes)
// ran on every node, sorted first among its accounts, and the
// static-certificate control presented its SVID instead of sa-a's. A pod
// the CNI never handed over has no netns path and is not the node's.
func TestLocalAccountsAreHandedOverPods(t *testing.T) {
	st := &registry.State{Pods: []registry.Pod{
		{Namespace: "aether-system", Name: "aether-cni-x", ServiceAccount: "default", Node: "node-a"},
		{Namespace: "demo", Name: "src-a-0", ServiceAccount: "sa-a", Node: "node-a", NetnsPath: "/run/netns/src-a-0"},
		{Namespace: "demo", Name: "dst-0", ServiceAccount: "sa-dst", Node: "node-b", NetnsPath: "/run/netns/dst-0"},
	}}
	got := LocalAccounts(st, "node-a")
	want := []identity.Account{{Namespace: "demo", ServiceAccount: "sa-a"}}
	if !slices.Equal(got, want) {
		t.Fatalf("LocalAccounts(node-a) = %v, want %v", got, want)
	}
}
