package agent

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy/match"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

func TestArmRanges(t *testing.T) {
	arm := func(ip, cl string) UDPArm { return UDPArm{ClusterIP: netip.MustParseAddr(ip), Cluster: cl} }
	cases := []struct {
		name string
		arms []UDPArm
		want string
		wide bool
	}{
		{"distinct clusters stay exact, ungrouped", []UDPArm{arm("10.96.0.1", "a"), arm("10.96.0.2", "b")}, "", false},
		{"aligned pair", []UDPArm{arm("10.96.0.2", "a"), arm("10.96.0.3", "a")}, "a=10.96.0.2/31", true},
		{"unaligned pair is two hosts", []UDPArm{arm("10.96.0.1", "a"), arm("10.96.0.2", "a")}, "a=10.96.0.1/32,10.96.0.2/32", false},
		{"run 1..6 is the fewest aligned blocks", []UDPArm{arm("10.96.0.1", "a"), arm("10.96.0.2", "a"), arm("10.96.0.3", "a"),
			arm("10.96.0.4", "a"), arm("10.96.0.5", "a"), arm("10.96.0.6", "a")}, "a=10.96.0.1/32,10.96.0.2/31,10.96.0.4/31,10.96.0.6/32", true},
		{"a gap held by another cluster splits the block", []UDPArm{arm("10.96.0.4", "a"), arm("10.96.0.5", "b"), arm("10.96.0.6", "a"), arm("10.96.0.7", "a")},
			"a=10.96.0.4/32,10.96.0.6/31 b=10.96.0.5/32", true},
		{"IPv6 hosts", []UDPArm{arm("fd00::2", "a"), arm("fd00::3", "a")}, "a=fd00::2/127", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rs, wide := armRanges(c.arms)
			var parts []string
			for _, r := range rs {
				var ps []string
				for _, p := range r.prefixes {
					ps = append(ps, p.String())
				}
				parts = append(parts, r.cluster+"="+strings.Join(ps, ","))
			}
			if got := strings.Join(parts, " "); got != c.want || wide != c.wide {
				t.Fatalf("armRanges = %q wide=%v, want %q wide=%v", got, wide, c.want, c.wide)
			}
		})
	}
}

// udpMatcher compiles the first UDP capture listener's matcher with the Go
// proxy's own matcher: the consumer is the witness of what the form means.
func udpMatcher(t *testing.T, out *Output) (*match.Matcher, *udpproxy.UdpProxyConfig) {
	t.Helper()
	for _, r := range out.Resources[resource.ListenerType] {
		l := r.(*listener.Listener)
		if !strings.HasPrefix(l.GetName(), "udp-capture~") {
			continue
		}
		cfg := &udpproxy.UdpProxyConfig{}
		if err := l.GetListenerFilters()[0].GetTypedConfig().UnmarshalTo(cfg); err != nil {
			t.Fatal(err)
		}
		m, err := match.Compile(cfg.GetMatcher(), "matcher")
		if err != nil {
			t.Fatalf("the proxy rejects the generated matcher: %v", err)
		}
		return m, cfg
	}
	t.Fatal("no UDP capture listener")
	return nil, nil
}

// TestIPRangeArmForm: where the ClusterIPs sent to one cluster fill a CIDR
// block the matcher is an ip_range_matcher, and it routes every destination
// exactly as the exact-match arms would; elsewhere exact match stays the
// default.
func TestIPRangeArmForm(t *testing.T) {
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "ip-range-arms.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewBuilder("node-a", constants.CaptureTProxy).Build(st, "v1")
	if err != nil {
		t.Fatal(err)
	}
	m, cfg := udpMatcher(t, out)
	tree := cfg.GetMatcher().GetMatcherTree()
	if tree.GetCustomMatch().GetName() != xdsnames.IPRangeMatcher || tree.GetExactMatchMap() != nil {
		t.Fatalf("matcher tree is %T, want the %s form", tree.GetTreeType(), xdsnames.IPRangeMatcher)
	}
	exact := map[netip.Addr]string{}
	for _, a := range out.Selection.Arms {
		exact[a.ClusterIP] = a.Cluster
	}
	if len(exact) != 5 {
		t.Fatalf("selection has %d arms, want 4 shards + solo", len(exact))
	}
	// Every address of the services' /24: the arms' own clusters, the
	// blackhole for the rest (10.96.3.4 next to the block, the un-routed
	// pool service's own 10.96.3.10).
	for a := netip.MustParseAddr("10.96.3.0"); a.Less(netip.MustParseAddr("10.96.4.0")); a = a.Next() {
		want, ok := exact[a]
		if !ok {
			want = xdsnames.BlackholeCluster
		}
		if got, _ := m.Cluster(a); got != want {
			t.Fatalf("%s routes to %q, the exact arms to %q", a, got, want)
		}
	}

	// The default: the two-service fixture has no block and stays exact.
	st, err = registry.LoadScenarioFile(filepath.Join(scenarioDir, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err = NewBuilder("node-a", constants.CaptureTProxy).Build(st, "v1")
	if err != nil {
		t.Fatal(err)
	}
	if _, cfg := udpMatcher(t, out); cfg.GetMatcher().GetMatcherTree().GetExactMatchMap() == nil {
		t.Fatal("two-udp-services lost the exact-match form")
	}
}

// TestIPRangeFormFollowsChanges: the form is a function of the arms, so a
// warm builder switches to ranges when a block fills and back when it
// breaks.
func TestIPRangeFormFollowsChanges(t *testing.T) {
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "ip-range-arms.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBuilder("node-a", constants.CaptureTProxy)
	form := func(step string) string {
		out, err := b.Build(st, step)
		if err != nil {
			t.Fatal(err)
		}
		_, cfg := udpMatcher(t, out)
		return fmt.Sprintf("%T", cfg.GetMatcher().GetMatcherTree().GetTreeType())
	}
	if f := form("v1"); !strings.Contains(f, "CustomMatch") {
		t.Fatalf("v1: %s, want the range form", f)
	}
	// shard-2 leaves the route: .0-.1 is still a /31, so ranges stay.
	r := &st.UDPRoutes[0]
	r.ParentRefs = r.ParentRefs[:2]
	if f := form("v2"); !strings.Contains(f, "CustomMatch") {
		t.Fatalf("v2: %s, want the range form for 10.96.3.0/31", f)
	}
	r.ParentRefs = r.ParentRefs[:1]
	if f := form("v3"); !strings.Contains(f, "ExactMatchMap") {
		t.Fatalf("v3: %s, want exact match once no block is left", f)
	}
}
