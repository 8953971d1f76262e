package proxy_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/rigs/proxytest"
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

func udpProxyConfig(statPrefix string) *udpproxyv3.UdpProxyConfig {
	return &udpproxyv3.UdpProxyConfig{StatPrefix: statPrefix, RouteSpecifier: &udpproxyv3.UdpProxyConfig_Matcher{Matcher: proxytest.ExactMatcher([]proxytest.Service{{Name: "svc-a.default", VIP: proxytest.VIP(0)}}, "blackhole")}}
}

func snapshotWith(ls ...*listenerv3.Listener) map[resource.Type][]types.Resource {
	svc := proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.244.2.2:5001")}}
	res := proxytest.UDPSnapshot("", time.Minute, []proxytest.Service{svc}, nil)
	res[resource.ListenerType] = nil
	for _, l := range ls {
		res[resource.ListenerType] = append(res[resource.ListenerType], l)
	}
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
	srv.Set(t, node, snapshotWith(proxytest.LoopbackUDPListener("udp-bad", 0, cfg)))
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
	srv.Set(t, node, snapshotWith(proxytest.LoopbackUDPListener("udp-bad", 0, cfg)))
	srv.WaitRequest(t, "an LDS ACK", acked(resource.ListenerType))
	waitFor(t, "the fixed listener to run", func() bool { return slices.Contains(p.Listeners(), "udp-bad") })
	if v, _ := p.Metrics().Value("aether_proxy_xds_updates_total", map[string]string{"type": resource.ListenerType, "result": "nack"}); v != 1 {
		t.Errorf("xds nack counter reads %v, want 1", v)
	}
}

// LDS is requested only after CDS (SDS right after CDS, by wildcard, so
// secrets arrive while clusters warm), and on a fresh stream (an agent restart)
// every held resource is stated in initial_resource_versions, as Envoy does.
func TestFreshStreamStatesHeldVersions(t *testing.T) {
	srv := proxytest.NewServer(t)
	srv.Set(t, node, snapshotWith(proxytest.LoopbackUDPListener("udp-ok", 0, udpProxyConfig("s"))))
	p := runProxy(t, srv)
	waitFor(t, "the listener to run", func() bool { return slices.Contains(p.Listeners(), "udp-ok") })
	srv.WaitRequest(t, "an EDS ACK", acked(resource.EndpointType))
	var order []string
	for _, r := range srv.Requests() {
		if r.GetResponseNonce() == "" && len(r.GetResourceNamesSubscribe()) > 0 && !slices.Contains(order, r.GetTypeUrl()) {
			order = append(order, r.GetTypeUrl())
		}
	}
	if want := []string{resource.ClusterType, resource.SecretType, resource.EndpointType, resource.ListenerType}; !slices.Equal(order, want) {
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

func nacked(typeURL string) func(*discoveryv3.DeltaDiscoveryRequest) bool {
	return func(r *discoveryv3.DeltaDiscoveryRequest) bool {
		return r.GetTypeUrl() == typeURL && r.GetErrorDetail() != nil
	}
}

// A listener moved to another address keeps its old socket until the new
// one is bound: with the new address taken, the update is NACKed and the
// old socket goes on receiving; once the address is free the move lands,
// and only then is the old address released.
func TestListenerMoveBindsBeforeClosing(t *testing.T) {
	srv := proxytest.NewServer(t)
	srv.Set(t, node, snapshotWith(proxytest.LoopbackUDPListener("udp-move", 0, udpProxyConfig("s"))))
	p := runProxy(t, srv)
	waitFor(t, "the listener to run", func() bool { return p.UDPListener("udp-move") != nil })
	old := p.UDPListener("udp-move")
	oldAddr := old.LocalAddr()

	taken, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := uint32(taken.LocalAddr().(*net.UDPAddr).Port)
	srv.Set(t, node, snapshotWith(proxytest.LoopbackUDPListener("udp-move", port, udpProxyConfig("s"))))
	nack := srv.WaitRequest(t, "an LDS NACK", nacked(resource.ListenerType))
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, `Listener "udp-move".address`) {
		t.Errorf("NACK error_detail %q does not name the listener's address", msg)
	}
	if got := p.UDPListener("udp-move"); got != old {
		t.Fatalf("after a failed move the running listener is %v, want the old one still running", got)
	}
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(oldAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rx := map[string]string{"listener": "udp-move"}
	waitFor(t, "the old socket to receive after the failed move", func() bool {
		_, _ = c.Write([]byte("still here"))
		return metric(t, p, "aether_proxy_udp_downstream_rx_datagrams_total", rx) > 0
	})

	_ = taken.Close()
	srv.Set(t, node, snapshotWith(proxytest.LoopbackUDPListener("udp-move", port, udpProxyConfig("moved"))))
	waitFor(t, "the move to land", func() bool {
		l := p.UDPListener("udp-move")
		return l != nil && uint32(l.LocalAddr().Port()) == port
	})
	freed, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(oldAddr))
	if err != nil {
		t.Fatalf("the old address %s is still bound after the move: %v", oldAddr, err)
	}
	_ = freed.Close()
}

// A response that removes one TCP listener and gives its address to
// another succeeds: the departing listener closes before the new one binds
// the address the kernel would refuse twice.
func TestListenerAddressHandedOverInOneResponse(t *testing.T) {
	free, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(free.Addr().(*net.TCPAddr).Port)
	_ = free.Close()
	srv := proxytest.NewServer(t)
	srv.Set(t, node, snapshotWith(proxytest.LoopbackTCPListener("tcp-a", port)))
	p := runProxy(t, srv)
	waitFor(t, "tcp-a to run", func() bool { return slices.Equal(p.Listeners(), []string{"tcp-a"}) })
	srv.Set(t, node, snapshotWith(proxytest.LoopbackTCPListener("tcp-b", port)))
	waitFor(t, "tcp-b to replace tcp-a", func() bool {
		if r := srv.Requests(); slices.ContainsFunc(r, nacked(resource.ListenerType)) {
			t.Fatalf("the handover was NACKed: %v", r[slices.IndexFunc(r, nacked(resource.ListenerType))].GetErrorDetail().GetMessage())
		}
		return slices.Equal(p.Listeners(), []string{"tcp-b"})
	})
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("nothing listens on the handed-over address: %v", err)
	}
	_ = c.Close()
}

// A TCP listener's series are aether_proxy_tcp_* only: a scrape shows no
// UDP datagram counters for it.
func TestTCPListenerHasOnlyTCPSeries(t *testing.T) {
	srv := proxytest.NewServer(t)
	srv.Set(t, node, snapshotWith(proxytest.LoopbackTCPListener("tcp-only", 0)))
	p := runProxy(t, srv)
	waitFor(t, "tcp-only to run", func() bool { return slices.Contains(p.Listeners(), "tcp-only") })
	fams, err := p.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var tcp, other []string
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "listener" || l.GetValue() != "tcp-only" {
					continue
				}
				if strings.HasPrefix(f.GetName(), "aether_proxy_tcp_") {
					tcp = append(tcp, f.GetName())
				} else {
					other = append(other, f.GetName())
				}
			}
		}
	}
	if len(other) > 0 || len(tcp) == 0 {
		t.Fatalf("listener tcp-only has series %v besides %v, want aether_proxy_tcp_* only", other, tcp)
	}
}
