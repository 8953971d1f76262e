package listener_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/agent/gateway"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// gatewayListeners are the agent's two 18009 listeners for two exposed
// services, fresh for each call.
func gatewayListeners(t *testing.T) (tcp, udp *listenerv3.Listener) {
	t.Helper()
	res, err := gateway.Resources(gateway.Config{
		Node: "gw", Address: netip.MustParseAddr("172.30.0.10"), Domain: "mesh.test",
		Services: []gateway.Service{
			{Name: "a", Namespace: "demo", Port: 8080, Pods: []netip.Addr{netip.MustParseAddr("10.244.2.2")}},
			{Name: "b", Namespace: "demo", Port: 9090, Pods: []netip.Addr{netip.MustParseAddr("10.244.2.3")}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ls := res[resource.ListenerType]
	return proto.Clone(ls[0]).(*listenerv3.Listener), proto.Clone(ls[1]).(*listenerv3.Listener)
}

// The gateway's listeners compile with Envoy's semantics: each chain's
// server name routes to its cluster, an unknown name to none (no default
// chain), the stated timeouts and bounds are kept, and the listener names
// the clusters its chains use.
func TestGatewayListenersCompile(t *testing.T) {
	tl, ul := gatewayListeners(t)
	for _, c := range []struct {
		l    *listenerv3.Listener
		quic bool
	}{{tl, false}, {ul, true}} {
		s, err := listener.FromProto(c.l)
		if err != nil {
			t.Fatalf("%s: %v", c.l.GetName(), err)
		}
		p := s.Passthrough
		if p == nil || s.TCP != nil || s.UDP != nil || s.HTTP != nil {
			t.Fatalf("%s: compiled as %+v, want a passthrough listener only", c.l.GetName(), s)
		}
		if s.Socket.Addr != netip.MustParseAddrPort("172.30.0.10:18009") {
			t.Errorf("%s: socket %s", c.l.GetName(), s.Socket.Addr)
		}
		for sni, want := range map[string]string{"8080.a.demo.mesh.test": "gateway:a.demo", "9090.b.demo.mesh.test": "gateway:b.demo"} {
			if fc, ok := p.Routes.Match(sni); !ok || fc.Cluster != want {
				t.Errorf("%s: %s routes to %q (%v), want %q", c.l.GetName(), sni, fc.Cluster, ok, want)
			}
		}
		for _, sni := range []string{"", "8080.c.demo.mesh.test", "9090.a.demo.mesh.test"} {
			if fc, ok := p.Routes.Match(sni); ok {
				t.Errorf("%s: %q routes to %q; a name no chain lists must match none", c.l.GetName(), sni, fc.Cluster)
			}
		}
		if got := strings.Join(s.Clusters(), ","); got != "gateway:a.demo,gateway:b.demo" {
			t.Errorf("%s: clusters %s", c.l.GetName(), got)
		}
		if c.quic {
			want := listener.PassthroughQUIC{StatPrefix: "gateway-udp~gw", MaxFlows: 1024, MaxPendingFlows: 256, MaxPendingBytes: 32 << 10, IdleTimeout: time.Minute, ClientHelloTimeout: 15 * time.Second}
			if p.QUIC == nil || *p.QUIC != want {
				t.Errorf("QUIC bounds %+v, want %+v", p.QUIC, want)
			}
		} else if p.QUIC != nil || p.InspectTimeout != 15*time.Second {
			t.Errorf("TCP: QUIC %+v, inspect timeout %s, want none and 15s", p.QUIC, p.InspectTimeout)
		}
	}
}

func setTCPProxy(t *testing.T, fc *listenerv3.FilterChain, edit func(*tcpproxyv3.TcpProxy)) {
	t.Helper()
	var tp tcpproxyv3.TcpProxy
	if err := fc.Filters[0].GetTypedConfig().UnmarshalTo(&tp); err != nil {
		t.Fatal(err)
	}
	edit(&tp)
	a, err := anypb.New(&tp)
	if err != nil {
		t.Fatal(err)
	}
	fc.Filters[0].ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
}

func setQUICField(t *testing.T, l *listenerv3.Listener, k string, v *structpb.Value) {
	t.Helper()
	var ts xdstypev3.TypedStruct
	if err := l.ListenerFilters[0].GetTypedConfig().UnmarshalTo(&ts); err != nil {
		t.Fatal(err)
	}
	if v == nil {
		delete(ts.Value.Fields, k)
	} else {
		ts.Value.Fields[k] = v
	}
	a, err := anypb.New(&ts)
	if err != nil {
		t.Fatal(err)
	}
	l.ListenerFilters[0].ConfigType = &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}
}

// What the passthrough cannot honour is refused, naming the field, as
// Envoy rejects a listener it cannot build; the proxy NACKs it.
func TestGatewayListenersRefuse(t *testing.T) {
	cases := []struct {
		name string
		udp  bool
		edit func(t *testing.T, l *listenerv3.Listener)
		want string
	}{
		{"tcp_proxy idle_timeout unset (Envoy's hour)", false, func(t *testing.T, l *listenerv3.Listener) {
			setTCPProxy(t, l.FilterChains[0], func(tp *tcpproxyv3.TcpProxy) { tp.IdleTimeout = nil })
		}, "filter_chains[0] (\"8080.a.demo.mesh.test\").filters[0].typed_config.idle_timeout"},
		{"tcp_proxy idle_timeout set", true, func(t *testing.T, l *listenerv3.Listener) {
			setTCPProxy(t, l.FilterChains[1], func(tp *tcpproxyv3.TcpProxy) { tp.IdleTimeout = durationpb.New(time.Minute) })
		}, "filter_chains[1] (\"9090.b.demo.mesh.test\").filters[0].typed_config.idle_timeout"},
		{"tcp_proxy field the passthrough lacks", false, func(t *testing.T, l *listenerv3.Listener) {
			setTCPProxy(t, l.FilterChains[0], func(tp *tcpproxyv3.TcpProxy) { tp.MaxConnectAttempts = wrapperspb.UInt32(3) })
		}, "max_connect_attempts"},
		{"weighted clusters", false, func(t *testing.T, l *listenerv3.Listener) {
			setTCPProxy(t, l.FilterChains[0], func(tp *tcpproxyv3.TcpProxy) {
				tp.ClusterSpecifier = &tcpproxyv3.TcpProxy_WeightedClusters{WeightedClusters: &tcpproxyv3.TcpProxy_WeightedCluster{Clusters: []*tcpproxyv3.TcpProxy_WeightedCluster_ClusterWeight{{Name: "x", Weight: 1}}}}
			})
		}, "weighted_clusters"},
		{"two filters", false, func(t *testing.T, l *listenerv3.Listener) {
			l.FilterChains[0].Filters = append(l.FilterChains[0].Filters, l.FilterChains[0].Filters[0])
		}, "filters: 2 filters, want exactly one envoy.filters.network.tcp_proxy"},
		{"match on more than server_names", false, func(t *testing.T, l *listenerv3.Listener) {
			l.FilterChains[0].FilterChainMatch.TransportProtocol = "tls"
		}, "filter_chain_match.transport_protocol"},
		{"server name in two chains", true, func(t *testing.T, l *listenerv3.Listener) {
			l.FilterChains[1].FilterChainMatch.ServerNames = []string{"8080.a.demo.mesh.test"}
		}, `both list server name "8080.a.demo.mesh.test"`},
		{"transport socket on a chain", false, func(t *testing.T, l *listenerv3.Listener) {
			l.FilterChains[0].TransportSocket = &corev3.TransportSocket{Name: xdsnames.TLSTransportSocket}
		}, "filter_chains[0] (\"8080.a.demo.mesh.test\").transport_socket"},
		{"tls_inspector option", false, func(t *testing.T, l *listenerv3.Listener) {
			a, err := anypb.New(&tlsinspectorv3.TlsInspector{EnableJa3Fingerprinting: wrapperspb.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			l.ListenerFilters[0].ConfigType = &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}
		}, "listener_filters[0].typed_config.enable_ja3_fingerprinting"},
		{"continue on listener filters timeout", false, func(t *testing.T, l *listenerv3.Listener) {
			l.ContinueOnListenerFiltersTimeout = true
		}, "continue_on_listener_filters_timeout"},
		{"negative listener_filters_timeout", false, func(t *testing.T, l *listenerv3.Listener) {
			l.ListenerFiltersTimeout = durationpb.New(-time.Second)
		}, "listener_filters_timeout"},
		{"listener_filters_timeout on UDP", true, func(t *testing.T, l *listenerv3.Listener) {
			l.ListenerFiltersTimeout = durationpb.New(time.Second)
		}, "listener_filters_timeout: not read on a UDP listener"},
		{"quic_options on the passthrough", true, func(t *testing.T, l *listenerv3.Listener) {
			l.UdpListenerConfig = &listenerv3.UdpListenerConfig{QuicOptions: &listenerv3.QuicProtocolOptions{}}
		}, "udp_listener_config"},
		{"unknown bound", true, func(t *testing.T, l *listenerv3.Listener) {
			setQUICField(t, l, "max_flow", structpb.NewNumberValue(3))
		}, "listener_filters[0].typed_config.value.max_flow: unknown field"},
		{"bound of the wrong type", true, func(t *testing.T, l *listenerv3.Listener) {
			setQUICField(t, l, "max_flows", structpb.NewStringValue("many"))
		}, "value.max_flows: want a number"},
		{"fractional bound", true, func(t *testing.T, l *listenerv3.Listener) {
			setQUICField(t, l, "max_pending_flows", structpb.NewNumberValue(2.5))
		}, "value.max_pending_flows: 2.5"},
		{"bad duration", true, func(t *testing.T, l *listenerv3.Listener) {
			setQUICField(t, l, "idle_timeout", structpb.NewStringValue("a minute"))
		}, "value.idle_timeout"},
		{"another extension's TypedStruct", true, func(t *testing.T, l *listenerv3.Listener) {
			a, err := anypb.New(&xdstypev3.TypedStruct{TypeUrl: "type.example/other", Value: &structpb.Struct{}})
			if err != nil {
				t.Fatal(err)
			}
			l.ListenerFilters[0].ConfigType = &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}
		}, `listener_filters[0].typed_config.type_url: "type.example/other"`},
		{"a second listener filter", true, func(t *testing.T, l *listenerv3.Listener) {
			l.ListenerFilters = append(l.ListenerFilters, l.ListenerFilters[0])
		}, "listener_filters: 2 filters, want exactly one aether.filters.udp_listener.quic_passthrough"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tl, ul := gatewayListeners(t)
			l := tl
			if c.udp {
				l = ul
			}
			if _, err := listener.FromProto(l); err != nil {
				t.Fatalf("control: the agent's listener must compile: %v", err)
			}
			c.edit(t, l)
			_, err := listener.FromProto(l)
			if err == nil {
				t.Fatal("compiled; want a refusal naming the field")
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), l.GetName()) {
				t.Errorf("error %q does not name %q in listener %s", err, c.want, l.GetName())
			}
		})
	}
}

// A bound left out is the forwarder's default, as an unset Envoy field is;
// the config gates are what insist it is stated.
func TestGatewayUnsetBoundIsDefault(t *testing.T) {
	_, ul := gatewayListeners(t)
	setQUICField(t, ul, "max_flows", nil)
	s, err := listener.FromProto(ul)
	if err != nil {
		t.Fatal(err)
	}
	if s.Passthrough.QUIC.MaxFlows != 0 {
		t.Errorf("max_flows %d, want 0 (the forwarder's default)", s.Passthrough.QUIC.MaxFlows)
	}
}

// listener_filters_timeout is read on the gateway only: elsewhere no code
// reads it, and it would be silently ignored.
func TestListenerFiltersTimeoutOnlyOnGateway(t *testing.T) {
	svc := proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.244.2.2:6001")}}
	l := proxytest.TCPListener("tcp-capture~default~client", "", []proxytest.Service{svc})
	l.ListenerFiltersTimeout = durationpb.New(time.Second)
	if _, err := listener.FromProto(l); err == nil || !strings.Contains(err.Error(), "listener_filters_timeout: supported on an east-west gateway listener only") {
		t.Fatalf("err %v, want listener_filters_timeout refused", err)
	}
}
