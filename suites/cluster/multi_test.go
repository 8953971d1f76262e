package cluster

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// The netns provider's multi-cluster run: each cluster of the clusters
// file is a Cluster of its own pods and services alone, with its entry
// and gateway, and closing the run removes every namespace.
func TestNetnsMulti(t *testing.T) {
	privileged.Require(t)
	ctx := context.Background()
	m, err := NetnsProvider{}.UpClusters(ctx, MultiConfig{Clusters: "../../fixtures/scenarios/multicluster.yaml", RunDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	var names []string
	for _, mb := range m.Members() {
		names = append(names, mb.Name+" "+mb.TrustDomain+" "+mb.Gateway.String())
	}
	if want := []string{"cluster-1 cluster-1.aether.test 172.30.0.10", "cluster-2 cluster-2.aether.test 172.30.0.20"}; !slices.Equal(names, want) {
		t.Fatalf("members %v, want %v", names, want)
	}
	if m.Cluster("cluster-3") != nil {
		t.Fatal("a cluster the file does not name was found")
	}
	_, c1, err := MemberNamed(m, "cluster-1")
	if err != nil {
		t.Fatal(err)
	}
	_, c2, err := MemberNamed(m, "cluster-2")
	if err != nil {
		t.Fatal(err)
	}
	var pods []string
	for _, p := range c1.Pods() {
		pods = append(pods, p.Name)
	}
	slices.Sort(pods)
	if !slices.Equal(pods, []string{"back-0", "web-0"}) {
		t.Fatalf("cluster-1's pods %v, want its own two", pods)
	}
	if vip, err := c1.ServiceVIP("demo", "back"); err != nil || vip != netip.MustParseAddr("10.96.1.10") {
		t.Fatalf("cluster-1's back: %v, %v", vip, err)
	}
	if _, err := c2.ServiceVIP("demo", "back"); err == nil {
		t.Fatal("cluster-2 has cluster-1's service back")
	}
	// Within a cluster the network is whole: web-0 reaches back-0.
	web, err := PodNamed(c1, "demo", "web-0")
	if err != nil {
		t.Fatal(err)
	}
	back, err := PodNamed(c1, "demo", "back-0")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := c1.DialTCP(ctx, web, netip.AddrPortFrom(back.IP, 7080))
	if err != nil {
		t.Fatalf("web-0 cannot reach back-0 in its own cluster: %v", err)
	}
	conn.Close()
	if err := m.Check(ctx); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	names, err = netns.List()
	if err != nil {
		t.Fatal(err)
	}
	prefix := netns.Name("")
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			t.Fatalf("namespace %s survived Close", n)
		}
	}
}
