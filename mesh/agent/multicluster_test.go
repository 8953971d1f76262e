package agent

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// federatedFixture is cluster name's State of multicluster.yaml, with the
// remotes the other cluster exports, and its trust and mesh domains.
func federatedFixture(t *testing.T, name string) (*registry.State, registry.ScenarioCluster) {
	t.Helper()
	f := filepath.Join(scenarioDir, "multicluster.yaml")
	cs, err := registry.LoadClustersFile(f)
	if err != nil {
		t.Fatal(err)
	}
	states, err := registry.FederatedStates(f, cs)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		if c.Name == name {
			return states[i], c
		}
	}
	t.Fatalf("no cluster %q in %s", name, f)
	return nil, registry.ScenarioCluster{}
}

// A source in cluster-1 that dials cluster-2's services gets a twin per
// pair whose one endpoint is cluster-2's gateway on UDP 18009, with the
// SNI in cluster-2's mesh domain and only cluster-2's accounts accepted:
// the QUIC session runs end to end to the destination pod through a
// gateway that reads only its Initials. A remote service the export does
// not mark QUIC-ready gets no twin. The snapshot passes the gates and is
// pinned in fixtures/xds/multicluster.cluster-1.c1-a.quic.json.
func TestRemoteTwinsReachTheGateway(t *testing.T) {
	st, c := federatedFixture(t, "cluster-1")
	h := testHTTPPathIn(t, st, "c1-a", c.TrustDomain, c.MeshDomain)
	h.EastWest = true
	a, err := New(Options{Node: "c1-a", Mode: constants.CaptureTProxy, HTTP: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	twin := xdsnames.TwinCluster(xdsnames.Twin{Service: "dst-a", Namespace: "demo", SA: "web", SANamespace: "demo"})
	if refused := a.admit([]string{twin}); len(refused) != 0 {
		t.Fatalf("the remote pair was refused: %v", refused)
	}
	out, _ := a.Current()
	if err := validate.Check(out.Resources); err != nil {
		t.Fatalf("the snapshot with a remote twin fails the gates: %v", err)
	}
	var tc *cluster.Cluster
	for _, r := range out.Resources[resource.ClusterType] {
		if c, ok := r.(*cluster.Cluster); ok && c.GetName() == twin {
			tc = c
		}
	}
	if tc == nil {
		t.Fatalf("no cluster %s in the snapshot", twin)
	}
	ts := tc.GetTransportSocket().String()
	for _, want := range []string{"8080.dst-a.demo.two.mesh.test", "spiffe://cluster-2.aether.test/ns/demo/sa/dst-a"} {
		if !strings.Contains(ts, want) {
			t.Errorf("the twin's transport socket lacks %q: %s", want, ts)
		}
	}
	var la *endpoint.ClusterLoadAssignment
	for _, r := range out.Resources[resource.EndpointType] {
		if l, ok := r.(*endpoint.ClusterLoadAssignment); ok && l.GetClusterName() == twin {
			la = l
		}
	}
	eps := la.GetEndpoints()[0].GetLbEndpoints()
	if len(eps) != 1 {
		t.Fatalf("the twin has %d endpoints, want the gateway alone", len(eps))
	}
	sa := eps[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "172.30.0.20" || sa.GetPortValue() != uint32(constants.EastWestTunnelPort) || sa.GetProtocol().String() != "UDP" {
		t.Fatalf("the twin's endpoint is %v, want UDP 172.30.0.20:%d", sa, constants.EastWestTunnelPort)
	}
	got, err := DumpResources("c1-a", constants.CaptureTProxy, "", out.Resources)
	if err != nil {
		t.Fatal(err)
	}
	if err := golden.Check(filepath.Join(goldenDir, "multicluster.cluster-1.c1-a.quic.json"), "generated xDS", got); err != nil {
		t.Error(err)
	}

	// Control: an export without the QUIC word keeps the pair on h2.
	for i := range st.Remote {
		st.Remote[i].QUIC = false
	}
	b, err := New(Options{Node: "c1-a", Mode: constants.CaptureTProxy, HTTP: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Apply(st); err != nil {
		t.Fatal(err)
	}
	if refused := b.admit([]string{twin}); len(refused) != 1 {
		t.Fatalf("a twin to a remote service not QUIC-ready was admitted (refused %v)", refused)
	}
}
