package eastwest

import (
	"fmt"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Twin is one (source account, destination) pair's cluster as the agent
// emits it.
type Twin struct {
	xdsnames.Twin
	// Port is the destination's HTTP service port, whose SNI the twin
	// sends: <port>.<svc>.<ns>.<mesh-domain>.
	Port   uint16
	Domain string
	// SourceID is the source account's SPIFFE ID: the SVID secret the
	// twin presents.
	SourceID string
	// Accounts are the SPIFFE IDs backing the destination: the URI SANs
	// its peer may present.
	Accounts []string
}

// TwinCluster is t's cluster: EDS over ADS under its own name (#1008),
// HTTP/3 upstream, a QuicUpstreamTransport presenting the source's SVID
// (one certificate for the cluster: QUIC has no per-connection selector,
// Q2a), and pooling shared across downstream connections (#1021, the
// default, which the twin gates pin).
func TwinCluster(t Twin) (*clusterv3.Cluster, error) {
	if len(t.Accounts) == 0 {
		return nil, fmt.Errorf("twin %s: no account backs the destination, so no peer could be accepted", xdsnames.TwinCluster(t.Twin))
	}
	var sans []*tlsv3.SubjectAltNameMatcher
	for _, id := range t.Accounts {
		sans = append(sans, &tlsv3.SubjectAltNameMatcher{SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}}})
	}
	utc := &tlsv3.UpstreamTlsContext{
		Sni: xdsnames.SNI(t.Port, t.Service, t.Namespace, t.Domain),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:                      &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_3},
			AlpnProtocols:                  []string{"h3"},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sds(t.SourceID)},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans},
				ValidationContextSdsSecretConfig: sds(xdsnames.TrustBundleSecret),
			}},
		},
	}
	ts, err := pack(&quicv3.QuicUpstreamTransport{UpstreamTlsContext: utc})
	if err != nil {
		return nil, err
	}
	po, err := pack(&upstreamhttpv3.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http3ProtocolOptions{Http3ProtocolOptions: &corev3.Http3ProtocolOptions{}},
		},
	}})
	if err != nil {
		return nil, err
	}
	name := xdsnames.TwinCluster(t.Twin)
	return &clusterv3.Cluster{
		Name:                          name,
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:              &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads(), ServiceName: name},
		ConnectTimeout:                durationpb.New(5 * time.Second),
		TransportSocket:               &corev3.TransportSocket{Name: xdsnames.QUICTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ts}},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{xdsnames.HTTPProtocolOptions: po},
	}, nil
}

// QuicInbound is a pod's QUIC inbound on UDP 18008, beside its TCP
// inbound on the same number (R3) and made from it: each chain keeps its
// server_names and its DownstreamTlsContext, wrapped in a
// QuicDownstreamTransport with enable_resumption and enable_early_data
// stated false (R4), and its HTTP connection manager speaks HTTP/3. The
// first chain, the pod's primary port, is also the default chain, for a
// client whose SNI names no chain.
func QuicInbound(tcp *listenerv3.Listener, namespace, pod, netns string) (*listenerv3.Listener, error) {
	// The pod's own address, as the TCP inbound's, and not transparent:
	// the pod's UDP egress to 18008 is diverted to its own netns by the
	// capture, and a socket bound to 0.0.0.0 there would take an app's
	// dial of a peer's 18008 and answer it as this pod. Bound to the pod
	// address, no socket takes it (ARCHITECTURE.md, "On-demand twins").
	podIP := tcp.GetAddress().GetSocketAddress().GetAddress()
	if podIP == "" {
		return nil, fmt.Errorf("QUIC inbound of %s/%s: the TCP inbound has no address", namespace, pod)
	}
	l := &listenerv3.Listener{
		Name: xdsnames.QuicInboundListener(namespace, pod),
		Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
			Protocol: corev3.SocketAddress_UDP, Address: podIP,
			PortSpecifier:            &corev3.SocketAddress_PortValue{PortValue: uint32(constants.InboundPort)},
			NetworkNamespaceFilepath: netns,
		}}},
		UdpListenerConfig: &listenerv3.UdpListenerConfig{QuicOptions: &listenerv3.QuicProtocolOptions{}},
	}
	for i, fc := range tcp.GetFilterChains() {
		qc, err := quicChain(fc)
		if err != nil {
			return nil, fmt.Errorf("QUIC inbound of %s/%s: chain %d (%s): %w", namespace, pod, i, fc.GetName(), err)
		}
		l.FilterChains = append(l.FilterChains, qc)
	}
	if len(l.FilterChains) == 0 {
		return nil, fmt.Errorf("QUIC inbound of %s/%s: the TCP inbound has no chain", namespace, pod)
	}
	def := proto.Clone(l.FilterChains[0]).(*listenerv3.FilterChain)
	def.FilterChainMatch = nil
	l.DefaultFilterChain = def
	return l, nil
}

func quicChain(fc *listenerv3.FilterChain) (*listenerv3.FilterChain, error) {
	dtc := &tlsv3.DownstreamTlsContext{}
	if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(dtc); err != nil {
		return nil, fmt.Errorf("transport_socket: not a DownstreamTlsContext: %w", err)
	}
	ts, err := pack(&quicv3.QuicDownstreamTransport{
		DownstreamTlsContext: dtc,
		EnableResumption:     wrapperspb.Bool(false),
		EnableEarlyData:      wrapperspb.Bool(false),
	})
	if err != nil {
		return nil, err
	}
	if len(fc.GetFilters()) != 1 {
		return nil, fmt.Errorf("want one HTTP connection manager, have %d filters", len(fc.GetFilters()))
	}
	h := &hcmv3.HttpConnectionManager{}
	if err := fc.GetFilters()[0].GetTypedConfig().UnmarshalTo(h); err != nil {
		return nil, fmt.Errorf("filters[0]: not an HTTP connection manager: %w", err)
	}
	h.CodecType = hcmv3.HttpConnectionManager_HTTP3
	hc, err := pack(h)
	if err != nil {
		return nil, err
	}
	return &listenerv3.FilterChain{
		Name:             fc.GetName(),
		FilterChainMatch: fc.GetFilterChainMatch(),
		TransportSocket:  &corev3.TransportSocket{Name: xdsnames.QUICTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ts}},
		Filters:          []*listenerv3.Filter{{Name: xdsnames.HTTPConnectionManager, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: hc}}},
	}, nil
}

func ads() *corev3.ConfigSource {
	return &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}, ResourceApiVersion: corev3.ApiVersion_V3}
}

func sds(name string) *tlsv3.SdsSecretConfig {
	return &tlsv3.SdsSecretConfig{Name: name, SdsConfig: ads()}
}
