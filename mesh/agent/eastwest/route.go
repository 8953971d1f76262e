// Package eastwest builds the agent's resources for east-west QUIC
// (ARCHITECTURE.md, "On-demand twins"): the selection route that sends
// each local account's requests to its twin, and the on_demand filter that
// fetches a twin the first time it is named.
package eastwest

import (
	"fmt"
	"maps"
	"slices"
	"time"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	networkinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	clustermatcher "github.com/envoyproxy/go-control-plane/envoy/extensions/router/cluster_specifiers/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// OnDemandTimeout is the mesh's on_demand timeout; Envoy's default is 5 s.
const OnDemandTimeout = 2 * time.Second

// Selection is one destination's choice between twins and the h2 floor.
type Selection struct {
	// Key is the filter state object holding the connection's source
	// identity (the outbound listener stamps it).
	Key string
	// Twins maps each local account's identity to its twin cluster.
	Twins map[string]string
	// Floor is the h2 cluster: every source without a twin.
	Floor string
}

// Route is the route action of sel: a MatcherClusterSpecifier on
// FilterStateInput(Key), an exact arm per identity, on_no_match the floor.
// Arms name twins that may not exist yet: the on_demand filter fetches
// each on its first request.
func Route(sel Selection) (*routev3.RouteAction, error) {
	input, err := typed(xdsnames.FilterStateInput, &networkinputs.FilterStateInput{Key: sel.Key})
	if err != nil {
		return nil, err
	}
	arms := make(map[string]*matcherv3.Matcher_OnMatch, len(sel.Twins))
	for _, id := range slices.Sorted(maps.Keys(sel.Twins)) {
		if arms[id], err = clusterAction(sel.Twins[id]); err != nil {
			return nil, err
		}
	}
	floor, err := clusterAction(sel.Floor)
	if err != nil {
		return nil, err
	}
	spec, err := typed(xdsnames.MatcherClusterSpecifier, &clustermatcher.MatcherClusterSpecifier{ClusterMatcher: &matcherv3.Matcher{
		MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
			Input:    input,
			TreeType: &matcherv3.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcherv3.Matcher_MatcherTree_MatchMap{Map: arms}},
		}},
		OnNoMatch: floor,
	}})
	if err != nil {
		return nil, err
	}
	return &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_InlineClusterSpecifierPlugin{
		InlineClusterSpecifierPlugin: &routev3.ClusterSpecifierPlugin{Extension: &corev3.TypedExtensionConfig{
			Name: spec.GetName(), TypedConfig: spec.GetTypedConfig()}},
	}}, nil
}

func clusterAction(cluster string) (*matcherv3.Matcher_OnMatch, error) {
	a, err := typed(xdsnames.ClusterAction, &clustermatcher.ClusterAction{Cluster: cluster})
	if err != nil {
		return nil, err
	}
	return &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: a}}, nil
}

// OnDemandFilter is the outbound HTTP connection manager's on_demand
// filter: ODCDS over ADS with the mesh's timeout. It goes before the
// router.
func OnDemandFilter() (*hcmv3.HttpFilter, error) {
	cfg, err := pack(&ondemandv3.OnDemand{Odcds: &ondemandv3.OnDemandCds{
		Source: &corev3.ConfigSource{ResourceApiVersion: corev3.ApiVersion_V3,
			ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}},
		Timeout: durationpb.New(OnDemandTimeout),
	}})
	if err != nil {
		return nil, fmt.Errorf("on_demand filter: %w", err)
	}
	return &hcmv3.HttpFilter{Name: xdsnames.OnDemandFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: cfg}}, nil
}

func typed(name string, m proto.Message) (*xdscore.TypedExtensionConfig, error) {
	a, err := pack(m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &xdscore.TypedExtensionConfig{Name: name, TypedConfig: a}, nil
}

// pack marshals deterministically: the arms are a map, and a resource
// whose bytes move with map order would change version on every build.
func pack(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// WithTwins rewrites an outbound listener's routes: each route to an h2
// cluster with a selection in sels (keyed by the h2 cluster) selects per
// source instead, and the on_demand filter goes before the router, so a
// twin is fetched on its first request. A listener with no such route is
// returned as it was.
func WithTwins(l *listenerv3.Listener, sels map[string]Selection) (*listenerv3.Listener, error) {
	out := proto.Clone(l).(*listenerv3.Listener)
	changed := false
	for _, fc := range out.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() != xdsnames.HTTPConnectionManager {
				continue
			}
			h := &hcmv3.HttpConnectionManager{}
			if err := f.GetTypedConfig().UnmarshalTo(h); err != nil {
				return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
			}
			n, err := selectTwins(h, sels)
			if err != nil {
				return nil, fmt.Errorf("listener %s: %w", l.GetName(), err)
			}
			if n == 0 {
				continue
			}
			od, err := OnDemandFilter()
			if err != nil {
				return nil, err
			}
			h.HttpFilters = append([]*hcmv3.HttpFilter{od}, h.HttpFilters...)
			tc, err := pack(h)
			if err != nil {
				return nil, err
			}
			f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: tc}
			changed = true
		}
	}
	if !changed {
		return l, nil
	}
	return out, nil
}

func selectTwins(h *hcmv3.HttpConnectionManager, sels map[string]Selection) (int, error) {
	n := 0
	for _, vh := range h.GetRouteConfig().GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			sel, ok := sels[r.GetRoute().GetCluster()]
			if !ok {
				continue
			}
			ra, err := Route(sel)
			if err != nil {
				return 0, err
			}
			r.Action = &routev3.Route_Route{Route: ra}
			n++
		}
	}
	return n, nil
}
