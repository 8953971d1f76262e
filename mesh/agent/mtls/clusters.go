package mtls

import (
	"fmt"
	"net/netip"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	fsomapperv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/cert_mappers/filter_state_override/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/cert_selectors/on_demand_secret/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether/mesh/constants"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// connectTimeout is every mTLS cluster's connect_timeout, as the L4
// clusters state theirs.
const connectTimeout = 5 * time.Second

// Upstream says which certificate an h2 cluster presents.
type Upstream struct {
	// StaticSecret, when set, is the one SVID secret the cluster presents
	// for every source: the #831 control. Empty selects per connection
	// from the source identity in filter state.
	StaticSecret string
}

// Service is a service an h2 cluster reaches.
type Service struct {
	Name, Namespace string
	// Port is the service port whose xdsnames.SNI the cluster sends.
	Port uint16
	// Accounts are the SPIFFE IDs of the service accounts backing the
	// service: the URI SANs its peer may present.
	Accounts []string
}

// H2ClusterFor is a service's h2 cluster: EDS over ADS, HTTP/2 upstream,
// mTLS presenting the source's SVID and accepting only the service's
// accounts.
func H2ClusterFor(m Mesh, s Service, up Upstream) (*clusterv3.Cluster, error) {
	if len(s.Accounts) == 0 {
		return nil, fmt.Errorf("h2 cluster of %s/%s: no service account backs it, so no peer could be accepted", s.Namespace, s.Name)
	}
	ts, err := upstreamTLS(m, s, up)
	if err != nil {
		return nil, fmt.Errorf("h2 cluster of %s/%s: %w", s.Namespace, s.Name, err)
	}
	po, err := anyOf(&upstreamhttpv3.HttpProtocolOptions{UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
		ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_Http2ProtocolOptions{Http2ProtocolOptions: &corev3.Http2ProtocolOptions{}},
		},
	}})
	if err != nil {
		return nil, err
	}
	name := xdsnames.H2Cluster(s.Name, s.Namespace)
	return &clusterv3.Cluster{
		Name:                          name,
		ClusterDiscoveryType:          &clusterv3.Cluster_Type{Type: clusterv3.Cluster_EDS},
		EdsClusterConfig:              &clusterv3.Cluster_EdsClusterConfig{EdsConfig: ads(), ServiceName: name},
		ConnectTimeout:                durationpb.New(connectTimeout),
		TransportSocket:               ts,
		TypedExtensionProtocolOptions: map[string]*anypb.Any{xdsnames.HTTPProtocolOptions: po},
	}, nil
}

// H2Assignment is an h2 cluster's load assignment: each ready endpoint's
// inbound listener, <podIP>:18008.
func H2Assignment(name, namespace string, ips []netip.Addr) *endpointv3.ClusterLoadAssignment {
	la := &endpointv3.ClusterLoadAssignment{ClusterName: xdsnames.H2Cluster(name, namespace), Endpoints: []*endpointv3.LocalityLbEndpoints{{}}}
	for _, ip := range ips {
		la.Endpoints[0].LbEndpoints = append(la.Endpoints[0].LbEndpoints, lbEndpoint(ip.String(), constants.InboundPort, ""))
	}
	return la
}

// H2GatewayAssignment is a remote service's load assignment: the one
// endpoint is the exporting cluster's east-west gateway, which forwards
// the connection by its SNI to a destination pod's 18008 without
// terminating it, so the mTLS session runs from this proxy to that pod.
func H2GatewayAssignment(name, namespace string, gw netip.AddrPort) *endpointv3.ClusterLoadAssignment {
	return &endpointv3.ClusterLoadAssignment{ClusterName: xdsnames.H2Cluster(name, namespace), Endpoints: []*endpointv3.LocalityLbEndpoints{{
		LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint(gw.Addr().String(), gw.Port(), "")},
	}}}
}

func lbEndpoint(ip string, port uint16, netns string) *endpointv3.LbEndpoint {
	return &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
		Address: tcpAddress(ip, port, netns),
	}}}
}

// InboundIdleTimeout closes a pooled connection to the app after this long
// with no request, where Envoy's default would keep it an hour. A burst
// (a peer node back from a partition, a client's retries) opens
// connections to the app that the pool then keeps idle: an hour of them
// would hold the proxy's sockets and goroutines long after the burst.
// A minute is also below the keep-alive of nginx (75 s) and of Go's
// server (none), so against those the proxy, not the app, closes an idle
// connection, and no request is sent on a connection the app is closing.
const InboundIdleTimeout = 60 * time.Second

// inboundCluster reaches the app on the pod's loopback: the endpoint's
// socket is made in the pod's netns, and requests go as HTTP/1.1 with
// InboundIdleTimeout on the pool.
func inboundCluster(name string, targetPort uint16, netns string) (*clusterv3.Cluster, error) {
	po, err := anyOf(&upstreamhttpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(InboundIdleTimeout)},
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
			ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{HttpProtocolOptions: &corev3.Http1ProtocolOptions{}},
		}},
	})
	if err != nil {
		return nil, err
	}
	return &clusterv3.Cluster{
		Name:                 name,
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(connectTimeout),
		LoadAssignment: &endpointv3.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpointv3.LocalityLbEndpoints{{
			LbEndpoints: []*endpointv3.LbEndpoint{lbEndpoint("127.0.0.1", targetPort, netns)},
		}}},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{xdsnames.HTTPProtocolOptions: po},
	}, nil
}

func upstreamTLS(m Mesh, s Service, up Upstream) (*corev3.TransportSocket, error) {
	var sans []*tlsv3.SubjectAltNameMatcher
	for _, id := range s.Accounts {
		sans = append(sans, &tlsv3.SubjectAltNameMatcher{
			SanType: tlsv3.SubjectAltNameMatcher_URI,
			Matcher: &matcherv3.StringMatcher{MatchPattern: &matcherv3.StringMatcher_Exact{Exact: id}},
		})
	}
	common := &tlsv3.CommonTlsContext{
		TlsParams:     tls13(),
		AlpnProtocols: []string{"h2"},
		ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
			DefaultValidationContext:         &tlsv3.CertificateValidationContext{MatchTypedSubjectAltNames: sans},
			ValidationContextSdsSecretConfig: sds(xdsnames.TrustBundleSecret),
		}},
	}
	if up.StaticSecret != "" {
		common.TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sds(up.StaticSecret)}
	} else {
		sel, err := selector()
		if err != nil {
			return nil, err
		}
		common.CustomTlsCertificateSelector = sel
	}
	tc, err := anyOf(&tlsv3.UpstreamTlsContext{CommonTlsContext: common, Sni: xdsnames.SNI(s.Port, s.Name, s.Namespace, m.Domain)})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: xdsnames.TLSTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}, nil
}

// selector is Envoy's on-demand certificate selector keyed by the
// filter_state_override mapper: the upstream handshake presents the secret
// the downstream connection's shared filter state names.
func selector() (*corev3.TypedExtensionConfig, error) {
	mapper, err := anyOf(&fsomapperv3.Config{DefaultValue: xdsnames.NoSourceIdentity})
	if err != nil {
		return nil, err
	}
	cfg, err := anyOf(&ondemandv3.Config{
		ConfigSource:      ads(),
		CertificateMapper: &corev3.TypedExtensionConfig{Name: xdsnames.FilterStateCertMapper, TypedConfig: mapper},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TypedExtensionConfig{Name: xdsnames.OnDemandSecretSelector, TypedConfig: cfg}, nil
}
