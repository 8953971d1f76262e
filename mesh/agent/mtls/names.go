// Package mtls builds the agent's resources for the mTLS HTTP/2 path: the
// SDS secrets (one SVID per local service account, the trust bundle), the
// per-pod inbound listener on 18008 and outbound HTTP listener on 18081,
// and the h2 clusters between them. The shapes are the contract's
// (mesh/CONTRACT-MTLS.md); the proxy consumes exactly these.
package mtls

import (
	"fmt"
	"strconv"
)

// Envoy extension and filter state names, as Envoy registers them.
const (
	TLSTransportSocket     = "envoy.transport_sockets.tls"
	TLSInspector           = "envoy.filters.listener.tls_inspector"
	HTTPConnectionManager  = "envoy.filters.network.http_connection_manager"
	SetFilterStateNetwork  = "envoy.filters.network.set_filter_state"
	RouterFilter           = "envoy.filters.http.router"
	FileAccessLogger       = "envoy.access_loggers.file"
	SPIFFEValidator        = "envoy.tls.cert_validator.spiffe"
	OnDemandSecretSelector = "envoy.tls.certificate_selectors.on_demand_secret"
	FilterStateCertMapper  = "envoy.tls.upstream_certificate_mappers.filter_state_override"
	HTTPProtocolOptionsKey = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	// CertMapperFilterStateKey is the filter state object Envoy's
	// filter_state_override mapper reads; Envoy chooses it, not the mesh.
	CertMapperFilterStateKey = "envoy.tls.certificate_mappers.on_demand_secret"
	// HashableString is the set_filter_state factory whose object has a
	// hash(), which is what folds it into the upstream pool key.
	HashableString = "envoy.hashable_string"
	// PlainString is set_filter_state's default factory: no hash(), so the
	// object selects a certificate without splitting the pool (#831).
	PlainString = "envoy.string"
)

// Resource names.
const (
	// TrustBundleSecret is the validation context secret every TLS context
	// validates its peer with.
	TrustBundleSecret = "trust-bundle"
	// NoSourceIdentity is the mapper's default_value: a name that is never
	// a secret, so a connection without the filter state fails its
	// handshake instead of presenting someone's identity.
	NoSourceIdentity = "no-source-identity"

	InboundListenerPrefix  = "http-inbound~"
	OutboundListenerPrefix = "http-outbound~"
	InboundClusterPrefix   = "inbound:"
	H2ClusterPrefix        = "h2:"
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
