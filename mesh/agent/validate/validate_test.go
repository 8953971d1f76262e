package validate_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// scenario has two local pods (so every per-pod listener is checked), two
// UDPRoute-backed services and one TCP service.
const scenario = `
nodes: [{name: n1}, {name: n2}]
pods:
  - {name: c-0, namespace: t, node: n1, ip: 10.244.1.1, netns: /run/netns/c-0}
  - {name: c-1, namespace: t, node: n1, ip: 10.244.1.2, netns: /run/netns/c-1}
  - {name: a-0, namespace: t, node: n2, ip: 10.244.2.1, labels: {app: a}}
  - {name: b-0, namespace: t, node: n2, ip: 10.244.2.2, labels: {app: b}}
services:
  - {name: a, namespace: t, clusterIP: 10.96.0.1, selector: {app: a}, ports: [{port: 53, protocol: UDP}, {port: 80}]}
  - {name: b, namespace: t, clusterIP: 10.96.0.2, selector: {app: b}, ports: [{port: 53, targetPort: 5353, protocol: UDP}]}
udpRoutes:
  - metadata: {name: a, namespace: t}
    spec: {parentRefs: [{kind: Service, name: a}], rules: [{backendRefs: [{name: a}]}]}
  - metadata: {name: b, namespace: t}
    spec: {parentRefs: [{kind: Service, name: b}], rules: [{backendRefs: [{name: b}]}]}
`

// good returns a fresh, deep-copied snapshot content that passes every gate.
func good(t *testing.T) validate.Resources {
	t.Helper()
	st, err := registry.ParseScenario("gates.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	out, err := agent.NewBuilder("n1", constants.CaptureTProxy).Build(st, "v1")
	if err != nil {
		t.Fatal(err)
	}
	r := validate.Resources{}
	for typ, list := range out.Resources {
		for _, res := range list {
			r[typ] = append(r[typ], proto.Clone(res))
		}
	}
	if n := len(r[resource.ListenerType]); n != 4 {
		t.Fatalf("fixture should give 2 pods x (udp, tcp) = 4 listeners, got %d", n)
	}
	if err := validate.Check(r); err != nil {
		t.Fatalf("control: the unbroken snapshot must pass every gate, got %v", err)
	}
	return r
}

func remove(r validate.Resources, typ resource.Type, name string) {
	var keep []types.Resource
	for _, res := range r[typ] {
		n := ""
		switch v := res.(type) {
		case *cluster.Cluster:
			n = v.GetName()
		case *endpoint.ClusterLoadAssignment:
			n = v.GetClusterName()
		case *listener.Listener:
			n = v.GetName()
		}
		if n != name {
			keep = append(keep, res)
		}
	}
	r[typ] = keep
}

func listeners(r validate.Resources, prefix string) []*listener.Listener {
	var out []*listener.Listener
	for _, res := range r[resource.ListenerType] {
		if l := res.(*listener.Listener); strings.HasPrefix(l.GetName(), prefix) {
			out = append(out, l)
		}
	}
	return out
}

func udpConfig(t *testing.T, l *listener.Listener) *udpproxy.UdpProxyConfig {
	cfg := &udpproxy.UdpProxyConfig{}
	if err := l.GetListenerFilters()[0].GetTypedConfig().UnmarshalTo(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func setUDPConfig(t *testing.T, l *listener.Listener, cfg *udpproxy.UdpProxyConfig) {
	a, err := anypb.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.ListenerFilters[0].ConfigType = &listener.ListenerFilter_TypedConfig{TypedConfig: a}
}

// expectOnly asserts that Check fails, on gate only, and that every failure
// mentions each of wants.
func expectOnly(t *testing.T, r validate.Resources, gate string, minFailures int, wants ...string) {
	t.Helper()
	err := validate.Check(r)
	var ve *validate.Error
	if !errors.As(err, &ve) {
		t.Fatalf("gate %s: broken snapshot passed (err %v)", gate, err)
	}
	if g := ve.Gates(); len(g) != 1 || g[0] != gate {
		t.Fatalf("want only gate %s to fail, got %v: %v", gate, g, err)
	}
	if len(ve.Failures) < minFailures {
		t.Fatalf("gate %s: want at least %d failures (one per affected resource), got %d: %v", gate, minFailures, len(ve.Failures), err)
	}
	for _, f := range ve.Failures {
		for _, w := range wants {
			if !strings.Contains(f.String(), w) {
				t.Errorf("failure %q does not mention %q", f, w)
			}
		}
	}
}

func TestValidateAllSeesInvalidTypedConfig(t *testing.T) {
	r := good(t)
	for _, l := range listeners(r, "udp-capture~") {
		cfg := udpConfig(t, l)
		cfg.StatPrefix = "" // min_len: 1, inside an Any the listener's own ValidateAll never reaches
		setUDPConfig(t, l, cfg)
	}
	expectOnly(t, r, validate.GateValidateAll, 2, "StatPrefix", "udp_proxy.v3.UdpProxyConfig")
}

// TestUDPCaptureListenerResolvesAgainstCDS is #914's test, extended to every
// per-pod listener: each arm and the on_no_match must name a CDS cluster.
func TestUDPCaptureListenerResolvesAgainstCDS(t *testing.T) {
	t.Run("arm", func(t *testing.T) {
		r := good(t)
		remove(r, resource.ClusterType, "udp:b.t")
		remove(r, resource.EndpointType, "udp:b.t")
		expectOnly(t, r, validate.GateUDPArmsCDS, 2, `"udp:b.t"`, "exact_match_map.map[10.96.0.2]")
	})
	t.Run("on_no_match", func(t *testing.T) {
		r := good(t)
		remove(r, resource.ClusterType, "blackhole")
		expectOnly(t, r, validate.GateUDPArmsCDS, 2, `"blackhole"`, "on_no_match")
	})
	t.Run("missing on_no_match", func(t *testing.T) {
		r := good(t)
		for _, l := range listeners(r, "udp-capture~") {
			cfg := udpConfig(t, l)
			cfg.GetMatcher().OnNoMatch = nil
			setUDPConfig(t, l, cfg)
		}
		expectOnly(t, r, validate.GateUDPArmsCDS, 2, "no on_no_match")
	})
	t.Run("every listener checked", func(t *testing.T) {
		r := good(t)
		// Break only the second pod's listener: a check that looked at the
		// first listener alone would pass.
		l := listeners(r, "udp-capture~")[1]
		cfg := udpConfig(t, l)
		cfg.GetMatcher().GetMatcherTree().GetExactMatchMap().GetMap()["10.96.0.1"].GetAction().TypedConfig, _ = anypb.New(&udpproxy.Route{Cluster: "udp:gone.t"})
		setUDPConfig(t, l, cfg)
		expectOnly(t, r, validate.GateUDPArmsCDS, 1, l.GetName(), `"udp:gone.t"`)
	})
}

func TestTCPChainsResolveAgainstCDS(t *testing.T) {
	r := good(t)
	remove(r, resource.ClusterType, "tcp:a.t")
	remove(r, resource.EndpointType, "tcp:a.t")
	expectOnly(t, r, validate.GateTCPChainsCDS, 2, `"tcp:a.t"`, "tcp-capture~t~")
}

func TestEDSNamesResolve(t *testing.T) {
	t.Run("missing load assignment", func(t *testing.T) {
		r := good(t)
		remove(r, resource.EndpointType, "udp:a.t")
		expectOnly(t, r, validate.GateEDSNames, 1, `"udp:a.t"`, "no ClusterLoadAssignment")
	})
	t.Run("orphan load assignment", func(t *testing.T) {
		r := good(t)
		r[resource.EndpointType] = append(r[resource.EndpointType], &endpoint.ClusterLoadAssignment{ClusterName: "udp:orphan.t"})
		expectOnly(t, r, validate.GateEDSNames, 1, "udp:orphan.t", "no EDS cluster")
	})
}

// TestUDPSessionLimit: every UDP cluster must state the max_connections
// circuit breaker that caps its udp_proxy sessions; a TCP cluster need not.
func TestUDPSessionLimit(t *testing.T) {
	udpClusters := func(r validate.Resources) []*cluster.Cluster {
		var out []*cluster.Cluster
		for _, res := range r[resource.ClusterType] {
			if c := res.(*cluster.Cluster); strings.HasPrefix(c.GetName(), "udp:") {
				out = append(out, c)
			}
		}
		if len(out) != 2 {
			t.Fatalf("fixture should give 2 UDP clusters, got %d", len(out))
		}
		return out
	}
	threshold := func(p core.RoutingPriority, limit *wrapperspb.UInt32Value) *cluster.CircuitBreakers {
		return &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{Priority: p, MaxConnections: limit}}}
	}
	for _, tc := range []struct {
		name string
		cb   *cluster.CircuitBreakers
		want string
	}{
		{"absent", nil, "no DEFAULT priority threshold"},
		{"HIGH only", threshold(core.RoutingPriority_HIGH, wrapperspb.UInt32(1024)), "no DEFAULT priority threshold"},
		{"no max_connections", threshold(core.RoutingPriority_DEFAULT, nil), "does not set max_connections"},
		{"zero", threshold(core.RoutingPriority_DEFAULT, wrapperspb.UInt32(0)), "admits no session"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := good(t)
			for _, c := range udpClusters(r) {
				c.CircuitBreakers = tc.cb
			}
			expectOnly(t, r, validate.GateUDPSessionLimit, 2, tc.want, "Cluster udp:")
		})
	}
	t.Run("every UDP cluster checked", func(t *testing.T) {
		r := good(t)
		c := udpClusters(r)[1]
		c.CircuitBreakers = nil
		expectOnly(t, r, validate.GateUDPSessionLimit, 1, "Cluster "+c.GetName())
	})
	t.Run("TCP cluster needs none", func(t *testing.T) {
		r := good(t)
		for _, res := range r[resource.ClusterType] {
			if c := res.(*cluster.Cluster); strings.HasPrefix(c.GetName(), "tcp:") {
				if c.GetCircuitBreakers() != nil {
					t.Fatalf("control: %s carries circuit_breakers; this case would not test a TCP cluster without one", c.GetName())
				}
				return
			}
		}
		t.Fatal("control: the fixture has no TCP cluster")
	})
}

func tlsCluster(t *testing.T, secret string) *cluster.Cluster {
	tc, err := anypb.New(&tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
		TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{{Name: secret,
			SdsConfig: &core.ConfigSource{ResourceApiVersion: core.ApiVersion_V3, ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return &cluster.Cluster{
		Name:                 "mtls",
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		LoadAssignment:       &endpoint.ClusterLoadAssignment{ClusterName: "mtls"},
		TransportSocket:      &core.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: tc}},
	}
}

func TestSDSNamesResolve(t *testing.T) {
	r := good(t)
	r[resource.ClusterType] = append(r[resource.ClusterType], tlsCluster(t, "spiffe://aether.local/ns/t/sa/default"))
	expectOnly(t, r, validate.GateSDSNames, 1, "spiffe://aether.local/ns/t/sa/default", "not in SDS")

	// Green: the same reference with its secret published passes.
	r[resource.SecretType] = append(r[resource.SecretType], &tlsv3.Secret{Name: "spiffe://aether.local/ns/t/sa/default"})
	if err := validate.Check(r); err != nil {
		t.Fatalf("with the secret present the snapshot must pass: %v", err)
	}
}

func TestWIPFieldsPinned(t *testing.T) {
	uses, err := validate.WIPUses(good(t))
	if err != nil {
		t.Fatal(err)
	}
	// One matcher per UDP capture listener, and nothing else.
	if want := map[string]int{validate.PinnedWIPFields[0]: 2}; fmt.Sprint(uses) != fmt.Sprint(want) {
		t.Fatalf("work-in-progress uses = %v, want %v", uses, want)
	}

	t.Run("unpinned field", func(t *testing.T) {
		r := good(t)
		c := r[resource.ClusterType][1].(*cluster.Cluster)
		c.Http2ProtocolOptions = &core.Http2ProtocolOptions{UseOghttp2Codec: wrapperspb.Bool(true)} //nolint:staticcheck // the red case needs a WiP field
		expectOnly(t, r, validate.GateWIPFields, 1, "use_oghttp2_codec", "not pinned")
	})
	t.Run("count", func(t *testing.T) {
		// The deprecated single-cluster specifier uses no WiP field: the
		// pin says the matcher is in use, so a listener generated without
		// it is a drift the gate must see.
		r := good(t)
		for _, l := range listeners(r, "udp-capture~") {
			cfg := udpConfig(t, l)
			cfg.RouteSpecifier = &udpproxy.UdpProxyConfig_Cluster{Cluster: "udp:a.t"} //nolint:staticcheck
			setUDPConfig(t, l, cfg)
		}
		expectOnly(t, r, validate.GateWIPFields, 1, "pinned at 1")
	})
}

func TestCaptureListenerContract(t *testing.T) {
	t.Run("not transparent", func(t *testing.T) {
		r := good(t)
		for _, l := range listeners(r, "") {
			l.Transparent = wrapperspb.Bool(false)
		}
		expectOnly(t, r, validate.GateCaptureListener, 4, "transparent must be true")
	})
	t.Run("wrong port", func(t *testing.T) {
		r := good(t)
		l := listeners(r, "udp-capture~")[0]
		l.GetAddress().GetSocketAddress().PortSpecifier = &core.SocketAddress_PortValue{PortValue: 18081}
		expectOnly(t, r, validate.GateCaptureListener, 1, "0.0.0.0:18081", l.GetName())
	})
	t.Run("no netns", func(t *testing.T) {
		r := good(t)
		l := listeners(r, "tcp-capture~")[0]
		l.GetAddress().GetSocketAddress().NetworkNamespaceFilepath = ""
		expectOnly(t, r, validate.GateCaptureListener, 1, "network_namespace_filepath")
	})
}

// TestValidateAllSeesInvalidFilterChain: filter chains are validated apart
// from their listener (once per distinct chain); a rule broken inside one is
// still seen, on every listener carrying it.
func TestValidateAllSeesInvalidFilterChain(t *testing.T) {
	r := good(t)
	for _, l := range listeners(r, "tcp-capture~") {
		l.GetFilterChains()[0].GetFilterChainMatch().GetPrefixRanges()[0].PrefixLen = wrapperspb.UInt32(200) // lte: 128
	}
	expectOnly(t, r, validate.GateValidateAll, 2, "filter_chains[0]", "PrefixLen")
}

// TestSharedContentCheckedOnce: the builder shares one udp_proxy filter and
// one list of filter chains between every pod's listeners; breaking the
// shared piece fails every listener, not only the first one looked at.
func TestSharedContentCheckedOnce(t *testing.T) {
	st, err := registry.ParseScenario("gates.yaml", []byte(scenario))
	if err != nil {
		t.Fatal(err)
	}
	out, err := agent.NewBuilder("n1", constants.CaptureTProxy).Build(st, "v1")
	if err != nil {
		t.Fatal(err)
	}
	r := validate.Resources(out.Resources)
	tcp := listeners(r, "tcp-capture~")
	if len(tcp) != 2 || &tcp[0].GetFilterChains()[0] != &tcp[1].GetFilterChains()[0] {
		t.Fatal("control: the builder no longer shares the filter chains; this test would not test the memo")
	}
	if err := validate.Check(r); err != nil {
		t.Fatalf("control: %v", err)
	}
	remove(r, resource.ClusterType, "tcp:a.t")
	remove(r, resource.EndpointType, "tcp:a.t")
	expectOnly(t, r, validate.GateTCPChainsCDS, 2, `"tcp:a.t"`)
	var ve *validate.Error
	errors.As(validate.Check(r), &ve)
	if ve.Failures[0].Resource == ve.Failures[1].Resource {
		t.Fatalf("both failures name %s; want one per listener", ve.Failures[0].Resource)
	}
}
