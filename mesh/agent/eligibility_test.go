package agent

import (
	"maps"
	"slices"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/registry"
)

// waypoint labels service k of st, or its pod pod when one is named.
func waypoint(t *testing.T, st *registry.State, k registry.Key, pod, value string) {
	t.Helper()
	if pod == "" {
		svc, ok := st.Service(k)
		if !ok {
			t.Fatalf("no service %s", k)
		}
		svc.Labels = map[string]string{registry.WaypointLabel: value}
		return
	}
	for i := range st.Pods {
		if p := &st.Pods[i]; p.Namespace == k.Namespace && p.Name == pod {
			p.Labels = maps.Clone(p.Labels)
			p.Labels[registry.WaypointLabel] = value
			return
		}
	}
	t.Fatalf("no pod %s", pod)
}

// TestOnDemandRefusesWaypointedDestination: a destination with an endpoint
// behind a waypoint is never eligible: its twin is refused, answered
// absent and counted with its reason.
func TestOnDemandRefusesWaypointedDestination(t *testing.T) {
	a, st := twinAgent(t, TransportAuto)
	waypoint(t, st, registry.Key{Namespace: "demo", Name: "svc-a"}, "", "wp")
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	s := openCDS(t, a)
	s.recv()
	resp := s.subscribe(twinA)
	if len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{twinA}) {
		t.Fatalf("response = %v removed %v, want %s removed", resourceNames(resp), resp.GetRemovedResources(), twinA)
	}
	if n := testutil.ToFloat64(a.metrics.odcdsRefused.WithLabelValues(RefusedWaypointed)); n != 1 {
		t.Fatalf("refused{%s} = %v, want 1", RefusedWaypointed, n)
	}
	if len(a.Pairs()) != 0 {
		t.Fatalf("a waypointed destination recorded pairs %v", a.Pairs())
	}
}

// TestSelectionsSkipWaypointed: a destination with a waypointed endpoint
// gets no twin arm, its route stays on the h2 cluster; a pod's "none"
// opts it out of its service's waypoint.
func TestSelectionsSkipWaypointed(t *testing.T) {
	routes := []mtls.Route{{Service: "api", Namespace: "demo"}, {Service: "cart", Namespace: "demo"}}
	h := &HTTPPath{EastWest: true, TrustDomain: spiffeid.RequireTrustDomainFromString("aether.test"), MeshDomain: "mesh.test"}
	for _, c := range []struct {
		name      string
		label     func(*registry.State)
		wantFloor []string
	}{
		{"no waypoint", func(*registry.State) {}, []string{"h2:api.demo", "h2:cart.demo"}},
		{"service waypointed", func(st *registry.State) {
			waypoint(t, st, registry.Key{Namespace: "demo", Name: "api"}, "", "wp")
		}, []string{"h2:cart.demo"}},
		{"pod waypointed", func(st *registry.State) {
			waypoint(t, st, registry.Key{Namespace: "demo", Name: "cart"}, "cart-0", "wp")
		}, []string{"h2:api.demo"}},
		{"pod opts out of its service's waypoint", func(st *registry.State) {
			waypoint(t, st, registry.Key{Namespace: "demo", Name: "api"}, "", "wp")
			waypoint(t, st, registry.Key{Namespace: "demo", Name: "api"}, "api-0", "none")
		}, []string{"h2:api.demo", "h2:cart.demo"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := registry.ParseScenario("eastwest.yaml", readFixture(t, "eastwest.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			c.label(st)
			sels, err := h.selections(st, "node-a", routes)
			if err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(sels)); !slices.Equal(got, c.wantFloor) {
				t.Fatalf("selections for %v, want %v", got, c.wantFloor)
			}
			for _, sel := range sels {
				if len(sel.Twins) != 2 {
					t.Fatalf("%s: arms %v, want one per local account (web, batch)", sel.Floor, sel.Twins)
				}
			}
		})
	}
}
