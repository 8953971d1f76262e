package mtls

import (
	"fmt"
	"net/netip"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	netsetfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/set_filter_state/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Pod is a local pod as the mTLS path sees it.
type Pod struct {
	Namespace, Name string
	// ID is the pod's SPIFFE ID: the name of its SVID secret.
	ID        string
	IP        netip.Addr
	NetnsPath string
	// Serves lists the service ports the pod backs, each one inbound
	// filter chain.
	Serves []Port
}

// Port is one service port a pod backs.
type Port struct {
	Service, Namespace string
	Port, TargetPort   uint16
}

// Route is one service an outbound listener routes to.
type Route struct {
	Service, Namespace string
}

// Mesh is what every builder needs to know of the mesh.
type Mesh struct {
	// Domain is the mesh domain of authorities and SNIs.
	Domain string
	// AccessLog is the file each proxy appends its JSON access log to.
	AccessLog string
}

// AccessLogFormat is the access log's JSON line: each key and its Envoy
// command operator (ARCHITECTURE.md, "The mTLS HTTP/2 path", its access log).
func AccessLogFormat(inbound bool) map[string]string {
	source := "%FILTER_STATE(" + xdsnames.CertMapperFilterStateKey + ":PLAIN)%"
	if inbound {
		source = "%DOWNSTREAM_PEER_URI_SAN%"
	}
	return map[string]string{
		"source":         source,
		"destination":    "%UPSTREAM_CLUSTER%",
		"authority":      "%REQ(:AUTHORITY)%",
		"protocol":       "%PROTOCOL%",
		"status":         "%RESPONSE_CODE%",
		"flags":          "%RESPONSE_FLAGS%",
		"duration_ms":    "%DURATION%",
		"bytes_received": "%BYTES_RECEIVED%",
		"bytes_sent":     "%BYTES_SENT%",
	}
}

// InboundListenerFor is the pod's 18008 listener and the inbound clusters
// its chains route to. A pod that backs no port gets neither.
func InboundListenerFor(m Mesh, p Pod) (*listenerv3.Listener, []*clusterv3.Cluster, error) {
	if len(p.Serves) == 0 {
		return nil, nil, nil
	}
	l := &listenerv3.Listener{
		Name:            xdsnames.InboundListener(p.Namespace, p.Name),
		Address:         tcpAddress(p.IP.String(), constants.InboundPort, p.NetnsPath),
		ListenerFilters: []*listenerv3.ListenerFilter{{Name: xdsnames.TLSInspector, ConfigType: &listenerv3.ListenerFilter_TypedConfig{TypedConfig: mustAny(&tlsinspectorv3.TlsInspector{})}}},
	}
	var clusters []*clusterv3.Cluster
	for _, sp := range p.Serves {
		cl := xdsnames.InboundCluster(p.Namespace, p.Name, sp.TargetPort)
		hcm, err := hcmFor("inbound", m, hcmv3.HttpConnectionManager_HTTP2, true, catchAll(cl))
		if err != nil {
			return nil, nil, fmt.Errorf("inbound listener of %s/%s: %w", p.Namespace, p.Name, err)
		}
		ts, err := downstreamTLS(p.ID)
		if err != nil {
			return nil, nil, err
		}
		l.FilterChains = append(l.FilterChains, &listenerv3.FilterChain{
			Name:             xdsnames.SNI(sp.Port, sp.Service, sp.Namespace, m.Domain),
			FilterChainMatch: &listenerv3.FilterChainMatch{ServerNames: []string{xdsnames.SNI(sp.Port, sp.Service, sp.Namespace, m.Domain)}},
			TransportSocket:  ts,
			Filters:          []*listenerv3.Filter{hcm},
		})
		c, err := inboundCluster(cl, sp.TargetPort, p.NetnsPath)
		if err != nil {
			return nil, nil, fmt.Errorf("inbound cluster of %s/%s: %w", p.Namespace, p.Name, err)
		}
		clusters = append(clusters, c)
	}
	return l, clusters, nil
}

// OutboundListenerFor is the pod's 18081 listener: its connections carry
// the pod's identity in filter state, made by factory (HashableString;
// PlainString only for a control), and route by authority.
func OutboundListenerFor(m Mesh, p Pod, routes []Route, factory string) (*listenerv3.Listener, error) {
	rc := &routev3.RouteConfiguration{Name: xdsnames.OutboundListener(p.Namespace, p.Name)}
	for _, r := range routes {
		a := xdsnames.Authority(r.Service, r.Namespace, m.Domain)
		rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
			Name:    a,
			Domains: []string{a, fmt.Sprintf("%s:%d", a, constants.HTTPOutboundPort)},
			Routes:  []*routev3.Route{toCluster(xdsnames.H2Cluster(r.Service, r.Namespace))},
		})
	}
	rc.VirtualHosts = append(rc.VirtualHosts, &routev3.VirtualHost{
		Name: "unknown-authority", Domains: []string{"*"},
		Routes: []*routev3.Route{{
			Match: prefixSlash(),
			Action: &routev3.Route_DirectResponse{DirectResponse: &routev3.DirectResponseAction{
				Status: 404,
				Body:   &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "no mesh service has this authority (want <svc>.<ns>." + m.Domain + ")\n"}},
			}},
		}},
	})
	hcm, err := hcmFor("outbound", m, hcmv3.HttpConnectionManager_AUTO, false, rc)
	if err != nil {
		return nil, fmt.Errorf("outbound listener of %s/%s: %w", p.Namespace, p.Name, err)
	}
	fs, err := anyOf(&netsetfsv3.Config{OnNewConnection: []*setfsv3.FilterStateValue{{
		Key:                &setfsv3.FilterStateValue_ObjectKey{ObjectKey: xdsnames.CertMapperFilterStateKey},
		FactoryKey:         factory,
		Value:              &setfsv3.FilterStateValue_FormatString{FormatString: &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: p.ID}}}}},
		SharedWithUpstream: setfsv3.FilterStateValue_ONCE,
	}}})
	if err != nil {
		return nil, err
	}
	return &listenerv3.Listener{
		Name:        xdsnames.OutboundListener(p.Namespace, p.Name),
		Address:     tcpAddress("0.0.0.0", constants.HTTPOutboundPort, p.NetnsPath),
		Transparent: wrapperspb.Bool(true),
		FilterChains: []*listenerv3.FilterChain{{
			Name: "http-outbound",
			Filters: []*listenerv3.Filter{
				{Name: xdsnames.SetFilterStateNetwork, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: fs}},
				hcm,
			},
		}},
	}, nil
}

func tcpAddress(ip string, port uint16, netns string) *corev3.Address {
	return &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
		Protocol: corev3.SocketAddress_TCP, Address: ip,
		PortSpecifier:            &corev3.SocketAddress_PortValue{PortValue: uint32(port)},
		NetworkNamespaceFilepath: netns,
	}}}
}

func prefixSlash() *routev3.RouteMatch {
	return &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}}
}

func toCluster(name string) *routev3.Route {
	return &routev3.Route{Match: prefixSlash(), Action: &routev3.Route_Route{Route: &routev3.RouteAction{
		ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: name},
	}}}
}

func catchAll(cluster string) *routev3.RouteConfiguration {
	return &routev3.RouteConfiguration{Name: cluster, VirtualHosts: []*routev3.VirtualHost{{
		Name: "app", Domains: []string{"*"}, Routes: []*routev3.Route{toCluster(cluster)},
	}}}
}

func hcmFor(prefix string, m Mesh, codec hcmv3.HttpConnectionManager_CodecType, inbound bool, rc *routev3.RouteConfiguration) (*listenerv3.Filter, error) {
	fields := map[string]*structpb.Value{}
	for k, v := range AccessLogFormat(inbound) {
		fields[k] = structpb.NewStringValue(v)
	}
	al, err := anyOf(&filev3.FileAccessLog{Path: m.AccessLog, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: &corev3.SubstitutionFormatString{
		Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: &structpb.Struct{Fields: fields}},
	}}})
	if err != nil {
		return nil, err
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix:     prefix,
		CodecType:      codec,
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: rc},
		HttpFilters:    []*hcmv3.HttpFilter{{Name: xdsnames.RouterFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: mustAny(&routerv3.Router{})}}},
		AccessLog:      []*accesslogv3.AccessLog{{Name: xdsnames.FileAccessLogger, ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: al}}},
	}
	if inbound {
		h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_SANITIZE_SET
		h.SetCurrentClientCertDetails = &hcmv3.HttpConnectionManager_SetCurrentClientCertDetails{Uri: true}
	}
	tc, err := anyOf(h)
	if err != nil {
		return nil, err
	}
	return &listenerv3.Filter{Name: xdsnames.HTTPConnectionManager, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tc}}, nil
}

func downstreamTLS(id string) (*corev3.TransportSocket, error) {
	tc, err := anyOf(&tlsv3.DownstreamTlsContext{
		RequireClientCertificate: wrapperspb.Bool(true),
		CommonTlsContext: &tlsv3.CommonTlsContext{
			TlsParams:                      tls13(),
			AlpnProtocols:                  []string{"h2"},
			TlsCertificateSdsSecretConfigs: []*tlsv3.SdsSecretConfig{sds(id)},
			ValidationContextType: &tlsv3.CommonTlsContext_CombinedValidationContext{CombinedValidationContext: &tlsv3.CommonTlsContext_CombinedCertificateValidationContext{
				DefaultValidationContext:         &tlsv3.CertificateValidationContext{},
				ValidationContextSdsSecretConfig: sds(xdsnames.TrustBundleSecret),
			}},
		},
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: xdsnames.TLSTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}, nil
}

func tls13() *tlsv3.TlsParameters {
	return &tlsv3.TlsParameters{TlsMinimumProtocolVersion: tlsv3.TlsParameters_TLSv1_3}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anyOf(m)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return a
}
