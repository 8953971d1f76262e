package clusterspec

import (
	"slices"
	"strings"
	"testing"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networkinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	clustermatcher "github.com/envoyproxy/go-control-plane/envoy/extensions/router/cluster_specifiers/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
)

const (
	key   = "envoy.tls.certificate_mappers.on_demand_secret"
	web   = "spiffe://aether.test/ns/demo/sa/web"
	batch = "spiffe://aether.test/ns/demo/sa/batch"
	floor = "h2:svc-b.demo"
)

var twins = map[string]string{web: "quic:svc-b.demo@web.demo", batch: "quic:svc-b.demo@batch.demo"}

func agentRoute(t *testing.T) *routev3.RouteAction {
	t.Helper()
	ra, err := eastwest.Route(eastwest.Selection{Key: key, Twins: twins, Floor: floor})
	if err != nil {
		t.Fatal(err)
	}
	return ra
}

// TestAgentRouteSelectsPerSource: the route the agent emits sends each
// local account to its own twin and every other source, or a connection
// without the identity, to the h2 floor.
func TestAgentRouteSelectsPerSource(t *testing.T) {
	s, err := FromProto(agentRoute(t), "route")
	if err != nil {
		t.Fatal(err)
	}
	if s.Key != key {
		t.Fatalf("key %q, want %q", s.Key, key)
	}
	for _, c := range []struct {
		value string
		ok    bool
		want  string
	}{
		{web, true, twins[web]},
		{batch, true, twins[batch]},
		{"spiffe://aether.test/ns/demo/sa/other", true, floor},
		{"", false, floor},
	} {
		if got := s.Cluster(c.value, c.ok); got != c.want {
			t.Errorf("Cluster(%q, %v) = %q, want %q", c.value, c.ok, got, c.want)
		}
	}
	if got := s.Clusters(); !slices.Equal(got, []string{floor, twins[batch], twins[web]}) {
		t.Fatalf("Clusters = %v", got)
	}
}

func matcherOf(t *testing.T, ra *routev3.RouteAction) *clustermatcher.MatcherClusterSpecifier {
	t.Helper()
	spec := &clustermatcher.MatcherClusterSpecifier{}
	if err := ra.GetInlineClusterSpecifierPlugin().GetExtension().GetTypedConfig().UnmarshalTo(spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func withMatcher(t *testing.T, ra *routev3.RouteAction, spec *clustermatcher.MatcherClusterSpecifier) {
	t.Helper()
	a, err := anypb.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	ra.GetInlineClusterSpecifierPlugin().Extension = &corev3.TypedExtensionConfig{Name: ra.GetInlineClusterSpecifierPlugin().GetExtension().GetName(), TypedConfig: a}
}

// TestRefusedShapesNameTheirPath: every shape outside the contract is
// refused, naming the field.
func TestRefusedShapesNameTheirPath(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*clustermatcher.MatcherClusterSpecifier)
		want string
	}{
		{"prefix map", func(s *clustermatcher.MatcherClusterSpecifier) {
			tree := s.ClusterMatcher.GetMatcherTree()
			tree.TreeType = &matcherv3.Matcher_MatcherTree_PrefixMatchMap{PrefixMatchMap: tree.GetExactMatchMap()}
		}, "matcher_tree.prefix_match_map: field is set but not supported"},
		{"another input", func(s *clustermatcher.MatcherClusterSpecifier) {
			a, _ := anypb.New(&networkinputs.DestinationIPInput{})
			s.ClusterMatcher.GetMatcherTree().Input = &xdscore.TypedExtensionConfig{Name: "envoy.matching.inputs.destination_ip", TypedConfig: a}
		}, "matcher_tree.input.typed_config: only envoy.matching.inputs.filter_state"},
		{"nested matcher", func(s *clustermatcher.MatcherClusterSpecifier) {
			s.ClusterMatcher.OnNoMatch = &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Matcher{Matcher: &matcherv3.Matcher{}}}
		}, "on_no_match.action: required (nested matchers are not supported)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ra := agentRoute(t)
			spec := matcherOf(t, ra)
			c.edit(spec)
			withMatcher(t, ra, spec)
			_, err := FromProto(ra, `Listener "l".route`)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), `Listener "l".route.inline_cluster_specifier_plugin.extension.typed_config.cluster_matcher`) {
				t.Fatalf("err = %v, want the path and %q", err, c.want)
			}
		})
	}
}
