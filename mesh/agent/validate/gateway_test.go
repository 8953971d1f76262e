package validate_test

import (
	"path/filepath"
	"testing"
	"time"

	xdstypev3 "github.com/cncf/xds/go/xds/type/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/gateway"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsext"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// gatewayGood is the gateway node's snapshot of fixtures/scenarios/
// gateway.yaml, deep-copied (each listener its own chains), passing every
// gate: the control of each case below.
func gatewayGood(t *testing.T) validate.Resources {
	t.Helper()
	st, err := registry.LoadScenarioFile(filepath.Join("..", "..", "..", "fixtures", "scenarios", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	b := agent.NewBuilder("gw", constants.CaptureTProxy)
	b.HTTP = &agent.HTTPPath{MeshDomain: "mesh.test"}
	out, err := b.Build(st, "v1")
	if err != nil {
		t.Fatal(err)
	}
	r := validate.Resources{}
	for typ, list := range out.Resources {
		for _, res := range list {
			r[typ] = append(r[typ], proto.Clone(res))
		}
	}
	if n := len(listeners(r, "gateway-")); n != 2 {
		t.Fatalf("fixture should give the gateway's two 18009 listeners, got %d", n)
	}
	if err := validate.Check(r); err != nil {
		t.Fatalf("control: the unbroken gateway snapshot must pass every gate, got %v", err)
	}
	return r
}

func gwListener(t *testing.T, r validate.Resources, name string) *listener.Listener {
	t.Helper()
	ls := listeners(r, name)
	if len(ls) != 1 {
		t.Fatalf("want one listener %s, got %d", name, len(ls))
	}
	return ls[0]
}

func setBounds(t *testing.T, l *listener.Listener, q xdsext.QUICPassthrough) {
	t.Helper()
	tc, err := q.TypedConfig()
	if err != nil {
		t.Fatal(err)
	}
	l.ListenerFilters[0].ConfigType = &listener.ListenerFilter_TypedConfig{TypedConfig: tc}
}

func TestGatewayGates(t *testing.T) {
	tcpName, udpName := xdsnames.GatewayTCPListener("gw"), xdsnames.GatewayUDPListener("gw")
	cases := []struct {
		name  string
		edit  func(t *testing.T, r validate.Resources)
		gate  string
		min   int
		wants []string
	}{
		{"chain cluster not in CDS", func(t *testing.T, r validate.Resources) {
			remove(r, resource.ClusterType, "gateway:dst-a.demo")
			remove(r, resource.EndpointType, "gateway:dst-a.demo")
		}, validate.GateTCPChainsCDS, 2, []string{`"gateway:dst-a.demo"`, "gateway-"}},
		{"server name in two chains", func(t *testing.T, r validate.Resources) {
			for _, n := range []string{tcpName, udpName} {
				l := gwListener(t, r, n)
				l.FilterChains[1].FilterChainMatch.ServerNames = l.FilterChains[0].FilterChainMatch.ServerNames
			}
		}, validate.GateGatewayServerNames, 2, []string{`"8080.dst-a.demo.mesh.test" is in filter_chains[0] and filter_chains[1]`}},
		{"catch-all chain", func(t *testing.T, r validate.Resources) {
			gwListener(t, r, tcpName).FilterChains[0].FilterChainMatch = nil
			gwListener(t, r, udpName).FilterChains[0].FilterChainMatch = nil
		}, validate.GateGatewayServerNames, 2, []string{"lists no server name"}},
		{"TCP not on 18009", func(t *testing.T, r validate.Resources) {
			gwListener(t, r, tcpName).Address.GetSocketAddress().PortSpecifier = &core.SocketAddress_PortValue{PortValue: uint32(constants.InboundPort)}
		}, validate.GateGatewayListener, 1, []string{tcpName, "EastWestTunnelPort"}},
		{"UDP listener bound on TCP", func(t *testing.T, r validate.Resources) {
			gwListener(t, r, udpName).Address.GetSocketAddress().Protocol = core.SocketAddress_TCP
		}, validate.GateGatewayListener, 1, []string{udpName, "address must be UDP"}},
		{"UDP listener missing", func(t *testing.T, r validate.Resources) {
			remove(r, resource.ListenerType, udpName)
		}, validate.GateGatewayListener, 1, []string{"both transports of 18009", udpName}},
		{"TCP listener missing", func(t *testing.T, r validate.Resources) {
			remove(r, resource.ListenerType, tcpName)
		}, validate.GateGatewayListener, 1, []string{"both transports of 18009", tcpName}},
		{"no tls_inspector", func(t *testing.T, r validate.Resources) {
			gwListener(t, r, tcpName).ListenerFilters = nil
		}, validate.GateGatewayListener, 1, []string{"tls_inspector"}},
		{"no listener_filters_timeout", func(t *testing.T, r validate.Resources) {
			gwListener(t, r, tcpName).ListenerFiltersTimeout = nil
		}, validate.GateGatewayListener, 1, []string{"listener_filters_timeout must be stated"}},
		{"transports route apart", func(t *testing.T, r validate.Resources) {
			tp, err := anypb.New(&tcpproxy.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: "gateway:dst-b.demo"}})
			if err != nil {
				t.Fatal(err)
			}
			gwListener(t, r, udpName).FilterChains[0].Filters[0].ConfigType = &listener.Filter_TypedConfig{TypedConfig: tp}
		}, validate.GateGatewayListener, 1, []string{`routed to "gateway:dst-a.demo" on TCP, to "gateway:dst-b.demo" on UDP`}},
		{"a chain forwards another service's SNI", func(t *testing.T, r validate.Resources) {
			tp, err := anypb.New(&tcpproxy.TcpProxy{StatPrefix: "x", ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: "gateway:dst-b.demo"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range []string{tcpName, udpName} {
				gwListener(t, r, n).FilterChains[0].Filters[0].ConfigType = &listener.Filter_TypedConfig{TypedConfig: tp}
			}
		}, validate.GateGatewayChainRoutes, 1, []string{`forwards server name "8080.dst-a.demo.mesh.test" to "gateway:dst-b.demo"`}},
		{"addresses differ", func(t *testing.T, r validate.Resources) {
			gwListener(t, r, udpName).Address.GetSocketAddress().Address = "172.30.0.11"
		}, validate.GateGatewayListener, 1, []string{"the gateway has one address"}},
		{"not the QUIC passthrough's config", func(t *testing.T, r validate.Resources) {
			a, err := anypb.New(&xdstypev3.TypedStruct{TypeUrl: "type.example/other", Value: &structpb.Struct{}})
			if err != nil {
				t.Fatal(err)
			}
			gwListener(t, r, udpName).ListenerFilters[0].ConfigType = &listener.ListenerFilter_TypedConfig{TypedConfig: a}
		}, validate.GateGatewayListener, 1, []string{"type.example/other"}},
	}
	for _, f := range []string{"max_flows", "max_pending_flows", "max_pending_bytes_per_flow", "idle_timeout", "client_hello_timeout"} {
		cases = append(cases, struct {
			name  string
			edit  func(t *testing.T, r validate.Resources)
			gate  string
			min   int
			wants []string
		}{"bound " + f + " unstated", func(t *testing.T, r validate.Resources) {
			q := gateway.DefaultQUICBounds
			switch f {
			case "max_flows":
				q.MaxFlows = 0
			case "max_pending_flows":
				q.MaxPendingFlows = 0
			case "max_pending_bytes_per_flow":
				q.MaxPendingBytesPerFlow = 0
			case "idle_timeout":
				q.IdleTimeout = 0
			case "client_hello_timeout":
				q.ClientHelloTimeout = 0
			}
			setBounds(t, gwListener(t, r, udpName), q)
		}, validate.GateGatewayBounds, 1, []string{"value." + f + ": not stated"}})
	}
	cases = append(cases, struct {
		name  string
		edit  func(t *testing.T, r validate.Resources)
		gate  string
		min   int
		wants []string
	}{"bound not positive", func(t *testing.T, r validate.Resources) {
		l := gwListener(t, r, udpName)
		var ts xdstypev3.TypedStruct
		if err := l.ListenerFilters[0].GetTypedConfig().UnmarshalTo(&ts); err != nil {
			t.Fatal(err)
		}
		ts.Value.Fields["max_flows"] = structpb.NewNumberValue(-1)
		ts.Value.Fields["idle_timeout"] = structpb.NewStringValue((-time.Second).String())
		a, err := anypb.New(&ts)
		if err != nil {
			t.Fatal(err)
		}
		l.ListenerFilters[0].ConfigType = &listener.ListenerFilter_TypedConfig{TypedConfig: a}
	}, validate.GateGatewayBounds, 1, []string{"max_flows: -1, want a whole number from 1"}})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := gatewayGood(t)
			c.edit(t, r)
			expectOnly(t, r, c.gate, c.min, c.wants...)
		})
	}
}
