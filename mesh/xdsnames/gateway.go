package xdsnames

// The east-west gateway's resource names (ARCHITECTURE.md, "The east-west
// gateway's passthrough (18009)"). The gateway node has one listener per
// transport on <gateway address>:18009 and one cluster per exposed
// service, whose endpoints are the service's pods' 18008 inbound.
const (
	GatewayTCPListenerPrefix = "gateway-tcp~"
	GatewayUDPListenerPrefix = "gateway-udp~"
	GatewayClusterPrefix     = "gateway:"
)

// QUICPassthroughFilter is the project's own UDP listener filter: QUIC
// passthrough by SNI, which Envoy has no resource for. Its typed_config is
// an xds.type.v3.TypedStruct whose type_url is QUICPassthroughTypeURL
// (mesh/xdsext holds its fields).
const (
	QUICPassthroughFilter  = "aether.filters.udp_listener.quic_passthrough"
	QUICPassthroughTypeURL = "type.aether-mesh.dev/aether.filters.udp_listener.quic_passthrough.v1.QuicPassthrough"
)

// GatewayTCPListener and GatewayUDPListener name node's 18009 listeners.
func GatewayTCPListener(node string) string { return GatewayTCPListenerPrefix + node }

func GatewayUDPListener(node string) string { return GatewayUDPListenerPrefix + node }

// GatewayCluster names the cluster the gateway forwards service name in
// namespace to: its pods at 18008, TLS and QUIC passed through as they are.
func GatewayCluster(name, namespace string) string {
	return GatewayClusterPrefix + name + "." + namespace
}
