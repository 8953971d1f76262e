// Package gateway builds the east-west gateway's resources (ARCHITECTURE.md,
// "The east-west gateway's passthrough (18009)"): on the node the
// registry marks as its cluster's gateway, one listener per transport on
// <gateway address>:18009 whose filter chains match the SNI a source proxy
// sends for each exposed service, <port>.<svc>.<ns>.<mesh-domain>, and
// pass the bytes as they are to a cluster of that service's pods' 18008
// inbound. TCP is Envoy's own: tls_inspector, filter chains on
// server_names, tcp_proxy. UDP carries the same filter chains behind the
// project's QUIC passthrough listener filter (mesh/xdsext), which Envoy
// has no equivalent of. Nothing here terminates TLS or holds a key.
package gateway

import (
	"fmt"
	"net/netip"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsext"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// The gateway's stated bounds. Each is stated in the resources rather than
// left to a default the config would not show; the config gates refuse a
// gateway without them.
const (
	// ListenerFiltersTimeout is how long a TCP client has to send its
	// whole ClientHello (Envoy's default, 15 s).
	ListenerFiltersTimeout = 15 * time.Second
	// ConnectTimeout is each gateway cluster's connect_timeout.
	ConnectTimeout = 5 * time.Second
)

// DefaultQUICBounds are the UDP listener's: the forwarder's defaults
// (mesh/proxy/passthrough), stated.
var DefaultQUICBounds = xdsext.QUICPassthrough{
	MaxFlows:               1024,
	MaxPendingFlows:        256,
	MaxPendingBytesPerFlow: 32 << 10,
	IdleTimeout:            60 * time.Second,
	ClientHelloTimeout:     15 * time.Second,
}

// Service is one exposed service: the port its SNI names (its HTTP port)
// and its ready pods' addresses.
type Service struct {
	Name, Namespace string
	Port            uint16
	Pods            []netip.Addr
}

// Config is one gateway node's.
type Config struct {
	Node    string
	Address netip.Addr
	// NetnsPath is the listeners' network_namespace_filepath; empty on
	// a node, whose proxy runs in the node's netns.
	NetnsPath string
	// Domain is the mesh domain the SNIs carry.
	Domain   string
	Services []Service
	// QUIC is the UDP listener's bounds; zero is DefaultQUICBounds.
	QUIC xdsext.QUICPassthrough
	// FirstServiceOnly forwards every chain to the first service's
	// cluster: the agent's GatewayFirstService control.
	FirstServiceOnly bool
}

// Resources are the gateway's listeners, clusters and load assignments.
func Resources(c Config) (map[resource.Type][]types.Resource, error) {
	if !c.Address.IsValid() {
		return nil, fmt.Errorf("gateway %q: no address", c.Node)
	}
	if len(c.Services) == 0 {
		return nil, fmt.Errorf("gateway %q: exposes no service", c.Node)
	}
	out := map[resource.Type][]types.Resource{}
	chains := make([]*listenerv3.FilterChain, 0, len(c.Services))
	for _, s := range c.Services {
		name := xdsnames.GatewayCluster(s.Name, s.Namespace)
		to := name
		if c.FirstServiceOnly {
			to = xdsnames.GatewayCluster(c.Services[0].Name, c.Services[0].Namespace)
		}
		fc, err := chain(to, xdsnames.SNI(s.Port, s.Name, s.Namespace, c.Domain))
		if err != nil {
			return nil, err
		}
		chains = append(chains, fc)
		out[resource.ClusterType] = append(out[resource.ClusterType], edsCluster(name))
		out[resource.EndpointType] = append(out[resource.EndpointType], assignment(name, s.Pods))
	}
	tcp, err := tcpListener(c, chains)
	if err != nil {
		return nil, err
	}
	udp, err := udpListener(c, chains)
	if err != nil {
		return nil, err
	}
	out[resource.ListenerType] = []types.Resource{tcp, udp}
	return out, nil
}

func address(proto corev3.SocketAddress_Protocol, c Config) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol:                 proto,
		Address:                  c.Address.String(),
		PortSpecifier:            &corev3.SocketAddress_PortValue{PortValue: uint32(constants.EastWestTunnelPort)},
		NetworkNamespaceFilepath: c.NetnsPath,
	}}}
}

// chain matches one SNI and passes the connection to cluster. idle_timeout
// is stated 0s (none): an unset one is Envoy's hour, which the passthrough
// does not keep; the mTLS session's own ends (the source's pool, the
// destination's inbound) close an idle connection through it.
func chain(cluster, sni string) (*listenerv3.FilterChain, error) {
	tp, err := anyOf(&tcpproxyv3.TcpProxy{
		StatPrefix:       cluster,
		ClusterSpecifier: &tcpproxyv3.TcpProxy_Cluster{Cluster: cluster},
		IdleTimeout:      durationpb.New(0),
	})
	if err != nil {
		return nil, err
	}
	return &listenerv3.FilterChain{
		Name:             sni,
		FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{sni}},
		Filters:          []*listenerv3.Filter{{Name: xdsnames.TCPProxyFilter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tp}}},
	}, nil
}

func tcpListener(c Config, chains []*listenerv3.FilterChain) (*listenerv3.Listener, error) {
	ti, err := anyOf(&tlsinspectorv3.TlsInspector{})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:    xdsnames.GatewayTCPListener(c.Node),
		Address: address(corev3.SocketAddress_TCP, c),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name: xdsnames.TLSInspector, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: ti},
		}},
		ListenerFiltersTimeout: durationpb.New(ListenerFiltersTimeout),
		FilterChains:           chains,
	}, nil
}

func udpListener(c Config, chains []*listenerv3.FilterChain) (*listenerv3.Listener, error) {
	b := c.QUIC
	if b == (xdsext.QUICPassthrough{}) {
		b = DefaultQUICBounds
	}
	b.StatPrefix = xdsnames.GatewayUDPListener(c.Node)
	tc, err := b.TypedConfig()
	if err != nil {
		return nil, fmt.Errorf("gateway %q: %w", c.Node, err)
	}
	return &listenerv3.Listener{
		Name:    xdsnames.GatewayUDPListener(c.Node),
		Address: address(corev3.SocketAddress_UDP, c),
		ListenerFilters: []*listenerv3.ListenerFilter{{
			Name: xdsnames.QUICPassthroughFilter, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: tc},
		}},
		FilterChains: chains,
	}, nil
}

func edsCluster(name string) *clusterv3.Cluster {
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig: &clusterv3.Cluster_EdsClusterConfig{
			EdsConfig: &corev3.ConfigSource{
				ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}},
				ResourceApiVersion:    corev3.ApiVersion_V3,
			},
			ServiceName: name,
		},
		ConnectTimeout: durationpb.New(ConnectTimeout),
	}
}

// assignment lists the pods at 18008; one address serves TCP and UDP, as
// the inbound listens on both (R3).
func assignment(name string, pods []netip.Addr) *endpointv3.ClusterLoadAssignment {
	la := &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, ip := range pods {
		la.Endpoints[0].LbEndpoints = append(la.Endpoints[0].LbEndpoints, &endpointv3.LbEndpoint{
			HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{Address: &corev3.Address{
				Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
					Protocol: corev3.SocketAddress_TCP, Address: ip.String(),
					PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: uint32(constants.InboundPort)},
				}},
			}}},
		})
	}
	return la
}

func anyOf(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	return a, nil
}
