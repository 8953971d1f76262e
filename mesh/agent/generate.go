package agent

import (
	"fmt"
	"hash/maphash"
	"net/netip"
	"time"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	netinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// CaptureMode mirrors the CNI's capture mode for UDP.
type CaptureMode string

const (
	// CaptureTProxy: mark-and-divert keeps the ClusterIP in the header, so
	// the matcher's arms select the service and anything else is dropped.
	CaptureTProxy CaptureMode = "tproxy"
	// CaptureRedirect: REDIRECT rewrites the destination to loopback, no arm
	// can match, and on_no_match sends everything to the single tie-break
	// winner: the pre-038 behaviour, kept as the suites' control.
	CaptureRedirect CaptureMode = "redirect"
)

// ParseCaptureMode reads the --capture-mode flag.
func ParseCaptureMode(s string) (CaptureMode, error) {
	switch CaptureMode(s) {
	case CaptureTProxy, CaptureRedirect:
		return CaptureMode(s), nil
	}
	return "", fmt.Errorf("invalid capture mode %q: want tproxy or redirect", s)
}

// Resource names the agent emits.
const (
	BlackholeCluster = "blackhole"

	UDPProxyFilterName     = "envoy.filters.udp_listener.udp_proxy"
	TCPProxyFilterName     = "envoy.filters.network.tcp_proxy"
	DestinationIPInputName = "envoy.matching.inputs.destination_ip"
	UDPRouteActionName     = "route"

	udpIdleTimeout = 60 * time.Second
)

// UDPCaptureListenerName and TCPCaptureListenerName name a pod's capture
// listeners; the pod is in the name because every pod netns has its own.
func UDPCaptureListenerName(p *registry.Pod) string {
	return "udp-capture~" + p.Namespace + "~" + p.Name
}

func TCPCaptureListenerName(p *registry.Pod) string {
	return "tcp-capture~" + p.Namespace + "~" + p.Name
}

// Output is one node's generated configuration.
type Output struct {
	Snapshot  *cache.Snapshot
	Resources map[resource.Type][]types.Resource
	Selection UDPSelection
	// PodsWithoutNetns are local pods that got no capture listener because
	// their sandbox path is not known yet.
	PodsWithoutNetns []registry.Key
}

// Builder generates a node's xDS resources. It keeps each service's
// generated resources keyed by a fingerprint of its inputs, so a change to
// one service regenerates that service only; everything per pod shares the
// per-service pieces.
type Builder struct {
	Node string
	Mode CaptureMode

	seed    maphash.Seed
	entries map[registry.Key]*svcEntry
	actions map[string]*matcher.Matcher_OnMatch
	// The udp_proxy filter is one message over every arm; it is encoded
	// again only when the arms or on_no_match change, not on an endpoint
	// change.
	udpFP     uint64
	udpFilter *listener.ListenerFilter
}

type svcEntry struct {
	fp       uint64
	udp, tcp *svcClusters
	tcpChain *listener.FilterChain
}

type svcClusters struct {
	cluster *cluster.Cluster
	cla     *endpoint.ClusterLoadAssignment
}

// NewBuilder returns a builder for node in mode.
func NewBuilder(node string, mode CaptureMode) *Builder {
	return &Builder{Node: node, Mode: mode, seed: maphash.MakeSeed(),
		entries: map[registry.Key]*svcEntry{}, actions: map[string]*matcher.Matcher_OnMatch{}}
}

func (b *Builder) fingerprint(st *registry.State, svc *registry.Service) uint64 {
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(svc.Namespace)
	h.WriteByte(0)
	h.WriteString(svc.Name)
	h.WriteByte(0)
	ip := svc.ClusterIP.As16()
	h.Write(ip[:])
	for _, p := range svc.Ports {
		h.WriteString(p.Name)
		h.WriteString(string(p.Protocol))
		h.Write([]byte{byte(p.Port >> 8), byte(p.Port), byte(p.TargetPort >> 8), byte(p.TargetPort), 0})
	}
	for _, ep := range st.Endpoints[svc.Key()] {
		if !ep.Ready {
			continue
		}
		a := ep.IP.As16()
		h.Write(a[:])
		h.Write([]byte{byte(ep.Weight >> 24), byte(ep.Weight >> 16), byte(ep.Weight >> 8), byte(ep.Weight)})
	}
	return h.Sum64()
}

// Build generates the node's resources from st and wraps them in a
// snapshot with the given version.
func (b *Builder) Build(st *registry.State, version string) (*Output, error) {
	deps := st.DependencySet(b.Node)
	out := &Output{Resources: map[resource.Type][]types.Resource{}}
	out.Selection = SelectUDPRoutes(st, deps)

	clusters := []types.Resource{blackhole()}
	clas := []types.Resource{}
	var tcpChains []*listener.FilterChain
	seen := make(map[registry.Key]bool, len(deps))
	for i := range st.Services {
		svc := &st.Services[i]
		k := svc.Key()
		if !deps[k] {
			continue
		}
		seen[k] = true
		fp := b.fingerprint(st, svc)
		e := b.entries[k]
		if e == nil || e.fp != fp {
			var err error
			if e, err = b.generateService(st, svc, fp); err != nil {
				return nil, err
			}
			b.entries[k] = e
		}
		for _, c := range []*svcClusters{e.udp, e.tcp} {
			if c != nil {
				clusters = append(clusters, c.cluster)
				clas = append(clas, c.cla)
			}
		}
		if e.tcpChain != nil {
			tcpChains = append(tcpChains, e.tcpChain)
		}
	}
	if len(b.entries) > len(seen) {
		for k := range b.entries {
			if !seen[k] {
				delete(b.entries, k)
			}
		}
	}

	udpFilter, err := b.udpProxyFilter(out.Selection)
	if err != nil {
		return nil, err
	}
	var listeners []types.Resource
	for _, p := range st.LocalPods(b.Node) {
		if p.NetnsPath == "" {
			out.PodsWithoutNetns = append(out.PodsWithoutNetns, p.Key())
			continue
		}
		if udpFilter != nil {
			listeners = append(listeners, &listener.Listener{
				Name:            UDPCaptureListenerName(&p),
				Address:         captureAddress(core.SocketAddress_UDP, p.NetnsPath),
				Transparent:     wrapperspb.Bool(true),
				ListenerFilters: []*listener.ListenerFilter{udpFilter},
			})
		}
		if len(tcpChains) > 0 {
			listeners = append(listeners, &listener.Listener{
				Name:         TCPCaptureListenerName(&p),
				Address:      captureAddress(core.SocketAddress_TCP, p.NetnsPath),
				Transparent:  wrapperspb.Bool(true),
				FilterChains: tcpChains,
			})
		}
	}

	out.Resources[resource.ClusterType] = clusters
	out.Resources[resource.EndpointType] = clas
	out.Resources[resource.ListenerType] = listeners
	snap, err := cache.NewSnapshot(version, out.Resources)
	if err != nil {
		return nil, fmt.Errorf("failed to assemble snapshot %s for node %q: %w", version, b.Node, err)
	}
	out.Snapshot = snap
	return out, nil
}

func captureAddress(proto core.SocketAddress_Protocol, netns string) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:                 proto,
		Address:                  "0.0.0.0",
		PortSpecifier:            &core.SocketAddress_PortValue{PortValue: uint32(constants.ProxyL4OutboundPort)},
		NetworkNamespaceFilepath: netns,
	}}}
}

func blackhole() *cluster.Cluster {
	return &cluster.Cluster{
		Name:                 BlackholeCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment:       &endpoint.ClusterLoadAssignment{ClusterName: BlackholeCluster},
	}
}

func (b *Builder) generateService(st *registry.State, svc *registry.Service, fp uint64) (*svcEntry, error) {
	k := svc.Key()
	e := &svcEntry{fp: fp}
	ready := st.ReadyEndpoints(k)
	if sp, ok := svc.FirstPort(registry.ProtocolUDP); ok {
		e.udp = edsCluster(UDPClusterName(k), core.SocketAddress_UDP, sp.TargetPort, ready)
	}
	if sp, ok := svc.FirstPort(registry.ProtocolTCP); ok {
		name := TCPClusterName(k)
		e.tcp = edsCluster(name, core.SocketAddress_TCP, sp.TargetPort, ready)
		tp, err := anypb.New(&tcpproxy.TcpProxy{StatPrefix: name, ClusterSpecifier: &tcpproxy.TcpProxy_Cluster{Cluster: name}})
		if err != nil {
			return nil, fmt.Errorf("failed to encode tcp_proxy for service %s: %w", k, err)
		}
		bits := uint32(32)
		if svc.ClusterIP.Is6() {
			bits = 128
		}
		e.tcpChain = &listener.FilterChain{
			Name: name,
			// Under mark-and-divert the accepted socket's local address is
			// the original destination, so the ClusterIP selects the chain
			// without original_dst.
			FilterChainMatch: &listener.FilterChainMatch{PrefixRanges: []*core.CidrRange{{
				AddressPrefix: svc.ClusterIP.String(), PrefixLen: wrapperspb.UInt32(bits)}}},
			Filters: []*listener.Filter{{Name: TCPProxyFilterName, ConfigType: &listener.Filter_TypedConfig{TypedConfig: tp}}},
		}
	}
	return e, nil
}

// edsCluster is a service's cluster and its load assignment. The load
// assignment carries the application port (UDPLoadAssignment for udp:
// clusters): the client dialled the mesh spelling, the backend listens on
// targetPort.
func edsCluster(name string, proto core.SocketAddress_Protocol, port uint16, ready []registry.Endpoint) *svcClusters {
	c := &cluster.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		ConnectTimeout:       durationpb.New(5 * time.Second),
		EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{
			ServiceName: name,
			EdsConfig: &core.ConfigSource{
				ResourceApiVersion:    core.ApiVersion_V3,
				ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}},
			},
		},
	}
	cla := &endpoint.ClusterLoadAssignment{ClusterName: name}
	if len(ready) > 0 {
		lbs := make([]*endpoint.LbEndpoint, 0, len(ready))
		for _, ep := range ready {
			lbs = append(lbs, &endpoint.LbEndpoint{
				HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{
					Address: &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
						Protocol: proto, Address: ep.IP.String(), PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(port)}}}},
				}},
				LoadBalancingWeight: wrapperspb.UInt32(ep.Weight),
			})
		}
		cla.Endpoints = []*endpoint.LocalityLbEndpoints{{LbEndpoints: lbs}}
	}
	return &svcClusters{cluster: c, cla: cla}
}

func (b *Builder) routeAction(clusterName string) (*matcher.Matcher_OnMatch, error) {
	if a, ok := b.actions[clusterName]; ok {
		return a, nil
	}
	tc, err := anypb.New(&udpproxy.Route{Cluster: clusterName})
	if err != nil {
		return nil, fmt.Errorf("failed to encode udp_proxy route to %q: %w", clusterName, err)
	}
	a := &matcher.Matcher_OnMatch{OnMatch: &matcher.Matcher_OnMatch_Action{Action: &xdscore.TypedExtensionConfig{
		Name: UDPRouteActionName, TypedConfig: tc}}}
	b.actions[clusterName] = a
	return a, nil
}

var destinationIPInput = func() *anypb.Any {
	a, err := anypb.New(&netinputs.DestinationIPInput{})
	if err != nil {
		panic(err)
	}
	return a
}()

// udpProxyFilter is the listener filter every pod's UDP capture listener
// shares: one exact-match arm per ClusterIP. It is nil when there is nothing
// to route, so pods get no UDP listener rather than one that only drops.
func (b *Builder) udpProxyFilter(sel UDPSelection) (*listener.ListenerFilter, error) {
	if len(sel.Arms) == 0 {
		return nil, nil
	}
	m := make(map[string]*matcher.Matcher_OnMatch, len(sel.Arms))
	for _, a := range sel.Arms {
		act, err := b.routeAction(a.Cluster)
		if err != nil {
			return nil, err
		}
		m[a.ClusterIP.String()] = act
	}
	noMatch := BlackholeCluster
	if b.Mode == CaptureRedirect && sel.Fallback != nil {
		noMatch = sel.Fallback.Cluster
	}
	var h maphash.Hash
	h.SetSeed(b.seed)
	h.WriteString(noMatch)
	for _, a := range sel.Arms {
		ip := a.ClusterIP.As16()
		h.Write(ip[:])
		h.WriteString(a.Cluster)
	}
	if fp := h.Sum64(); b.udpFilter != nil && fp == b.udpFP {
		return b.udpFilter, nil
	} else {
		b.udpFP = fp
	}
	onNoMatch, err := b.routeAction(noMatch)
	if err != nil {
		return nil, err
	}
	cfg := &udpproxy.UdpProxyConfig{
		StatPrefix:  "udp_capture",
		IdleTimeout: durationpb.New(udpIdleTimeout),
		RouteSpecifier: &udpproxy.UdpProxyConfig_Matcher{Matcher: &matcher.Matcher{
			MatcherType: &matcher.Matcher_MatcherTree_{MatcherTree: &matcher.Matcher_MatcherTree{
				Input:    &xdscore.TypedExtensionConfig{Name: DestinationIPInputName, TypedConfig: destinationIPInput},
				TreeType: &matcher.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcher.Matcher_MatcherTree_MatchMap{Map: m}},
			}},
			OnNoMatch: onNoMatch,
		}},
	}
	tc, err := anypb.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to encode udp_proxy config: %w", err)
	}
	b.udpFilter = &listener.ListenerFilter{Name: UDPProxyFilterName, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: tc}}
	return b.udpFilter, nil
}

// ClusterIPs returns the arms' keys, for tests and the debug dump.
func (s UDPSelection) ClusterIPs() []netip.Addr {
	out := make([]netip.Addr, len(s.Arms))
	for i, a := range s.Arms {
		out[i] = a.ClusterIP
	}
	return out
}
