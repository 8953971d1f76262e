// Package proxytest holds what the proxy's tests share: a go-control-plane
// delta ADS server on a unix socket, builders for the contract's resources,
// and (rig.go) a node + pod + backends topology in namespaces with the real
// CNI capture rules installed in the pod.
package proxytest

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcherv3 "github.com/cncf/xds/go/xds/type/matcher/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	networkinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Server is a delta ADS server backed by go-control-plane's snapshot cache,
// the same implementation the agent serves with.
type Server struct {
	Target string
	Cache  cache.SnapshotCache

	mu       sync.Mutex
	requests []*discoverygrpc.DeltaDiscoveryRequest
	grpc     *grpc.Server
	version  int
	xds      serverv3.Server
	sock     string
}

// Restart drops every stream and serves again on the same socket with the
// same cache, as an agent restart looks to the proxy.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	_ = os.Remove(s.sock)
	s.start(t, s.xds, s.sock)
}

// NewServer starts a server on a unix socket in a test temp dir.
func NewServer(t testing.TB) *Server {
	t.Helper()
	s := &Server{Cache: cache.NewSnapshotCache(true, cache.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{StreamDeltaRequestFunc: func(_ int64, r *discoverygrpc.DeltaDiscoveryRequest) error {
		s.mu.Lock()
		s.requests = append(s.requests, proto.Clone(r).(*discoverygrpc.DeltaDiscoveryRequest))
		s.mu.Unlock()
		return nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	srv := serverv3.NewServer(ctx, s.Cache, cb)
	sock := filepath.Join(t.TempDir(), "ads.sock")
	s.Target = "unix://" + sock
	s.xds, s.sock = srv, sock
	s.start(t, srv, sock)
	t.Cleanup(func() { s.Stop(); cancel() })
	return s
}

func (s *Server) start(t testing.TB, srv serverv3.Server, sock string) {
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatalf("failed to listen on %s: %v", sock, err)
	}
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, srv)
	s.mu.Lock()
	s.grpc = g
	s.mu.Unlock()
	go func() { _ = g.Serve(ln) }()
}

// Stop closes the server and every stream.
func (s *Server) Stop() {
	s.mu.Lock()
	g := s.grpc
	s.mu.Unlock()
	if g != nil {
		g.Stop()
	}
}

// Requests returns every delta request received so far.
func (s *Server) Requests() []*discoverygrpc.DeltaDiscoveryRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*discoverygrpc.DeltaDiscoveryRequest(nil), s.requests...)
}

// WaitRequest waits until a request satisfying pred has been received.
func (s *Server) WaitRequest(t testing.TB, what string, pred func(*discoverygrpc.DeltaDiscoveryRequest) bool) *discoverygrpc.DeltaDiscoveryRequest {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		for _, r := range s.Requests() {
			if pred(r) {
				return r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the ADS server never received %s; requests: %v", what, s.Requests())
	return nil
}

// Set publishes a snapshot for node and returns its version.
func (s *Server) Set(t testing.TB, node string, res map[resource.Type][]types.Resource) string {
	t.Helper()
	s.mu.Lock()
	s.version++
	v := fmt.Sprintf("v%d", s.version)
	s.mu.Unlock()
	snap, err := cache.NewSnapshot(v, res)
	if err != nil {
		t.Fatalf("failed to build snapshot %s: %v", v, err)
	}
	if err := s.Cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatalf("failed to set snapshot %s: %v", v, err)
	}
	return v
}

// Service is one service as the agent would publish it.
type Service struct {
	Name      string // cluster suffix, e.g. "svc-a.default"
	VIP       netip.Addr
	Endpoints []netip.AddrPort
}

func must(a *anypb.Any, err error) *anypb.Any {
	if err != nil {
		panic(err)
	}
	return a
}

// Route is the udp_proxy action naming cluster.
func Route(cluster string) *matcherv3.Matcher_OnMatch {
	return &matcherv3.Matcher_OnMatch{OnMatch: &matcherv3.Matcher_OnMatch_Action{Action: &xdscore.TypedExtensionConfig{
		Name:        xdsnames.UDPRouteAction,
		TypedConfig: must(anypb.New(&udpproxyv3.Route{Cluster: cluster})),
	}}}
}

// DestinationIPInput is the matcher input the contract names.
func DestinationIPInput() *xdscore.TypedExtensionConfig {
	return &xdscore.TypedExtensionConfig{Name: xdsnames.DestinationIPInput, TypedConfig: must(anypb.New(&networkinputs.DestinationIPInput{}))}
}

// ExactMatcher routes each VIP to its udp: cluster, the rest to onNoMatch.
func ExactMatcher(svcs []Service, onNoMatch string) *matcherv3.Matcher {
	m := map[string]*matcherv3.Matcher_OnMatch{}
	for _, s := range svcs {
		m[s.VIP.String()] = Route("udp:" + s.Name)
	}
	return &matcherv3.Matcher{
		MatcherType: &matcherv3.Matcher_MatcherTree_{MatcherTree: &matcherv3.Matcher_MatcherTree{
			Input:    DestinationIPInput(),
			TreeType: &matcherv3.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcherv3.Matcher_MatcherTree_MatchMap{Map: m}},
		}},
		OnNoMatch: Route(onNoMatch),
	}
}

// UDPListener is the contract's udp-capture~<ns>~<pod> listener.
func UDPListener(name, netnsPath string, m *matcherv3.Matcher, idle time.Duration) *listenerv3.Listener {
	cfg := &udpproxyv3.UdpProxyConfig{
		StatPrefix:     name,
		IdleTimeout:    durationpb.New(idle),
		RouteSpecifier: &udpproxyv3.UdpProxyConfig_Matcher{Matcher: m},
	}
	return &listenerv3.Listener{
		Name:        name,
		Address:     address(corev3.SocketAddress_UDP, netnsPath),
		Transparent: wrapperspb.Bool(true),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       xdsnames.UDPProxyFilter,
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: must(anypb.New(cfg))},
		}},
	}
}

func address(p corev3.SocketAddress_Protocol, netnsPath string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol: p, Address: "0.0.0.0", NetworkNamespaceFilepath: netnsPath,
		PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(constants.ProxyL4OutboundPort)},
	}}}
}

// TCPListener is the contract's tcp-capture~<ns>~<pod> listener.
func TCPListener(name, netnsPath string, svcs []Service) *listenerv3.Listener {
	l := &listenerv3.Listener{Name: name, Address: address(corev3.SocketAddress_TCP, netnsPath), Transparent: wrapperspb.Bool(true)}
	for _, s := range svcs {
		tp := &tcpproxyv3.TcpProxy{StatPrefix: "tcp:" + s.Name, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "tcp:" + s.Name}}
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
			Name:             "tcp:" + s.Name,
			FilterChainMatch: &listenerv3.FilterChainMatch{PrefixRanges: []*corev3.CidrRange{{AddressPrefix: s.VIP.String(), PrefixLen: wrapperspb.UInt32(32)}}},
			Filters: []*listenerv3.Filter{{
				Name:       xdsnames.TCPProxyFilter,
				ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: must(anypb.New(tp))},
			}},
		})
	}
	return l
}

// LoopbackUDPListener is a plain (not transparent) UDP listener on a
// loopback port (0: ephemeral) in the test's own namespace, so it opens
// without privileges.
func LoopbackUDPListener(name string, port uint32, cfg *udpproxyv3.UdpProxyConfig) *listenerv3.Listener {
	return &listenerv3.Listener{
		Name:    name,
		Address: loopback(corev3.SocketAddress_UDP, port),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name:       "envoy.filters.udp_listener.udp_proxy",
			ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: must(anypb.New(cfg))},
		}},
	}
}

// LoopbackTCPListener is a plain TCP listener on a loopback port whose one
// chain sends everything to the blackhole.
func LoopbackTCPListener(name string, port uint32) *listenerv3.Listener {
	tp := &tcpproxyv3.TcpProxy{StatPrefix: name, ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: "blackhole"}}
	return &listenerv3.Listener{
		Name:    name,
		Address: loopback(corev3.SocketAddress_TCP, port),
		FilterChains: []*listenerv3.FilterChain{{Filters: []*listenerv3.Filter{{
			Name:       "envoy.filters.network.tcp_proxy",
			ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: must(anypb.New(tp))},
		}}}},
	}
}

func loopback(p corev3.SocketAddress_Protocol, port uint32) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol: p, Address: "127.0.0.1", PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port},
	}}}
}

// EDSCluster is an EDS-over-ADS cluster named after its load assignment.
func EDSCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			ServiceName: name,
			EdsConfig: &corev3.ConfigSource{
				ResourceApiVersion:    corev3.ApiVersion_V3,
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
			},
		},
	}
}

// Blackhole is the STATIC cluster with no hosts.
func Blackhole() *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 xdsnames.BlackholeCluster,
		ConnectTimeout:       durationpb.New(time.Second),
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		LoadAssignment:       &endpointv3.ClusterLoadAssignment{ClusterName: xdsnames.BlackholeCluster},
	}
}

// Assignment is a load assignment with weight-1 hosts.
func Assignment(name string, eps ...netip.AddrPort) *endpointv3.ClusterLoadAssignment {
	la := &endpointv3.ClusterLoadAssignment{ClusterName: name}
	loc := &endpointv3.LocalityLbEndpoints{}
	for _, e := range eps {
		loc.LbEndpoints = append(loc.LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Address: e.Addr().String(), PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(e.Port())},
				}},
			}}},
			LoadBalancingWeight: wrapperspb.UInt32(1),
		})
	}
	la.Endpoints = []*endpointv3.LocalityLbEndpoints{loc}
	return la
}

// UDPSnapshot is what the agent publishes for one pod with UDP services
// and, optionally, TCP services on the same VIPs.
func UDPSnapshot(podNetns string, idle time.Duration, udpSvcs, tcpSvcs []Service) map[resource.Type][]types.Resource {
	res := map[resource.Type][]types.Resource{}
	res[resource.ClusterType] = append(res[resource.ClusterType], Blackhole())
	for _, s := range udpSvcs {
		res[resource.ClusterType] = append(res[resource.ClusterType], EDSCluster("udp:"+s.Name))
		res[resource.EndpointType] = append(res[resource.EndpointType], Assignment("udp:"+s.Name, s.Endpoints...))
	}
	for _, s := range tcpSvcs {
		res[resource.ClusterType] = append(res[resource.ClusterType], EDSCluster("tcp:"+s.Name))
		res[resource.EndpointType] = append(res[resource.EndpointType], Assignment("tcp:"+s.Name, s.Endpoints...))
	}
	res[resource.ListenerType] = append(res[resource.ListenerType], UDPListener("udp-capture~default~client", podNetns, ExactMatcher(udpSvcs, "blackhole"), idle))
	if len(tcpSvcs) > 0 {
		res[resource.ListenerType] = append(res[resource.ListenerType], TCPListener("tcp-capture~default~client", podNetns, tcpSvcs))
	}
	return res
}
