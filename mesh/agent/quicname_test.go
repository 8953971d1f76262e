package agent

import (
	"maps"
	"slices"
	"testing"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// renameAccount gives pod (and so every endpoint it backs) the account sa.
func renameAccount(t *testing.T, st *registry.State, ns, pod, sa string) {
	t.Helper()
	st.ServiceAccounts = append(st.ServiceAccounts, registry.ServiceAccount{Name: sa, Namespace: ns})
	for i := range st.Pods {
		if p := &st.Pods[i]; p.Namespace == ns && p.Name == pod {
			p.ServiceAccount = sa
			return
		}
	}
	t.Fatalf("no pod %s/%s", ns, pod)
}

// A twin's client checks the server's DNS SANs against the SNI
// <port>.<svc>.<ns>.<mesh-domain> after its SPIFFE ID (Q5), and an SVID
// names only <sa>.<ns>.<mesh-domain> and *.<sa>.<ns>.<mesh-domain>. A
// destination served by an account of another name would fail every QUIC
// handshake: it gets no twin arm (its route stays on the h2 cluster) and
// its twin is refused as not identity-ready.
func TestDestinationWhoseAccountDoesNotNameItsSNIStaysOnH2(t *testing.T) {
	h := &HTTPPath{EastWest: true, TrustDomain: spiffeid.RequireTrustDomainFromString("aether.test"), MeshDomain: "mesh.test"}
	routes := []mtls.Route{{Service: "api", Namespace: "demo"}, {Service: "cart", Namespace: "demo"}}
	st, err := registry.ParseScenario("eastwest.yaml", readFixture(t, "eastwest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	apiTwin := xdsnames.Twin{Service: "api", Namespace: "demo", SA: "web", SANamespace: "demo"}

	// Control: the fixture's accounts are named as their services.
	sels, err := h.selections(st, "node-a", routes)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(sels)); !slices.Equal(got, []string{"h2:api.demo", "h2:cart.demo"}) {
		t.Fatalf("selections for %v, want both destinations", got)
	}
	if _, reason, err := h.twin(st, apiTwin); err != nil || reason != "" {
		t.Fatalf("api's twin with its own account: reason %q, err %v; want it built", reason, err)
	}

	renameAccount(t, st, "demo", "api-0", "api-server")
	sels, err = h.selections(st, "node-a", routes)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(sels)); !slices.Equal(got, []string{"h2:cart.demo"}) {
		t.Fatalf("selections for %v, want only cart: api's account api-server does not name 8080.api.demo.mesh.test", got)
	}
	if _, reason, err := h.twin(st, apiTwin); err != nil || reason != RefusedNotIdentityReady {
		t.Fatalf("api's twin: reason %q, err %v; want %q", reason, err, RefusedNotIdentityReady)
	}
}
