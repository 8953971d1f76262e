// Package match holds the udp_proxy route matcher: the subset of the cncf
// xds unified matcher (xds.type.matcher.v3.Matcher) that the agent emits,
// compiled once per listener update and evaluated per datagram on the
// datagram's destination address (ipi_addr, Envoy's DestinationIPInput).
//
// Supported, with Envoy's semantics: a matcher_tree whose input is
// envoy.matching.inputs.destination_ip, keyed either by an exact_match_map
// (address strings) or by a custom_match ip_range_matcher (longest prefix
// wins); on_match/on_no_match holding an udp_proxy Route action or a nested
// matcher (a nested matcher that does not match falls through to the outer
// on_no_match, as Envoy's tree matchers do). Everything else is rejected
// with an error naming the field, so the xDS client can NACK it.
package match

import (
	"fmt"
	"net/netip"
	"slices"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	networkinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Extension names the agent must use (ARCHITECTURE.md, "The agent ↔ proxy
// contract").
const (
	DestinationIPInputName = xdsnames.DestinationIPInput
	IPRangeMatcherName     = xdsnames.IPRangeMatcher
)

// maxDepth is Envoy's limit on nested matchers.
const maxDepth = 16

// Matcher is a compiled route matcher. The zero value matches nothing.
type Matcher struct {
	exact map[netip.Addr]*onMatch
	// ranges holds one table per prefix length, longest first, so a lookup
	// is at most 33 (129) map probes: the longest-prefix trie, flattened.
	ranges    []rangeTable
	onNoMatch *onMatch
}

type rangeTable struct {
	bits int
	m    map[netip.Prefix]*onMatch
}

type onMatch struct {
	cluster string
	nested  *Matcher
}

// Cluster returns the cluster the datagram for dst is routed to, or false
// when no arm (and no on_no_match) applies.
func (m *Matcher) Cluster(dst netip.Addr) (string, bool) {
	if m == nil {
		return "", false
	}
	dst = dst.Unmap()
	if om := m.lookup(dst); om != nil {
		if c, ok := om.eval(dst); ok {
			return c, true
		}
	}
	if m.onNoMatch != nil {
		return m.onNoMatch.eval(dst)
	}
	return "", false
}

func (m *Matcher) lookup(dst netip.Addr) *onMatch {
	if m.exact != nil {
		return m.exact[dst]
	}
	for _, t := range m.ranges {
		if t.bits > dst.BitLen() {
			continue
		}
		p, err := dst.Prefix(t.bits)
		if err != nil {
			continue
		}
		if om, ok := t.m[p]; ok {
			return om
		}
	}
	return nil
}

func (o *onMatch) eval(dst netip.Addr) (string, bool) {
	if o.nested != nil {
		return o.nested.Cluster(dst)
	}
	return o.cluster, true
}

// Clusters lists every cluster an arm or on_no_match names, sorted and
// deduplicated: the references a listener holds on CDS.
func (m *Matcher) Clusters() []string {
	var out []string
	var walk func(*Matcher)
	add := func(o *onMatch) {
		if o == nil {
			return
		}
		if o.nested != nil {
			walk(o.nested)
			return
		}
		out = append(out, o.cluster)
	}
	walk = func(m *Matcher) {
		for _, o := range m.exact {
			add(o)
		}
		for _, t := range m.ranges {
			for _, o := range t.m {
				add(o)
			}
		}
		add(m.onNoMatch)
	}
	if m != nil {
		walk(m)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Compile turns the proto matcher into a Matcher. field is the path of the
// matcher inside its resource, used in error messages.
func Compile(pm *matcherv3.Matcher, field string) (*Matcher, error) {
	return compile(pm, field, 0)
}

func compile(pm *matcherv3.Matcher, field string, depth int) (*Matcher, error) {
	if pm == nil {
		return nil, fmt.Errorf("%s: matcher is empty", field)
	}
	if depth >= maxDepth {
		return nil, fmt.Errorf("%s: matchers nested deeper than %d", field, maxDepth)
	}
	m := &Matcher{}
	switch mt := pm.GetMatcherType().(type) {
	case *matcherv3.Matcher_MatcherTree_:
		if err := m.compileTree(mt.MatcherTree, field+".matcher_tree", depth); err != nil {
			return nil, err
		}
	case *matcherv3.Matcher_MatcherList_:
		return nil, fmt.Errorf("%s.matcher_list: unsupported, only matcher_tree on %s is implemented", field, DestinationIPInputName)
	case nil:
		// A matcher with only on_no_match is valid in Envoy: every datagram
		// takes on_no_match.
	default:
		return nil, fmt.Errorf("%s: unsupported matcher type %T", field, mt)
	}
	if pm.GetOnNoMatch() != nil {
		om, err := compileOnMatch(pm.GetOnNoMatch(), field+".on_no_match", depth)
		if err != nil {
			return nil, err
		}
		m.onNoMatch = om
	}
	return m, nil
}

func (m *Matcher) compileTree(t *matcherv3.Matcher_MatcherTree, field string, depth int) error {
	if err := checkInput(t.GetInput(), field+".input"); err != nil {
		return err
	}
	switch tt := t.GetTreeType().(type) {
	case *matcherv3.Matcher_MatcherTree_ExactMatchMap:
		m.exact = make(map[netip.Addr]*onMatch, len(tt.ExactMatchMap.GetMap()))
		for k, v := range tt.ExactMatchMap.GetMap() {
			kf := fmt.Sprintf("%s.exact_match_map.map[%q]", field, k)
			a, err := netip.ParseAddr(k)
			if err != nil {
				// Envoy would compare the string and never match; a key that
				// can never match is a generator bug worth refusing.
				return fmt.Errorf("%s: key is not an IP address: %w", kf, err)
			}
			om, err := compileOnMatch(v, kf, depth)
			if err != nil {
				return err
			}
			m.exact[a.Unmap()] = om
		}
	case *matcherv3.Matcher_MatcherTree_CustomMatch:
		return m.compileRanges(tt.CustomMatch, field+".custom_match", depth)
	case *matcherv3.Matcher_MatcherTree_PrefixMatchMap:
		return fmt.Errorf("%s.prefix_match_map: unsupported on %s, use %s", field, DestinationIPInputName, IPRangeMatcherName)
	default:
		return fmt.Errorf("%s: tree type is missing", field)
	}
	return nil
}

func checkInput(in *xdscore.TypedExtensionConfig, field string) error {
	if in == nil {
		return fmt.Errorf("%s: missing", field)
	}
	var d networkinputs.DestinationIPInput
	if err := unpack(in.GetTypedConfig(), &d); err != nil {
		return fmt.Errorf("%s (%q): only %s (DestinationIPInput) is supported: %w", field, in.GetName(), DestinationIPInputName, err)
	}
	return nil
}

func (m *Matcher) compileRanges(cm *xdscore.TypedExtensionConfig, field string, depth int) error {
	var ipm matcherv3.IPMatcher
	if err := unpack(cm.GetTypedConfig(), &ipm); err != nil {
		return fmt.Errorf("%s (%q): only %s (xds.type.matcher.v3.IPMatcher) is supported: %w", field, cm.GetName(), IPRangeMatcherName, err)
	}
	byBits := map[int]map[netip.Prefix]*onMatch{}
	for i, rm := range ipm.GetRangeMatchers() {
		rf := fmt.Sprintf("%s.typed_config.range_matchers[%d]", field, i)
		om, err := compileOnMatch(rm.GetOnMatch(), rf+".on_match", depth)
		if err != nil {
			return err
		}
		for j, r := range rm.GetRanges() {
			a, err := netip.ParseAddr(r.GetAddressPrefix())
			if err != nil {
				return fmt.Errorf("%s.ranges[%d].address_prefix: %w", rf, j, err)
			}
			bits := 0
			if r.GetPrefixLen() != nil {
				bits = int(r.GetPrefixLen().GetValue())
			}
			p, err := a.Unmap().Prefix(bits)
			if err != nil {
				return fmt.Errorf("%s.ranges[%d].prefix_len: %w", rf, j, err)
			}
			if byBits[bits] == nil {
				byBits[bits] = map[netip.Prefix]*onMatch{}
			}
			// Envoy's trie keeps the first entry for a duplicate range.
			if _, dup := byBits[bits][p]; !dup {
				byBits[bits][p] = om
			}
		}
	}
	for bits, t := range byBits {
		m.ranges = append(m.ranges, rangeTable{bits: bits, m: t})
	}
	slices.SortFunc(m.ranges, func(a, b rangeTable) int { return b.bits - a.bits })
	return nil
}

func compileOnMatch(om *matcherv3.Matcher_OnMatch, field string, depth int) (*onMatch, error) {
	if om == nil {
		return nil, fmt.Errorf("%s: missing", field)
	}
	if om.GetKeepMatching() {
		return nil, fmt.Errorf("%s.keep_matching: unsupported: udp_proxy takes exactly one route", field)
	}
	switch o := om.GetOnMatch().(type) {
	case *matcherv3.Matcher_OnMatch_Action:
		var r udpproxyv3.Route
		if err := unpack(o.Action.GetTypedConfig(), &r); err != nil {
			return nil, fmt.Errorf("%s.action (%q): only envoy.extensions.filters.udp.udp_proxy.v3.Route is supported: %w", field, o.Action.GetName(), err)
		}
		if r.GetCluster() == "" {
			return nil, fmt.Errorf("%s.action.typed_config.cluster: empty", field)
		}
		return &onMatch{cluster: r.GetCluster()}, nil
	case *matcherv3.Matcher_OnMatch_Matcher:
		n, err := compile(o.Matcher, field+".matcher", depth+1)
		if err != nil {
			return nil, err
		}
		return &onMatch{nested: n}, nil
	default:
		return nil, fmt.Errorf("%s: neither action nor matcher is set", field)
	}
}

func unpack(a *anypb.Any, into proto.Message) error {
	if a == nil {
		return fmt.Errorf("typed_config is missing")
	}
	return a.UnmarshalTo(into)
}

// Always is the matcher of udp_proxy's deprecated single-cluster route
// specifier: every datagram goes to cluster.
func Always(cluster string) *Matcher {
	return &Matcher{onNoMatch: &onMatch{cluster: cluster}}
}
