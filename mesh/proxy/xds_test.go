package proxy_test

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/internal/proxytest"
)

// runProxy runs a proxy with no namespaces involved: these tests exercise
// the xDS half against go-control-plane's own delta server, unprivileged.
func runProxy(t *testing.T, srv *proxytest.Server) *proxy.Proxy {
	p := proxy.New(proxy.Options{Node: node, XDS: srv.Target, Log: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return p
}

// loopbackListener is a plain (not transparent) UDP listener on an
// ephemeral loopback port in this process's namespace, so it can be opened
// without privileges.
func loopbackListener(name string, cfg *udpproxyv3.UdpProxyConfig) *listenerv3.Listener {
	a, err := anypb.New(cfg)
	if err != nil {
		panic(err)
	}
	return &listenerv3.Listener{
		Name: name,
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Protocol: corev3.SocketAddress_UDP, Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: 0},
		}}},
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: "envoy.filters.udp_listener.udp_proxy", ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: a}}},
	}
}

func snapshotWith(l *listenerv3.Listener) map[resource.Type][]types.Resource {
	svc := proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.244.2.2:5001")}}
	res := proxytest.UDPSnapshot("", time.Minute, []proxytest.Service{svc}, nil)
	res[resource.ListenerType] = []types.Resource{l}
	return res
}

func acked(typeURL string) func(*discoveryv3.DeltaDiscoveryRequest) bool {
	return func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return r.GetTypeUrl() == typeURL && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil
	}
}

// A listener using a udp_proxy field this data plane does not implement is
// NACKed with an error_detail naming the resource and the field, nothing of
// it runs, and the clusters in the same snapshot are ACKed (the control:
// the stream works and rejection is specific). Publishing the fixed
// listener is then ACKed and the listener runs.
func TestNACKNamesResourceAndField(t *testing.T) {
	srv := proxytest.NewServer(t)
	cfg := &udpproxyv3.UdpProxyConfig{
		StatPrefix:       "s",
		RouteSpecifier:   &udpproxyv3.UdpProxyConfig_Matcher{Matcher: proxytest.ExactMatcher([]proxytest.Service{{Name: "svc-a.default", VIP: proxytest.VIP(0)}}, "blackhole")},
		UseOriginalSrcIp: true,
	}
	srv.Set(t, node, snapshotWith(loopbackListener("udp-bad", cfg)))
	p := runProxy(t, srv)
	srv.WaitRequest(t, "a CDS ACK", acked(resource.ClusterType))
	nack := srv.WaitRequest(t, "an LDS NACK", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return r.GetTypeUrl() == resource.ListenerType && r.GetErrorDetail() != nil
	})
	want := `Listener "udp-bad".listener_filters[0].typed_config.use_original_src_ip`
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, want) {
		t.Fatalf("NACK error_detail %q does not name %s", msg, want)
	}
	if ls := p.Listeners(); len(ls) != 0 {
		t.Fatalf("a NACKed listener runs: %v", ls)
	}
	cfg.UseOriginalSrcIp = false
	srv.Set(t, node, snapshotWith(loopbackListener("udp-bad", cfg)))
	srv.WaitRequest(t, "an LDS ACK", acked(resource.ListenerType))
	waitFor(t, "the fixed listener to run", func() bool { return slices.Contains(p.Listeners(), "udp-bad") })
	if v, _ := p.Metrics().Value("aether_proxy_xds_updates_total", map[string]string{"type": resource.ListenerType, "result": "nack"}); v != 1 {
		t.Errorf("xds nack counter reads %v, want 1", v)
	}
}

// LDS is requested only after CDS, and on a fresh stream (an agent restart)
// every held resource is stated in initial_resource_versions, as Envoy does.
func TestFreshStreamStatesHeldVersions(t *testing.T) {
	srv := proxytest.NewServer(t)
	cfg := &udpproxyv3.UdpProxyConfig{StatPrefix: "s", RouteSpecifier: &udpproxyv3.UdpProxyConfig_Matcher{Matcher: proxytest.ExactMatcher([]proxytest.Service{{Name: "svc-a.default", VIP: proxytest.VIP(0)}}, "blackhole")}}
	srv.Set(t, node, snapshotWith(loopbackListener("udp-ok", cfg)))
	p := runProxy(t, srv)
	waitFor(t, "the listener to run", func() bool { return slices.Contains(p.Listeners(), "udp-ok") })
	srv.WaitRequest(t, "an EDS ACK", acked(resource.EndpointType))
	var order []string
	for _, r := range srv.Requests() {
		if r.GetResponseNonce() == "" && len(r.GetResourceNamesSubscribe()) > 0 && !slices.Contains(order, r.GetTypeUrl()) {
			order = append(order, r.GetTypeUrl())
		}
	}
	if want := []string{resource.ClusterType, resource.EndpointType, resource.ListenerType}; !slices.Equal(order, want) {
		t.Errorf("subscription order %v, want %v", order, want)
	}
	before := len(srv.Requests())
	srv.Restart(t)
	for typ, want := range map[string][]string{
		resource.ClusterType:  {"blackhole", "udp:svc-a.default"},
		resource.EndpointType: {"udp:svc-a.default"},
		resource.ListenerType: {"udp-ok"},
	} {
		r := srv.WaitRequest(t, "a fresh "+typ+" request", func(r *discoveryv3.DeltaDiscoveryRequest) bool {
			return r.GetTypeUrl() == typ && len(r.GetInitialResourceVersions()) > 0
		})
		got := slices.Sorted(maps.Keys(r.GetInitialResourceVersions()))
		if !slices.Equal(got, want) {
			t.Errorf("fresh %s stream states %v, want %v", typ, got, want)
		}
	}
	if len(srv.Requests()) <= before {
		t.Fatal("no request on the new stream")
	}
}
