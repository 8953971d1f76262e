package xdsnames

import (
	"fmt"
	"strings"
)

// TwinClusterPrefix starts the name of a QUIC twin: the cluster one local
// service account uses to reach one destination over HTTP/3
// (ARCHITECTURE.md, "On-demand twins").
const TwinClusterPrefix = "quic:"

// OnDemandFilter is Envoy's on_demand HTTP filter.
const OnDemandFilter = "envoy.filters.http.on_demand"

// Twin is the (source service account, destination service) pair a twin
// cluster serves. The service account lives in the pod's namespace, which
// is not always the destination's.
type Twin struct {
	Service, Namespace string
	// SANamespace and SA name the source service account.
	SANamespace, SA string
}

// TwinCluster names the twin of t: quic:<svc>.<ns>@<sa>.<sa-ns>. A
// service account is namespaced like a service, so it is spelled like one:
// two namespaces' "default" accounts are two identities and two twins.
// The twin's EDS resource carries the
// same name, never its base cluster's: twins that share the base's EDS
// name stall until the initial fetch timeout when added after it (#1008).
func TwinCluster(t Twin) string {
	return TwinClusterPrefix + t.Service + "." + t.Namespace + "@" + t.SA + "." + t.SANamespace
}

// ParseTwin reads a twin cluster name back. Each part must be a non-empty
// DNS label, so no two pairs share a name.
func ParseTwin(name string) (Twin, error) {
	rest, ok := strings.CutPrefix(name, TwinClusterPrefix)
	if !ok {
		return Twin{}, fmt.Errorf("cluster %q: not a twin (no %q prefix)", name, TwinClusterPrefix)
	}
	dst, src, ok := strings.Cut(rest, "@")
	if !ok {
		return Twin{}, fmt.Errorf("twin %q: no @<sa>.<sa-ns> source", name)
	}
	var t Twin
	t.Service, t.Namespace, ok = strings.Cut(dst, ".")
	if !ok {
		return Twin{}, fmt.Errorf("twin %q: destination %q is not <svc>.<ns>", name, dst)
	}
	t.SA, t.SANamespace, ok = strings.Cut(src, ".")
	if !ok {
		return Twin{}, fmt.Errorf("twin %q: source %q is not <sa>.<sa-ns>", name, src)
	}
	for _, p := range []string{t.Service, t.Namespace, t.SANamespace, t.SA} {
		if !isLabel(p) {
			return Twin{}, fmt.Errorf("twin %q: %q is not a DNS label", name, p)
		}
	}
	return t, nil
}

// isLabel reports whether s is an RFC 1123 label, as Kubernetes names
// services, namespaces and service accounts.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// QUICTransportSocket is Envoy's QUIC transport socket: a listener's
// QuicDownstreamTransport and a cluster's QuicUpstreamTransport.
const QUICTransportSocket = "envoy.transport_sockets.quic"

// The twin selection route: a MatcherClusterSpecifier on the source
// identity in filter state, one ClusterAction per local account.
const (
	MatcherClusterSpecifier = "envoy.router.cluster_specifier_plugin.matcher"
	FilterStateInput        = "envoy.matching.inputs.filter_state"
	// ClusterAction names a MatcherClusterSpecifier arm's action, whose
	// typed config is a ClusterAction.
	ClusterAction = "cluster"
)

// QuicInboundListenerPrefix names a pod's QUIC inbound on UDP 18008.
const QuicInboundListenerPrefix = "quic-inbound~"

// QuicInboundListener names pod's QUIC inbound.
func QuicInboundListener(namespace, pod string) string {
	return QuicInboundListenerPrefix + namespace + "~" + pod
}
