package cluster_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
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

// The upstream protocol and the pool's idle_timeout come from the
// cluster's HttpProtocolOptions: absent, HTTP/1.1 and Envoy's hour;
// explicit 0 is "never"; a negative duration, an option the pool does not
// honour, or protocol options with no explicit protocol are refused by
// their field's path.
func TestHTTPProtocolOptions(t *testing.T) {
	with := func(po *upstreamhttpv3.HttpProtocolOptions) *clusterv3.Cluster {
		c := proxytest.EDSCluster("h2:s")
		a, err := anypb.New(po)
		if err != nil {
			t.Fatal(err)
		}
		c.TypedExtensionProtocolOptions = map[string]*anypb.Any{cluster.HTTPProtocolOptions: a}
		return c
	}
	explicit := func(common *corev3.HttpProtocolOptions, cfg *upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig) *upstreamhttpv3.HttpProtocolOptions {
		return &upstreamhttpv3.HttpProtocolOptions{CommonHttpProtocolOptions: common,
			UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: cfg}}
	}
	http1 := &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}}}
	http2 := &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}}}
	idle := func(d time.Duration) *corev3.HttpProtocolOptions {
		return &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(d)}
	}
	for _, tc := range []struct {
		name string
		c    *clusterv3.Cluster
		http cluster.UpstreamHTTP
		idle time.Duration
		err  string
	}{
		{name: "none", c: proxytest.EDSCluster("h2:s"), http: cluster.HTTP1, idle: time.Hour},
		{name: "http1 with a minute", c: with(explicit(idle(time.Minute), http1)), http: cluster.HTTP1, idle: time.Minute},
		{name: "http2 without common options", c: with(explicit(nil, http2)), http: cluster.HTTP2, idle: time.Hour},
		{name: "zero is never", c: with(explicit(idle(0), http2)), http: cluster.HTTP2, idle: 0},
		{name: "negative", c: with(explicit(idle(-time.Second), http1)), err: `common_http_protocol_options.idle_timeout: -1s`},
		{name: "unhonoured common option", c: with(explicit(&corev3.HttpProtocolOptions{MaxConnectionDuration: durationpb.New(time.Minute)}, http1)), err: `common_http_protocol_options.max_connection_duration`},
		{name: "no explicit protocol", c: with(&upstreamhttpv3.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamProtocolConfig{UseDownstreamProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_UseDownstreamHttpConfig{}}}), err: `use_downstream_protocol_config`},
		{name: "http1 option the pool does not honour", c: with(explicit(nil, &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{AllowAbsoluteUrl: wrapperspb.Bool(true)}}})), err: `explicit_http_config.http_protocol_options.allow_absolute_url`},
	} {
		s, err := cluster.FromProto(tc.c)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s.HTTP != tc.http || s.IdleTimeout != tc.idle {
			t.Errorf("%s: HTTP %d, idle %s; want %d, %s", tc.name, s.HTTP, s.IdleTimeout, tc.http, tc.idle)
		}
	}
}
