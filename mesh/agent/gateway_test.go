package agent

import (
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// A gateway node whose agent runs without the mTLS path cannot emit its
// gateway (the SNIs are that path's): the build fails saying so, instead
// of publishing a gateway node with no 18009 listener.
func TestGatewayNeedsTheMTLSPath(t *testing.T) {
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewBuilder("node-b", constants.CaptureTProxy).Build(st, "v1"); err != nil {
		t.Fatalf("control: a node that is not the gateway builds without the mTLS path: %v", err)
	}
	_, err = NewBuilder("gw", constants.CaptureTProxy).Build(st, "v1")
	if err == nil || !strings.Contains(err.Error(), `node "gw" its cluster's east-west gateway`) || !strings.Contains(err.Error(), "mTLS path is off") {
		t.Fatalf("err %v, want the gateway refused for want of the mTLS path", err)
	}
}

// The gateway's load assignments follow the exposed services' ready
// pods, and an incremental build publishes just that change.
func TestGatewayFollowsEndpoints(t *testing.T) {
	load := func(ready bool) *registry.State {
		st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "gateway.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range st.Endpoints[registry.Key{Namespace: "demo", Name: "dst-a"}] {
			st.Endpoints[registry.Key{Namespace: "demo", Name: "dst-a"}][i].Ready = ready
		}
		return st
	}
	b := NewBuilder("gw", constants.CaptureTProxy)
	b.HTTP = testHTTPPath(t, load(true), "gw")
	if _, err := b.Build(load(true), "v1"); err != nil {
		t.Fatal(err)
	}
	out, err := b.Build(load(false), "v2")
	if err != nil {
		t.Fatal(err)
	}
	ch := out.Changes[resource.EndpointType]
	la, ok := ch.Updated["gateway:dst-a.demo"].(*endpoint.ClusterLoadAssignment)
	if !ok || len(ch.Updated) != 1 {
		t.Fatalf("endpoint changes %v, want gateway:dst-a.demo's alone", ch.Updated)
	}
	if n := len(la.GetEndpoints()[0].GetLbEndpoints()); n != 0 {
		t.Fatalf("gateway:dst-a.demo lists %d endpoints with its one pod not ready, want 0", n)
	}
	for _, typ := range []resource.Type{resource.ListenerType, resource.ClusterType} {
		if c := out.Changes[typ]; len(c.Updated)+len(c.Removed) != 0 {
			t.Errorf("%s changed (%v, removed %v) on an endpoint change", typ, c.Updated, c.Removed)
		}
	}
}

// GatewayFirstService publishes a gateway whose every chain forwards to
// the first exposed service, past the gate that refuses it; with the
// gate kept, the same build is refused by gateway_chain_routes_own_service.
func TestControlGatewayFirstService(t *testing.T) {
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(ctl Controls) (*Agent, error) {
		a, err := New(Options{Node: "gw", Mode: constants.CaptureTProxy, HTTP: testHTTPPath(t, st, "gw"), Controls: ctl,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return a, a.Apply(st)
	}
	a, err := run(Controls{GatewayFirstService: true})
	if err != nil {
		t.Fatalf("the control's gateway was not published: %v", err)
	}
	out, _ := a.Current()
	var tcp *listener.Listener
	for _, r := range out.Resources[resource.ListenerType] {
		if l, ok := r.(*listener.Listener); ok && l.GetName() == xdsnames.GatewayTCPListener("gw") {
			tcp = l
		}
	}
	if tcp == nil || len(tcp.GetFilterChains()) != 2 {
		t.Fatalf("no two-chain gateway listener published: %v", tcp)
	}
	for _, fc := range tcp.GetFilterChains() {
		if s := fc.GetFilters()[0].GetTypedConfig().String(); !strings.Contains(s, "gateway:dst-a.demo") {
			t.Errorf("chain %s forwards elsewhere than the first service under the control: %s", fc.GetName(), s)
		}
	}
	_, err = run(Controls{GatewayFirstService: true, keepGates: true})
	if err == nil || !strings.Contains(err.Error(), "gateway_chain_routes_own_service") {
		t.Fatalf("with the gate kept the control's gateway gave %v, want it refused by gateway_chain_routes_own_service", err)
	}
}
