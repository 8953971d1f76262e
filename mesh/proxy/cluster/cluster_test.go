package cluster_test

import (
	"net/netip"
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/internal/proxytest"
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
