// Package clusterspec compiles the route cluster specifiers the agent
// emits: a MatcherClusterSpecifier on FilterStateInput, which picks a
// destination's twin from the connection's source identity and falls back
// to the h2 cluster (ARCHITECTURE.md, "On-demand twins"). Anything else
// is refused with its path, as Envoy refuses what it cannot honour.
package clusterspec

import (
	"fmt"
	"maps"
	"slices"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	networkinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	clustermatcher "github.com/envoyproxy/go-control-plane/envoy/extensions/router/cluster_specifiers/matcher/v3"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Selector picks a cluster from one filter state value.
type Selector struct {
	// Key is the filter state object read.
	Key  string
	arms map[string]string
	// noMatch is on_no_match's cluster; "" means none, and a request that
	// matches no arm then has no cluster (Envoy answers it 503 NC).
	noMatch string
}

// Cluster is the cluster for a connection whose filter state holds value
// under Key (ok false: the object is absent, which matches no arm).
func (s *Selector) Cluster(value string, ok bool) string {
	if ok {
		if c, hit := s.arms[value]; hit {
			return c
		}
	}
	return s.noMatch
}

// Floor is on_no_match's cluster: the one a source without an arm gets.
func (s *Selector) Floor() string { return s.noMatch }

// Clusters is every cluster the selector can name, sorted.
func (s *Selector) Clusters() []string {
	set := map[string]bool{}
	for _, c := range s.arms {
		set[c] = true
	}
	if s.noMatch != "" {
		set[s.noMatch] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// FromProto compiles a route action's inline cluster specifier plugin.
// path is the route action's location, for errors.
func FromProto(ra *routev3.RouteAction, path string) (*Selector, error) {
	plugin := ra.GetInlineClusterSpecifierPlugin()
	if plugin == nil {
		return nil, fmt.Errorf("%s.inline_cluster_specifier_plugin: required", path)
	}
	path += ".inline_cluster_specifier_plugin"
	if err := fields.Only(plugin, path, "extension"); err != nil {
		return nil, err
	}
	ext := plugin.GetExtension()
	path += ".extension"
	if ext.GetName() != xdsnames.MatcherClusterSpecifier {
		return nil, fmt.Errorf("%s.name: %q is not supported by this data plane (want %q)", path, ext.GetName(), xdsnames.MatcherClusterSpecifier)
	}
	spec := &clustermatcher.MatcherClusterSpecifier{}
	if err := ext.GetTypedConfig().UnmarshalTo(spec); err != nil {
		return nil, fmt.Errorf("%s.typed_config: not a MatcherClusterSpecifier: %w", path, err)
	}
	return compile(spec.GetClusterMatcher(), path+".typed_config.cluster_matcher")
}

func compile(m *matcherv3.Matcher, path string) (*Selector, error) {
	if m == nil {
		return nil, fmt.Errorf("%s: required", path)
	}
	if err := fields.Only(m, path, "matcher_tree", "on_no_match"); err != nil {
		return nil, err
	}
	tree := m.GetMatcherTree()
	if tree == nil {
		return nil, fmt.Errorf("%s.matcher_tree: required", path)
	}
	if err := fields.Only(tree, path+".matcher_tree", "input", "exact_match_map"); err != nil {
		return nil, err
	}
	s := &Selector{arms: map[string]string{}}
	var err error
	if s.Key, err = filterStateKey(tree.GetInput(), path+".matcher_tree.input"); err != nil {
		return nil, err
	}
	for _, v := range slices.Sorted(maps.Keys(tree.GetExactMatchMap().GetMap())) {
		if s.arms[v], err = cluster(tree.GetExactMatchMap().GetMap()[v], fmt.Sprintf("%s.matcher_tree.exact_match_map.map[%q]", path, v)); err != nil {
			return nil, err
		}
	}
	if m.GetOnNoMatch() != nil {
		if s.noMatch, err = cluster(m.GetOnNoMatch(), path+".on_no_match"); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func filterStateKey(in *xdscore.TypedExtensionConfig, path string) (string, error) {
	fs := &networkinputs.FilterStateInput{}
	if err := in.GetTypedConfig().UnmarshalTo(fs); err != nil {
		return "", fmt.Errorf("%s.typed_config: only %s is supported: %w", path, xdsnames.FilterStateInput, err)
	}
	if err := fields.Only(fs, path+".typed_config", "key"); err != nil {
		return "", err
	}
	if fs.GetKey() == "" {
		return "", fmt.Errorf("%s.typed_config.key: required", path)
	}
	return fs.GetKey(), nil
}

func cluster(om *matcherv3.Matcher_OnMatch, path string) (string, error) {
	a := om.GetAction()
	if a == nil {
		return "", fmt.Errorf("%s.action: required (nested matchers are not supported)", path)
	}
	ca := &clustermatcher.ClusterAction{}
	if err := a.GetTypedConfig().UnmarshalTo(ca); err != nil {
		return "", fmt.Errorf("%s.action.typed_config: not a ClusterAction: %w", path, err)
	}
	if ca.GetCluster() == "" {
		return "", fmt.Errorf("%s.action.typed_config.cluster: required", path)
	}
	return ca.GetCluster(), nil
}
