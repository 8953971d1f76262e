package agent

import (
	"io"
	"log/slog"
	"slices"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

func controlsAgent(t *testing.T, ctl Controls) *Agent {
	t.Helper()
	st, err := registry.ParseScenario("two-udp-services.yaml", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, Controls: ctl,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	return a
}

// RefuseTwin refuses an admissible pair, answered absent and counted
// under its own reason; another pair is admitted as ever.
func TestControlRefuseTwin(t *testing.T) {
	a := controlsAgent(t, Controls{RefuseTwin: twinA})
	s := openCDS(t, a)
	s.recv()
	if resp := s.subscribe(twinA); len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{twinA}) {
		t.Fatalf("response = %v removed %v, want %s removed", resourceNames(resp), resp.GetRemovedResources(), twinA)
	}
	if n := testutil.ToFloat64(a.metrics.odcdsRefused.WithLabelValues(RefusedTestOnly)); n != 1 {
		t.Fatalf("refused{%s} = %v, want 1", RefusedTestOnly, n)
	}
	s.send(subscribeTo(twinB))
	if got, removed := untilNamed(s, twinB); !slices.Equal(got, []string{twinB}) || len(removed) != 0 {
		t.Fatalf("responses until %s's: %v removed %v, want it admitted", twinB, got, removed)
	}
}

// UnansweredRefusals sends nothing for a refused name: the next response
// on the stream is the answer to the next subscription.
func TestControlUnansweredRefusals(t *testing.T) {
	a := controlsAgent(t, Controls{RefuseTwin: twinA, UnansweredRefusals: true})
	s := openCDS(t, a)
	s.recv()
	s.send(subscribeTo(twinA))
	s.send(subscribeTo(twinB))
	if got, removed := untilNamed(s, twinB); !slices.Equal(got, []string{twinB}) || len(removed) != 0 {
		t.Fatalf("responses until %s's: %v removed %v, want %s alone: the refusal of %s must go unanswered", twinB, got, removed, twinB, twinA)
	}
	if n := testutil.ToFloat64(a.metrics.odcdsRefused.WithLabelValues(RefusedTestOnly)); n != 1 {
		t.Fatalf("refused{%s} = %v, want 1: an unanswered refusal is still counted", RefusedTestOnly, n)
	}
}

// TwinSharesBaseEDS names the base h2 cluster's EDS resource, never the
// twin's own.
func TestControlTwinSharesBaseEDS(t *testing.T) {
	a := controlsAgent(t, Controls{TwinSharesBaseEDS: true})
	s := openCDS(t, a)
	s.recv()
	resp := s.subscribe(twinA)
	if got := resourceNames(resp); !slices.Equal(got, []string{twinA}) {
		t.Fatalf("response = %v, want %s admitted", got, twinA)
	}
	c := &cluster.Cluster{}
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	if eds, base := c.GetEdsClusterConfig().GetServiceName(), xdsnames.H2Cluster("svc-a", "demo"); eds != base {
		t.Fatalf("twin EDS name = %q, want its base's %q", eds, base)
	}
}

func subscribeTo(names ...string) *discovery.DeltaDiscoveryRequest {
	return &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: names}
}

// untilNamed receives (and ACKs) CDS responses until one carries name,
// and returns every name they carried or removed on the way: the cache
// may first answer a subscription or an ACK with nothing.
func untilNamed(s *cdsStream, name string) (names, removed []string) {
	s.t.Helper()
	for range 5 {
		resp := s.recv()
		names = append(names, resourceNames(resp)...)
		removed = append(removed, resp.GetRemovedResources()...)
		if slices.Contains(names, name) {
			return names, removed
		}
	}
	s.t.Fatalf("no response carried %s in 5", name)
	return nil, nil
}
