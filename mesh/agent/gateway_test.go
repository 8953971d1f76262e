package agent

import (
	"path/filepath"
	"strings"
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
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
