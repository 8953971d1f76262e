package listener

import (
	"fmt"
	"strings"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// QUIC is a QUIC listener's QuicDownstreamTransport fields, as
// configured (R4). The listener serves one QUIC server, so every chain
// must state the same.
type QUIC struct {
	EnableResumption, EnableEarlyData bool
}

// quicListener compiles a QUIC listener: UDP with quic_options, chains
// selected by server_names as on the TCP inbound, the default chain taking
// a handshake no chain names, each chain's QuicDownstreamTransport
// wrapping a DownstreamTlsContext and an HTTP/3 connection manager
// (ARCHITECTURE.md, "On-demand twins").
func quicListener(l *listenerv3.Listener, path string) (*HTTP, error) {
	if len(l.GetListenerFilters()) != 0 {
		return nil, fmt.Errorf("%s.listener_filters[0] (%q): a QUIC listener matches server_names itself", path, l.GetListenerFilters()[0].GetName())
	}
	h := &HTTP{}
	seen := map[string]string{}
	fcs := l.GetFilterChains()
	if d := l.GetDefaultFilterChain(); d != nil {
		if d.GetFilterChainMatch() != nil {
			return nil, fmt.Errorf("%s.default_filter_chain.filter_chain_match: the default chain matches nothing", path)
		}
		fcs = append(fcs[:len(fcs):len(fcs)], d)
	}
	for i, fc := range fcs {
		cp := fmt.Sprintf("%s.filter_chains[%d] (%q)", path, i, fc.GetName())
		if i == len(l.GetFilterChains()) {
			cp = fmt.Sprintf("%s.default_filter_chain (%q)", path, fc.GetName())
		} else if len(fc.GetFilterChainMatch().GetServerNames()) == 0 {
			return nil, fmt.Errorf("%s.filter_chain_match.server_names: required on a QUIC chain; a catch-all is the default_filter_chain", cp)
		}
		c, q, err := quicChain(fc, cp)
		if err != nil {
			return nil, err
		}
		if h.QUIC != nil && *h.QUIC != *q {
			return nil, fmt.Errorf("%s.transport_socket: enable_resumption/enable_early_data differ from the listener's other chains, and one QUIC server serves them all", cp)
		}
		h.QUIC = q
		for _, n := range c.ServerNames {
			if other, dup := seen[strings.ToLower(n)]; dup {
				return nil, fmt.Errorf("%s.filter_chain_match.server_names: %q is also matched by %s: multiple filter chains with the same matching rules", cp, n, other)
			}
			seen[strings.ToLower(n)] = cp
		}
		h.Chains = append(h.Chains, c)
	}
	if len(h.Chains) == 0 {
		return nil, fmt.Errorf("%s.filter_chains: a QUIC listener needs at least one filter chain", path)
	}
	return h, nil
}

// quicChain compiles a chain whose transport is QUIC: its TLS context goes
// through the same compiler as a TCP chain's.
func quicChain(fc *listenerv3.FilterChain, cp string) (*HTTPChain, *QUIC, error) {
	d, err := h3.DownstreamFromProto(fc.GetTransportSocket(), cp+".transport_socket")
	if err != nil {
		return nil, nil, err
	}
	tc, err := anypb.New(d.TLS)
	if err != nil {
		return nil, nil, fmt.Errorf("%s.transport_socket: %w", cp, err)
	}
	inner := &listenerv3.FilterChain{
		Name:             fc.GetName(),
		FilterChainMatch: fc.GetFilterChainMatch(),
		Filters:          fc.GetFilters(),
		TransportSocket:  &corev3.TransportSocket{Name: xdsnames.TLSTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}},
	}
	c, err := httpChain(inner, cp)
	if err != nil {
		return nil, nil, err
	}
	if c.HCM.Codec != hcm.HTTP3 {
		return nil, nil, fmt.Errorf("%s.filters: a QUIC chain's HTTP connection manager must use codec_type HTTP3", cp)
	}
	return c, &QUIC{EnableResumption: d.EnableResumption, EnableEarlyData: d.EnableEarlyData}, nil
}
