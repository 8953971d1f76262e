package cluster_test

import (
	"net/netip"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// Weights split picks exactly within each window of total weight; an
// unhealthy host gets none; an EDS cluster has no host until its endpoints come.
func TestWeightedPick(t *testing.T) {
	a, b, c := netip.MustParseAddrPort("10.244.2.2:1"), netip.MustParseAddrPort("10.244.2.3:1"), netip.MustParseAddrPort("10.244.2.4:1")
	la := proxytest.Assignment("udp:s", a, b, c)
	eps := la.Endpoints[0].LbEndpoints
	eps[0].LoadBalancingWeight = wrapperspb.UInt32(3)
	eps[2].HealthStatus = corev3.HealthStatus_DRAINING
	asg, err := cluster.AssignmentFromProto(la)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := cluster.FromProto(proxytest.EDSCluster("udp:s"))
	if err != nil {
		t.Fatal(err)
	}
	cl := cluster.New(spec)
	if h, err := cl.Pick(); err == nil {
		t.Fatalf("an EDS cluster picked %s before its endpoints arrived", h)
	}
	cl.SetAssignment(asg)
	got := map[netip.AddrPort]int{}
	for range 400 {
		h, err := cl.Pick()
		if err != nil {
			t.Fatal(err)
		}
		got[h]++
	}
	if got[a] != 300 || got[b] != 100 || got[c] != 0 {
		t.Fatalf("picks %v, want 300 for weight 3, 100 for weight 1, 0 for the draining host", got)
	}
	bh, err := cluster.FromProto(proxytest.Blackhole())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.New(bh).Pick(); err == nil || !strings.Contains(err.Error(), "no healthy upstream") {
		t.Fatalf("blackhole pick: %v", err)
	}
	bad := proxytest.EDSCluster("udp:s")
	bad.RespectDnsTtl = true
	if _, err := cluster.FromProto(bad); err == nil || !strings.Contains(err.Error(), `Cluster "udp:s".respect_dns_ttl`) {
		t.Fatalf("unsupported field: %v", err)
	}
}

// The DEFAULT priority's max_connections is the session cap; absent, it is
// Envoy's 1024; the first DEFAULT threshold wins, a HIGH one caps nothing;
// a threshold field the data plane does not honour is refused by name.
func TestCircuitBreakerMaxConnections(t *testing.T) {
	threshold := func(p corev3.RoutingPriority, n uint32) *clusterv3.CircuitBreakers_Thresholds {
		return &clusterv3.CircuitBreakers_Thresholds{Priority: p, MaxConnections: wrapperspb.UInt32(n)}
	}
	cases := []struct {
		name string
		cb   *clusterv3.CircuitBreakers
		want uint32
	}{
		{"absent", nil, cluster.DefaultMaxConnections},
		{"no thresholds", &clusterv3.CircuitBreakers{}, cluster.DefaultMaxConnections},
		{"default", &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{threshold(corev3.RoutingPriority_DEFAULT, 64)}}, 64},
		{"zero", &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{threshold(corev3.RoutingPriority_DEFAULT, 0)}}, 0},
		{"high only", &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{threshold(corev3.RoutingPriority_HIGH, 8)}}, cluster.DefaultMaxConnections},
		{"first default wins", &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
			threshold(corev3.RoutingPriority_HIGH, 8), threshold(corev3.RoutingPriority_DEFAULT, 16), threshold(corev3.RoutingPriority_DEFAULT, 32),
		}}, 16},
		{"default without max_connections", &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{
			{Priority: corev3.RoutingPriority_DEFAULT}, threshold(corev3.RoutingPriority_DEFAULT, 32),
		}}, cluster.DefaultMaxConnections},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := proxytest.EDSCluster("udp:s")
			c.CircuitBreakers = tc.cb
			spec, err := cluster.FromProto(c)
			if err != nil {
				t.Fatal(err)
			}
			if spec.MaxConnections != tc.want {
				t.Fatalf("max_connections %d, want %d", spec.MaxConnections, tc.want)
			}
		})
	}
	bad := proxytest.EDSCluster("udp:s")
	bad.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxRequests: wrapperspb.UInt32(5)}}}
	if _, err := cluster.FromProto(bad); err == nil || !strings.Contains(err.Error(), `Cluster "udp:s".circuit_breakers.thresholds[0].max_requests`) {
		t.Fatalf("unsupported threshold field: %v", err)
	}
	bad.CircuitBreakers = &clusterv3.CircuitBreakers{PerHostThresholds: []*clusterv3.CircuitBreakers_Thresholds{{MaxConnections: wrapperspb.UInt32(5)}}}
	if _, err := cluster.FromProto(bad); err == nil || !strings.Contains(err.Error(), `Cluster "udp:s".circuit_breakers.per_host_thresholds`) {
		t.Fatalf("unsupported per-host thresholds: %v", err)
	}
}
