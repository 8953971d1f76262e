package listener

import (
	"fmt"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/proxy/passthrough"
	"github.com/aether-mesh/aether/mesh/xdsext"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// DefaultListenerFiltersTimeout is Envoy's listener_filters_timeout when
// unset: a TCP client whose ClientHello is not whole by then is closed.
const DefaultListenerFiltersTimeout = 15 * time.Second

// Passthrough is an east-west gateway listener (ARCHITECTURE.md, "The
// east-west gateway's passthrough (18009)"): TLS over TCP, or QUIC over
// UDP, passed through to the cluster of the filter chain its SNI selects,
// never terminated.
type Passthrough struct {
	// Chains are the filter chains in order; Routes matches them.
	Chains []passthrough.FilterChain
	Routes *passthrough.Routes
	// InspectTimeout is a TCP listener's listener_filters_timeout;
	// negative is none (an explicit 0s).
	InspectTimeout time.Duration
	// QUIC is a UDP listener's bounds; nil on TCP.
	QUIC *PassthroughQUIC
}

// PassthroughQUIC is the QUIC passthrough filter's configuration; zero
// fields are the forwarder's defaults. It is comparable: a change needs
// a new forwarder, hence a new socket.
type PassthroughQUIC struct {
	StatPrefix                                 string
	MaxFlows, MaxPendingFlows, MaxPendingBytes int
	IdleTimeout, ClientHelloTimeout            time.Duration
}

// isTCPPassthrough says whether a TCP listener is a gateway's: its one
// listener filter is tls_inspector and no chain ends in an HTTP
// connection manager (the inbound's tls_inspector listener is HTTP).
func isTCPPassthrough(l *listenerv3.Listener) bool {
	lfs := l.GetListenerFilters()
	return len(lfs) > 0 && lfs[0].GetName() == TLSInspector && !isHTTP(l.GetFilterChains())
}

// isQUICPassthrough says whether a UDP listener carries the QUIC
// passthrough filter.
func isQUICPassthrough(l *listenerv3.Listener) bool {
	for _, lf := range l.GetListenerFilters() {
		if lf.GetName() == xdsnames.QUICPassthroughFilter {
			return true
		}
	}
	return false
}

// tcpPassthrough compiles a gateway's TCP listener: tls_inspector, chains
// on server_names each ending in tcp_proxy, listener_filters_timeout.
func tcpPassthrough(l *listenerv3.Listener, path string) (*Passthrough, error) {
	if err := inspector(l.GetListenerFilters(), true, path); err != nil {
		return nil, err
	}
	p := &Passthrough{InspectTimeout: DefaultListenerFiltersTimeout}
	if d := l.GetListenerFiltersTimeout(); d != nil {
		if err := d.CheckValid(); err != nil {
			return nil, fmt.Errorf("%s.listener_filters_timeout: %w", path, err)
		}
		switch v := d.AsDuration(); {
		case v < 0:
			return nil, fmt.Errorf("%s.listener_filters_timeout: %s, want 0s (none) or a positive duration", path, v)
		case v == 0:
			p.InspectTimeout = -1
		default:
			p.InspectTimeout = v
		}
	}
	return p, passthroughChains(p, l.GetFilterChains(), path)
}

// quicPassthrough compiles a gateway's UDP listener: the QUIC passthrough
// filter (its bounds) and the same chains as the TCP listener's.
func quicPassthrough(l *listenerv3.Listener, path string) (*Passthrough, error) {
	if l.GetListenerFiltersTimeout() != nil {
		return nil, fmt.Errorf("%s.listener_filters_timeout: not read on a UDP listener; the QUIC passthrough's client_hello_timeout bounds a ClientHello", path)
	}
	lfs := l.GetListenerFilters()
	if len(lfs) != 1 {
		return nil, fmt.Errorf("%s.listener_filters: %d filters, want exactly one %s", path, len(lfs), xdsnames.QUICPassthroughFilter)
	}
	fp := path + ".listener_filters[0]"
	if err := fields.Only(lfs[0], fp, "name", "typed_config"); err != nil {
		return nil, err
	}
	q, err := xdsext.QUICPassthroughFrom(lfs[0].GetTypedConfig(), fp+".typed_config")
	if err != nil {
		return nil, err
	}
	p := &Passthrough{QUIC: &PassthroughQUIC{
		StatPrefix: q.StatPrefix, MaxFlows: int(q.MaxFlows), MaxPendingFlows: int(q.MaxPendingFlows),
		MaxPendingBytes: int(q.MaxPendingBytesPerFlow), IdleTimeout: q.IdleTimeout, ClientHelloTimeout: q.ClientHelloTimeout,
	}}
	return p, passthroughChains(p, l.GetFilterChains(), path)
}

// passthroughChains compiles the chains: filter_chain_match.server_names
// only, and one tcp_proxy naming the cluster, with idle_timeout stated
// 0s: the passthrough keeps no idle timeout of its own on TCP (the mTLS
// session's ends do), and a QUIC flow's is the filter's idle_timeout, so
// Envoy's unset default (an hour) is one this listener cannot honour.
func passthroughChains(p *Passthrough, fcs []*listenerv3.FilterChain, path string) error {
	if len(fcs) == 0 {
		return fmt.Errorf("%s.filter_chains: a gateway listener needs at least one filter chain", path)
	}
	for i, fc := range fcs {
		cp := fmt.Sprintf("%s.filter_chains[%d] (%q)", path, i, fc.GetName())
		if err := fields.Only(fc, cp, "name", "filter_chain_match", "filters"); err != nil {
			return err
		}
		c := passthrough.FilterChain{Name: fc.GetName()}
		if m := fc.GetFilterChainMatch(); m != nil {
			if err := fields.Only(m, cp+".filter_chain_match", "server_names"); err != nil {
				return err
			}
			c.ServerNames = m.GetServerNames()
		}
		if len(fc.GetFilters()) != 1 {
			return fmt.Errorf("%s.filters: %d filters, want exactly one %s", cp, len(fc.GetFilters()), TCPProxyFilter)
		}
		f := fc.GetFilters()[0]
		fp := cp + ".filters[0]"
		if err := fields.Only(f, fp, "name", "typed_config"); err != nil {
			return err
		}
		var tp tcpproxyv3.TcpProxy
		if f.GetName() != TCPProxyFilter || f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&tp) != nil {
			return fmt.Errorf("%s (%q): not a %s TcpProxy (%s)", fp, f.GetName(), TCPProxyFilter, f.GetTypedConfig().GetTypeUrl())
		}
		fp += ".typed_config"
		if err := tp.ValidateAll(); err != nil {
			return fmt.Errorf("%s: %w", fp, err)
		}
		if err := fields.Only(&tp, fp, "stat_prefix", "cluster", "idle_timeout"); err != nil {
			return err
		}
		if tp.GetCluster() == "" {
			return fmt.Errorf("%s.cluster: missing", fp)
		}
		if d := tp.GetIdleTimeout(); d == nil || d.AsDuration() != 0 || d.CheckValid() != nil {
			return fmt.Errorf("%s.idle_timeout: %v, want 0s stated: the passthrough keeps no tcp_proxy idle timeout (unset is Envoy's 1h)", fp, d.AsDuration())
		}
		c.Cluster = tp.GetCluster()
		p.Chains = append(p.Chains, c)
	}
	r, err := passthrough.NewRoutes(p.Chains)
	if err != nil {
		// Envoy refuses a listener whose chains share matching rules.
		return fmt.Errorf("%s.filter_chains: %w", path, err)
	}
	p.Routes = r
	return nil
}
