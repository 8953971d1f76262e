package gateway

import (
	"net/netip"
	"strings"
	"testing"

	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/proxy/cluster"
)

// An exposed service with no ready pod still gets its chain, cluster and
// an empty load assignment, which pass the gates and which the proxy
// takes (a connection to it is refused as no_upstream, not NACKed).
func TestServiceWithoutPods(t *testing.T) {
	res, err := Resources(Config{Node: "gw", Address: netip.MustParseAddr("172.30.0.10"), Domain: "mesh.test",
		Services: []Service{{Name: "a", Namespace: "demo", Port: 8080}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Check(res); err != nil {
		t.Fatalf("gates: %v", err)
	}
	a, err := cluster.AssignmentFromProto(res[resource.EndpointType][0].(*endpointv3.ClusterLoadAssignment))
	if err != nil {
		t.Fatalf("proxy refuses the empty assignment: %v", err)
	}
	if len(a.Endpoints) != 0 {
		t.Fatalf("%d endpoints, want none", len(a.Endpoints))
	}
}

func TestResourcesRefuse(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no address", Config{Node: "gw", Services: []Service{{Name: "a", Namespace: "d", Port: 1}}}, `gateway "gw": no address`},
		{"no service", Config{Node: "gw", Address: netip.MustParseAddr("172.30.0.10")}, `gateway "gw": exposes no service`},
	} {
		if _, err := Resources(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}
