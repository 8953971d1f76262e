package xdsnames

import (
	"fmt"
	"strconv"
)

// The mTLS HTTP/2 path's resource names (ARCHITECTURE.md, "The mTLS
// HTTP/2 path").
const (
	// TrustBundleSecret is the validation context secret every mesh TLS
	// context validates its peer with. An SVID secret is named by its
	// SPIFFE ID.
	TrustBundleSecret = "trust-bundle"
	// NoSourceIdentity is the certificate mapper's default_value: a name
	// that is never a secret, so a connection without the filter state
	// fails its handshake instead of presenting someone's identity.
	NoSourceIdentity = "no-source-identity"

	InboundListenerPrefix  = "http-inbound~"
	OutboundListenerPrefix = "http-outbound~"
	InboundClusterPrefix   = "inbound:"
	H2ClusterPrefix        = "h2:"
)

// Envoy extension and filter state names of the mTLS path, as Envoy
// registers them.
const (
	TLSTransportSocket    = "envoy.transport_sockets.tls"
	TLSInspector          = "envoy.filters.listener.tls_inspector"
	HTTPConnectionManager = "envoy.filters.network.http_connection_manager"
	SetFilterStateNetwork = "envoy.filters.network.set_filter_state"
	RouterFilter          = "envoy.filters.http.router"
	FileAccessLogger      = "envoy.access_loggers.file"
	SPIFFEValidator       = "envoy.tls.cert_validator.spiffe"
	// OnDemandSecretSelector and FilterStateCertMapper choose an upstream
	// certificate per connection.
	OnDemandSecretSelector = "envoy.tls.certificate_selectors.on_demand_secret"
	FilterStateCertMapper  = "envoy.tls.upstream_certificate_mappers.filter_state_override"
	HTTPProtocolOptions    = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	// CertMapperFilterStateKey is the filter state object Envoy's
	// filter_state_override mapper reads; Envoy chooses it, not the mesh.
	CertMapperFilterStateKey = "envoy.tls.certificate_mappers.on_demand_secret"
	// HashableStringFactory builds a string object with a hash(), which is
	// what folds it into the upstream pool key; StringFactory, the
	// default, builds one without (#831).
	HashableStringFactory = "envoy.hashable_string"
	StringFactory         = "envoy.string"
)

// InboundListener names a pod's 18008 listener.
func InboundListener(namespace, pod string) string {
	return InboundListenerPrefix + namespace + "~" + pod
}

// OutboundListener names a pod's 18081 listener.
func OutboundListener(namespace, pod string) string {
	return OutboundListenerPrefix + namespace + "~" + pod
}

// InboundCluster names the cluster that reaches a pod's app at targetPort.
func InboundCluster(namespace, pod string, targetPort uint16) string {
	return fmt.Sprintf("%s%s~%s:%d", InboundClusterPrefix, namespace, pod, targetPort)
}

// H2Cluster names a service's h2 cluster.
func H2Cluster(name, namespace string) string { return H2ClusterPrefix + name + "." + namespace }

// Authority is how an app names a service on 18081: <svc>.<ns>.<mesh-domain>.
func Authority(name, namespace, domain string) string {
	return name + "." + namespace + "." + domain
}

// SNI names one port of a service in the handshake:
// <port>.<svc>.<ns>.<mesh-domain>, as the QUIC path spells it.
func SNI(port uint16, name, namespace, domain string) string {
	return strconv.Itoa(int(port)) + "." + Authority(name, namespace, domain)
}
