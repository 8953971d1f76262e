package listener

import (
	"fmt"
	"strings"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsinspectorv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/listener/tls_inspector/v3"

	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// TLSInspector is the listener filter Envoy needs to match server_names.
const TLSInspector = xdsnames.TLSInspector

// HTTP is a TCP listener whose filter chains end in an HTTP connection
// manager (ARCHITECTURE.md, "The mTLS HTTP/2 path"): the inbound 18008 listener (TLS, chains
// by SNI) or the outbound 18081 one (plaintext, one chain).
type HTTP struct {
	Chains []*HTTPChain
	// QUIC is set on a QUIC listener (UDP, HTTP/3): its R4 fields.
	QUIC *QUIC
}

// HTTPChain is one filter chain of an HTTP listener.
type HTTPChain struct {
	Name        string
	ServerNames []string
	// TLS is the chain's DownstreamTlsContext; nil is plaintext.
	TLS         *mtls.Downstream
	FilterState []hcm.FilterState
	HCM         *hcm.Config
}

// Select returns the chain for a handshake's SNI: the chain naming it in
// server_names, else a chain without server_names; none is Envoy's "no
// matching filter chain", and the connection is closed.
func (h *HTTP) Select(sni string) (*HTTPChain, bool) {
	sni = strings.ToLower(sni)
	var any *HTTPChain
	for _, c := range h.Chains {
		if len(c.ServerNames) == 0 {
			any = c
			continue
		}
		for _, n := range c.ServerNames {
			if strings.ToLower(n) == sni {
				return c, true
			}
		}
	}
	return any, any != nil
}

// isHTTP says whether a chain's last filter is an HTTP connection manager.
func isHTTP(fcs []*listenerv3.FilterChain) bool {
	for _, fc := range fcs {
		if fs := fc.GetFilters(); len(fs) > 0 && fs[len(fs)-1].GetName() == hcm.Filter {
			return true
		}
	}
	return false
}

func httpListener(l *listenerv3.Listener, path string) (*HTTP, error) {
	tlsChains := 0
	h := &HTTP{}
	seen := map[string]string{}
	catchAll := ""
	for i, fc := range l.GetFilterChains() {
		cp := fmt.Sprintf("%s.filter_chains[%d] (%q)", path, i, fc.GetName())
		c, err := httpChain(fc, cp)
		if err != nil {
			return nil, err
		}
		if c.HCM.Codec == hcm.HTTP3 {
			return nil, fmt.Errorf("%s.filters: codec_type HTTP3 needs a QUIC listener (UDP with udp_listener_config.quic_options)", cp)
		}
		for _, n := range c.ServerNames {
			if other, dup := seen[strings.ToLower(n)]; dup {
				return nil, fmt.Errorf("%s.filter_chain_match.server_names: %q is also matched by %s: multiple filter chains with the same matching rules", cp, n, other)
			}
			seen[strings.ToLower(n)] = cp
		}
		if len(c.ServerNames) == 0 {
			if catchAll != "" {
				return nil, fmt.Errorf("%s.filter_chain_match: matches everything, as %s does: multiple filter chains with the same matching rules", cp, catchAll)
			}
			catchAll = cp
		}
		if c.TLS != nil {
			tlsChains++
		}
		h.Chains = append(h.Chains, c)
	}
	if len(h.Chains) == 0 {
		return nil, fmt.Errorf("%s.filter_chains: an HTTP listener needs at least one filter chain", path)
	}
	if err := inspector(l.GetListenerFilters(), len(seen) > 0, path); err != nil {
		return nil, err
	}
	if tlsChains != 0 && tlsChains != len(h.Chains) {
		return nil, fmt.Errorf("%s.filter_chains: %d of %d chains have a TLS transport socket; a listener is all TLS or all plaintext here", path, tlsChains, len(h.Chains))
	}
	return h, nil
}

// inspector checks the listener filters: tls_inspector, and only where
// server_names need it, as Envoy cannot match SNI without it.
func inspector(lfs []*listenerv3.ListenerFilter, needed bool, path string) error {
	if !needed {
		if len(lfs) != 0 {
			return fmt.Errorf("%s.listener_filters[0] (%q): not supported on a listener without server_names", path, lfs[0].GetName())
		}
		return nil
	}
	if len(lfs) != 1 || lfs[0].GetName() != TLSInspector {
		return fmt.Errorf("%s.listener_filters: want exactly %s, which matching server_names needs", path, TLSInspector)
	}
	if err := fields.Only(lfs[0], path+".listener_filters[0]", "name", "typed_config"); err != nil {
		return err
	}
	var ti tlsinspectorv3.TlsInspector
	if tc := lfs[0].GetTypedConfig(); tc != nil {
		if err := tc.UnmarshalTo(&ti); err != nil {
			return fmt.Errorf("%s.listener_filters[0].typed_config: not a TlsInspector: %w", path, err)
		}
	}
	return fields.Only(&ti, path+".listener_filters[0].typed_config")
}

func httpChain(fc *listenerv3.FilterChain, cp string) (*HTTPChain, error) {
	if err := fields.Only(fc, cp, "name", "filter_chain_match", "filters", "transport_socket"); err != nil {
		return nil, err
	}
	c := &HTTPChain{Name: fc.GetName()}
	if m := fc.GetFilterChainMatch(); m != nil {
		if err := fields.Only(m, cp+".filter_chain_match", "server_names"); err != nil {
			return nil, err
		}
		c.ServerNames = m.GetServerNames()
	}
	if ts := fc.GetTransportSocket(); ts != nil {
		d, err := mtls.DownstreamFromProto(ts, cp+".transport_socket")
		if err != nil {
			return nil, err
		}
		c.TLS = d
	} else if len(c.ServerNames) > 0 {
		return nil, fmt.Errorf("%s.filter_chain_match.server_names: set on a plaintext chain, which has no SNI", cp)
	}
	fs := fc.GetFilters()
	for i, f := range fs[:len(fs)-1] {
		v, err := hcm.FilterStateFromFilter(f, fmt.Sprintf("%s.filters[%d]", cp, i))
		if err != nil {
			return nil, err
		}
		c.FilterState = append(c.FilterState, v...)
	}
	h, err := hcm.FromFilter(fs[len(fs)-1], fmt.Sprintf("%s.filters[%d]", cp, len(fs)-1))
	if err != nil {
		return nil, err
	}
	c.HCM = h
	return c, nil
}
