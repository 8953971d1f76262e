package eastwest

import (
	"fmt"
	"slices"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The resources of the agent's test-only controls: each breaks what the
// mesh's own resources hold, so that a suite's control can show why. None
// is for production.

// WithResumption is a QUIC inbound whose chains, the default chain
// included, state enable_resumption and enable_early_data true: a resumed
// session's 0-RTT request is served before anyone re-verifies the client
// certificate the ticket carries (R4's control).
func WithResumption(l *listenerv3.Listener) (*listenerv3.Listener, error) {
	out := proto.Clone(l).(*listenerv3.Listener)
	chains := slices.Clone(out.GetFilterChains())
	if d := out.GetDefaultFilterChain(); d != nil {
		chains = append(chains, d)
	}
	for i, fc := range chains {
		q := &quicv3.QuicDownstreamTransport{}
		if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(q); err != nil {
			return nil, fmt.Errorf("listener %s chain %d: not a QuicDownstreamTransport: %w", l.GetName(), i, err)
		}
		q.EnableResumption, q.EnableEarlyData = wrapperspb.Bool(true), wrapperspb.Bool(true)
		a, err := pack(q)
		if err != nil {
			return nil, err
		}
		fc.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
	}
	return out, nil
}

// WithWildcard is a QUIC inbound bound to 0.0.0.0 with IP_TRANSPARENT
// instead of the pod's own address: it takes the pod's own UDP egress to
// a peer's 18008, which the capture diverts into the pod's netns, and
// answers it as this pod.
func WithWildcard(l *listenerv3.Listener) *listenerv3.Listener {
	out := proto.Clone(l).(*listenerv3.Listener)
	out.GetAddress().GetSocketAddress().Address = "0.0.0.0"
	out.Transparent = wrapperspb.Bool(true)
	return out
}

// WithCertificate is twin c presenting the SVID named id instead of its
// source account's: every source's twin then arrives as id.
func WithCertificate(c *clusterv3.Cluster, id string) (*clusterv3.Cluster, error) {
	out := proto.Clone(c).(*clusterv3.Cluster)
	q := &quicv3.QuicUpstreamTransport{}
	if err := out.GetTransportSocket().GetTypedConfig().UnmarshalTo(q); err != nil {
		return nil, fmt.Errorf("twin %s: not a QuicUpstreamTransport: %w", c.GetName(), err)
	}
	q.GetUpstreamTlsContext().GetCommonTlsContext().TlsCertificateSdsSecretConfigs = []*tlsv3.SdsSecretConfig{sds(id)}
	a, err := pack(q)
	if err != nil {
		return nil, err
	}
	out.TransportSocket.ConfigType = &corev3.TransportSocket_TypedConfig{TypedConfig: a}
	return out, nil
}
