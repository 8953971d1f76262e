// Package xdsnames holds the names the agent and the data plane must spell
// alike: the resource names the agent gives clusters and listeners, and the
// Envoy extension names its filters and matchers carry. The agent writes
// them, the proxy and the config gates read them; a name defined twice
// drifts, and a drifted name is a NACK or a silent miss (ARCHITECTURE.md,
// "The agent ↔ proxy contract").
package xdsnames

// Cluster names. Every service gets one cluster per transport it serves,
// named for the transport and the service; datagrams that match no arm go
// to the blackhole cluster, which has no endpoints.
const (
	UDPClusterPrefix = "udp:"
	TCPClusterPrefix = "tcp:"
	BlackholeCluster = "blackhole"
)

// Listener name prefixes. Every pod netns gets its own capture listener per
// transport, so the pod is in the name: <prefix><namespace>~<pod>.
const (
	UDPCaptureListenerPrefix = "udp-capture~"
	TCPCaptureListenerPrefix = "tcp-capture~"
)

// Envoy extension names, as Envoy registers them.
const (
	UDPProxyFilter     = "envoy.filters.udp_listener.udp_proxy"
	TCPProxyFilter     = "envoy.filters.network.tcp_proxy"
	DestinationIPInput = "envoy.matching.inputs.destination_ip"
	IPRangeMatcher     = "envoy.matching.custom_matchers.ip_range_matcher"
	// UDPRouteAction names the udp_proxy matcher's on_match action, whose
	// typed config is a udp_proxy Route.
	UDPRouteAction = "route"
)

// UDPCluster and TCPCluster name the clusters of service name in namespace.
func UDPCluster(name, namespace string) string { return UDPClusterPrefix + name + "." + namespace }

func TCPCluster(name, namespace string) string { return TCPClusterPrefix + name + "." + namespace }

// UDPCaptureListener and TCPCaptureListener name pod's capture listeners.
func UDPCaptureListener(namespace, pod string) string {
	return UDPCaptureListenerPrefix + namespace + "~" + pod
}

func TCPCaptureListener(namespace, pod string) string {
	return TCPCaptureListenerPrefix + namespace + "~" + pod
}
