package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	netinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

const udpIdleTimeout = 60 * time.Second

func (b *Builder) routeAction(clusterName string) (*matcher.Matcher_OnMatch, error) {
	if a, ok := b.actions[clusterName]; ok {
		return a, nil
	}
	b.route.Cluster = clusterName
	value, err := b.marshal(&b.route)
	if err != nil {
		return nil, fmt.Errorf("failed to encode udp_proxy route to %q: %w", clusterName, err)
	}
	blk := &b.actionBlocks.take(1)[0]
	blk.any.TypeUrl, blk.any.Value = udpRouteTypeURL, value
	blk.ext.Name, blk.ext.TypedConfig = xdsnames.UDPRouteAction, &blk.any
	blk.action.Action = &blk.ext
	blk.onMatch.OnMatch = &blk.action
	b.actions[clusterName] = &blk.onMatch
	return &blk.onMatch, nil
}

var destinationIPInput = func() *anypb.Any {
	a, err := anyOf(&netinputs.DestinationIPInput{})
	if err != nil {
		panic(err)
	}
	return a
}()

// udpProxyFilter is the listener filter every pod's UDP capture listener
// shares. It is nil when there is nothing to route, so pods get no UDP
// listener rather than one that only drops.
//
// The arms are an exact_match_map keyed by ClusterIP, unless the ClusterIPs
// routed to one cluster fill a CIDR block of two or more addresses: then
// the whole tree is a custom_match ip_range_matcher with that block and a
// /32 (/128) for every other ClusterIP. Both forms route every destination
// alike, the blocks hold only the arms' own addresses; the range form is
// what a service range behind one backend reads as, and one arm for it
// instead of one per address.
func (b *Builder) udpProxyFilter(sel UDPSelection) (*listener.ListenerFilter, error) {
	if len(sel.Arms) == 0 {
		b.udpFP, b.udpFilter, b.udpArms = 0, nil, nil
		return nil, nil
	}
	noMatch := xdsnames.BlackholeCluster
	if b.Mode == constants.CaptureRedirect && sel.Fallback != nil {
		noMatch = sel.Fallback.Cluster
	}
	if b.udpFilter != nil && noMatch == b.udpNoMatch && len(sel.Arms) == len(b.udpArms) && &sel.Arms[0] == &b.udpArms[0] {
		// The selector hands back the very same slice when no arm moved.
		return b.udpFilter, nil
	}
	b.udpArms, b.udpNoMatch = sel.Arms, noMatch
	h := b.hasher("udp-filter")
	h.str(noMatch)
	for _, a := range sel.Arms {
		h.addr(a.ClusterIP).str(a.Cluster)
	}
	fp := h.Sum64()
	if b.udpFilter != nil && fp == b.udpFP {
		return b.udpFilter, nil
	}
	onNoMatch, err := b.routeAction(noMatch)
	if err != nil {
		return nil, err
	}
	tree, err := b.udpMatcherTree(sel.Arms)
	if err != nil {
		return nil, err
	}
	cfg := &udpproxy.UdpProxyConfig{
		StatPrefix:  "udp_capture",
		IdleTimeout: durationpb.New(udpIdleTimeout),
		RouteSpecifier: &udpproxy.UdpProxyConfig_Matcher{Matcher: &matcher.Matcher{
			MatcherType: &matcher.Matcher_MatcherTree_{MatcherTree: tree},
			OnNoMatch:   onNoMatch,
		}},
	}
	tc, err := anyOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to encode udp_proxy config: %w", err)
	}
	b.udpFP = fp
	b.udpFilter = &listener.ListenerFilter{Name: xdsnames.UDPProxyFilter, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: tc}}
	return b.udpFilter, nil
}

// udpMatcherTree is the udp_proxy matcher's tree over the arms: on the
// datagram's destination address, in the range form or the exact form (see
// udpProxyFilter).
func (b *Builder) udpMatcherTree(arms []UDPArm) (*matcher.Matcher_MatcherTree, error) {
	input := &xdscore.TypedExtensionConfig{Name: xdsnames.DestinationIPInput, TypedConfig: destinationIPInput}
	if ranges, ok := armRanges(arms); ok {
		custom, err := b.ipRangeMatcher(ranges)
		if err != nil {
			return nil, err
		}
		return &matcher.Matcher_MatcherTree{Input: input, TreeType: &matcher.Matcher_MatcherTree_CustomMatch{CustomMatch: custom}}, nil
	}
	m := make(map[string]*matcher.Matcher_OnMatch, len(arms))
	for _, a := range arms {
		act, err := b.routeAction(a.Cluster)
		if err != nil {
			return nil, err
		}
		b.textRoom(len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
		start := len(b.textBuf)
		b.textBuf = a.ClusterIP.AppendTo(b.textBuf)
		m[b.textFrom(start)] = act
	}
	return &matcher.Matcher_MatcherTree{Input: input, TreeType: &matcher.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcher.Matcher_MatcherTree_MatchMap{Map: m}}}, nil
}

// ipRangeMatcher is the range form's custom_match: one range matcher per
// cluster, holding its blocks.
func (b *Builder) ipRangeMatcher(ranges []clusterRanges) (*xdscore.TypedExtensionConfig, error) {
	ipm := &matcher.IPMatcher{}
	for _, r := range ranges {
		act, err := b.routeAction(r.cluster)
		if err != nil {
			return nil, err
		}
		rm := &matcher.IPMatcher_IPRangeMatcher{OnMatch: act}
		for _, p := range r.prefixes {
			rm.Ranges = append(rm.Ranges, &xdscore.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
		}
		ipm.RangeMatchers = append(ipm.RangeMatchers, rm)
	}
	tc, err := anyOf(ipm)
	if err != nil {
		return nil, fmt.Errorf("failed to encode the ip_range_matcher of the udp_proxy filter: %w", err)
	}
	return &xdscore.TypedExtensionConfig{Name: xdsnames.IPRangeMatcher, TypedConfig: tc}, nil
}

// clusterRanges is the address blocks routed to one cluster.
type clusterRanges struct {
	cluster  string
	prefixes []netip.Prefix
}

// armRanges covers each cluster's ClusterIPs with the fewest CIDR blocks
// that hold no other address, in cluster name order, and reports whether
// any block is wider than one address (otherwise the exact form stays).
// arms are in ClusterIP order.
func armRanges(arms []UDPArm) ([]clusterRanges, bool) {
	// A block wider than one address holds two consecutive ClusterIPs of
	// one cluster, which are neighbours in ClusterIP order; without such a
	// pair the exact form stays and there is nothing to group.
	pair := false
	for i := 1; i < len(arms) && !pair; i++ {
		pair = arms[i].Cluster == arms[i-1].Cluster && arms[i].ClusterIP == arms[i-1].ClusterIP.Next()
	}
	if !pair {
		return nil, false
	}
	byCluster := map[string][]netip.Addr{}
	for _, a := range arms {
		byCluster[a.Cluster] = append(byCluster[a.Cluster], a.ClusterIP)
	}
	wide := false
	out := make([]clusterRanges, 0, len(byCluster))
	for cl, ips := range byCluster {
		r := clusterRanges{cluster: cl}
		for i := 0; i < len(ips); {
			// ips[i:j] is a run of consecutive addresses.
			j := i + 1
			for j < len(ips) && ips[j] == ips[j-1].Next() {
				j++
			}
			for _, p := range runPrefixes(ips[i], ips[j-1]) {
				wide = wide || p.Bits() < p.Addr().BitLen()
				r.prefixes = append(r.prefixes, p)
			}
			i = j
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b clusterRanges) int { return strings.Compare(a.cluster, b.cluster) })
	return out, wide
}

// runPrefixes splits the address run [lo, hi] into aligned CIDR blocks,
// each as wide as its start's alignment and the run's end allow.
func runPrefixes(lo, hi netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for {
		bits := lo.BitLen()
		for bits > 0 {
			p, _ := lo.Prefix(bits - 1)
			if p.Addr() != lo || lastAddr(p).Compare(hi) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(lo, bits)
		out = append(out, p)
		last := lastAddr(p)
		if last.Compare(hi) >= 0 {
			return out
		}
		lo = last.Next()
	}
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// anyOf packs m deterministically: map fields (the exact_match_map) in key
// order, so equal configuration is equal bytes, build after build.
func anyOf(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}
