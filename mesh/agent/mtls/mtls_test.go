package mtls_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/mesh/agent/mtls"
)

var testMesh = mtls.Mesh{Domain: "mesh.test", AccessLog: "/var/log/aether/access.log"}

// Every resource passes Envoy's own validation (the PGV rules that ship
// with the types), as Envoy would accept it.
func TestResourcesPassEnvoyValidation(t *testing.T) {
	pod := mtls.Pod{Namespace: "demo", Name: "dst-0", ID: "spiffe://aether.test/ns/demo/sa/dst", IP: netip.MustParseAddr("10.244.1.2"), NetnsPath: "/run/netns/p",
		Serves: []mtls.Port{{Service: "dst", Namespace: "demo", Port: 8080, TargetPort: 7080}}}
	in, cls, err := mtls.InboundListenerFor(testMesh, pod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := mtls.OutboundListenerFor(testMesh, pod, []mtls.Route{{Service: "dst", Namespace: "demo"}}, mtls.HashableString)
	if err != nil {
		t.Fatal(err)
	}
	svc := mtls.Service{Name: "dst", Namespace: "demo", Port: 8080, Accounts: []string{pod.ID}}
	perSource, err := mtls.H2ClusterFor(testMesh, svc, mtls.Upstream{})
	if err != nil {
		t.Fatal(err)
	}
	static, err := mtls.H2ClusterFor(testMesh, svc, mtls.Upstream{StaticSecret: pod.ID})
	if err != nil {
		t.Fatal(err)
	}
	la := mtls.H2Assignment("dst", "demo", []netip.Addr{pod.IP})
	for name, m := range map[string]interface{ ValidateAll() error }{
		"inbound listener": in, "inbound cluster": cls[0], "outbound listener": out,
		"per-source h2 cluster": perSource, "static h2 cluster": static, "h2 load assignment": la,
	} {
		if err := m.ValidateAll(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := la.Endpoints[0].LbEndpoints[0].GetEndpoint().GetAddress().GetSocketAddress().GetPortValue(); got != 18008 {
		t.Errorf("h2 endpoint port %d, want the inbound 18008", got)
	}
}

func TestH2ClusterWithoutAccountsIsRefused(t *testing.T) {
	_, err := mtls.H2ClusterFor(testMesh, mtls.Service{Name: "dst", Namespace: "demo", Port: 8080}, mtls.Upstream{})
	if err == nil || !strings.Contains(err.Error(), "no service account backs it") {
		t.Errorf("error %v, want one saying no account backs the service", err)
	}
}
