package match_test

import (
	"net/netip"
	"strings"
	"testing"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/proxy/match"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

func ranges(onNoMatch string, rs map[string]string) *matcherv3.Matcher {
	ipm := &matcherv3.IPMatcher{}
	for cidr, cl := range rs {
		p := netip.MustParsePrefix(cidr)
		ipm.RangeMatchers = append(ipm.RangeMatchers, &matcherv3.IPMatcher_IPRangeMatcher{
			Ranges:  []*xdscore.CidrRange{{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))}},
			OnMatch: proxytest.Route(cl),
		})
	}
	a, _ := anypb.New(ipm)
	m := &matcherv3.Matcher{MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
		Input:    proxytest.DestinationIPInput(),
		TreeType: &matcherv3.Matcher_MatcherTree_CustomMatch{CustomMatch: &xdscore.TypedExtensionConfig{Name: match.IPRangeMatcherName, TypedConfig: a}},
	}}}
	if onNoMatch != "" {
		m.OnNoMatch = proxytest.Route(onNoMatch)
	}
	return m
}

func TestSelection(t *testing.T) {
	exact := proxytest.ExactMatcher([]proxytest.Service{
		{Name: "svc-a.default", VIP: netip.MustParseAddr("10.96.0.10")},
		{Name: "svc-b.default", VIP: netip.MustParseAddr("10.96.0.11")},
	}, "blackhole")
	nested := ranges("", map[string]string{"10.96.0.0/16": "udp:any"})
	nested.OnNoMatch = &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Matcher{Matcher: exact}}
	cases := []struct {
		name string
		m    *matcherv3.Matcher
		dst  string
		want string // "" = no match
	}{
		{"exact arm a", exact, "10.96.0.10", "udp:svc-a.default"},
		{"exact arm b", exact, "10.96.0.11", "udp:svc-b.default"},
		{"v4-mapped destination", exact, "::ffff:10.96.0.11", "udp:svc-b.default"},
		{"exact miss takes on_no_match", exact, "10.96.0.12", "blackhole"},
		{"longest prefix wins", ranges("", map[string]string{"10.96.0.0/16": "wide", "10.96.0.0/24": "narrow", "10.96.0.10/32": "host"}), "10.96.0.10", "host"},
		{"next longest prefix", ranges("", map[string]string{"10.96.0.0/16": "wide", "10.96.0.0/24": "narrow", "10.96.0.10/32": "host"}), "10.96.0.11", "narrow"},
		{"shortest prefix", ranges("", map[string]string{"10.96.0.0/16": "wide", "10.96.0.0/24": "narrow"}), "10.96.7.1", "wide"},
		{"range miss without on_no_match", ranges("", map[string]string{"10.96.0.0/16": "wide"}), "10.97.0.1", ""},
		{"range miss falls to the nested matcher's on_no_match", nested, "10.97.0.1", "blackhole"},
		{"range hit before nested", nested, "10.96.0.11", "udp:any"},
	}
	for _, c := range cases {
		m, err := match.Compile(c.m, "matcher")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, ok := m.Cluster(netip.MustParseAddr(c.dst))
		if !ok {
			got = ""
		}
		if got != c.want {
			t.Errorf("%s: %s routed to %q, want %q", c.name, c.dst, got, c.want)
		}
	}
}

func TestRejectsWhatItDoesNotImplement(t *testing.T) {
	good := func() *matcherv3.Matcher {
		return proxytest.ExactMatcher([]proxytest.Service{{Name: "s", VIP: netip.MustParseAddr("10.96.0.10")}}, "blackhole")
	}
	cases := []struct {
		name   string
		mutate func(*matcherv3.Matcher)
		want   string
	}{
		{"matcher_list", func(m *matcherv3.Matcher) {
			m.MatcherType = &matcherv3.Matcher_MatcherList_{MatcherList: &matcherv3.Matcher_MatcherList{}}
		}, "matcher.matcher_list"},
		{"wrong input", func(m *matcherv3.Matcher) {
			a, _ := anypb.New(&matcherv3.IPMatcher{})
			m.GetMatcherTree().Input = &xdscore.TypedExtensionConfig{Name: "envoy.matching.inputs.source_ip", TypedConfig: a}
		}, "matcher.matcher_tree.input"},
		{"keep_matching", func(m *matcherv3.Matcher) { m.OnNoMatch.KeepMatching = true }, "matcher.on_no_match.keep_matching"},
		{"key not an address", func(m *matcherv3.Matcher) {
			m.GetMatcherTree().GetExactMatchMap().Map["svc-a"] = proxytest.Route("x")
		}, `exact_match_map.map["svc-a"]`},
		{"action not a Route", func(m *matcherv3.Matcher) {
			a, _ := anypb.New(&matcherv3.IPMatcher{})
			m.OnNoMatch = &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: &xdscore.TypedExtensionConfig{Name: "x", TypedConfig: a}}}
		}, "matcher.on_no_match.action"},
		{"empty cluster", func(m *matcherv3.Matcher) { m.OnNoMatch = proxytest.Route("") }, "on_no_match.action.typed_config.cluster"},
	}
	if _, err := match.Compile(good(), "matcher"); err != nil {
		t.Fatalf("control: the unmodified matcher was rejected: %v", err)
	}
	for _, c := range cases {
		m := good()
		c.mutate(m)
		_, err := match.Compile(m, "matcher")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v does not name %q", c.name, err, c.want)
		}
	}
}
