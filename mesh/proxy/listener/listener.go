// Package listener compiles the agent's capture listeners (LDS) into what
// the data plane runs: a UDP listener whose one listener filter is udp_proxy
// with a destination-IP matcher, or a TCP listener whose filter chains are
// selected by the accepted socket's local address and end in tcp_proxy.
//
// Only the contract's subset is accepted (ARCHITECTURE.md, "The agent ↔
// proxy contract"); every other set field is an error naming its path,
// which the xDS client turns into a NACK, as Envoy rejects what it cannot
// honour.
package listener

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/proxy/match"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Filter names Envoy registers for the two proxies.
const (
	UDPProxyFilter = xdsnames.UDPProxyFilter
	TCPProxyFilter = xdsnames.TCPProxyFilter
)

// Envoy's defaults for an unset idle_timeout: udp_proxy ends a session
// after a minute; tcp_proxy closes a connection after an hour with no bytes
// either way.
const (
	DefaultUDPIdleTimeout = 60 * time.Second
	DefaultTCPIdleTimeout = time.Hour
)

// Socket is what identifies a listener's kernel socket. Two specs with the
// same Socket share it across an update, so live sessions survive.
type Socket struct {
	Protocol    corev3.SocketAddress_Protocol
	Addr        netip.AddrPort
	NetnsPath   string
	Transparent bool
}

// Spec is a compiled Listener resource.
type Spec struct {
	Name   string
	Socket Socket
	UDP    *UDP
	TCP    *TCP
	HTTP   *HTTP
	// Passthrough is an east-west gateway listener, TCP or UDP.
	Passthrough *Passthrough
}

// UDP is the udp_proxy filter's configuration.
type UDP struct {
	StatPrefix  string
	IdleTimeout time.Duration
	Matcher     *match.Matcher
}

// TCP is the listener's filter chains.
type TCP struct {
	Chains []*Chain
}

// Chain is one filter chain ending in tcp_proxy.
type Chain struct {
	Name       string
	Prefixes   []netip.Prefix
	Cluster    string
	StatPrefix string
	// IdleTimeout closes a connection after this long with no bytes
	// either way; zero disables it, as an explicit 0s does in Envoy.
	IdleTimeout time.Duration
}

// Clusters lists the clusters the listener refers to.
func (s *Spec) Clusters() []string {
	if s.UDP != nil {
		return s.UDP.Matcher.Clusters()
	}
	var out []string
	if s.Passthrough != nil {
		for _, c := range s.Passthrough.Chains {
			out = append(out, c.Cluster)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if s.HTTP != nil {
		for _, c := range s.HTTP.Chains {
			out = append(out, c.HCM.Clusters()...)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	for _, c := range s.TCP.Chains {
		out = append(out, c.Cluster)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Select returns the filter chain for a connection whose local (original
// destination) address is dst: the most specific prefix_ranges match, a
// chain without prefix_ranges matching anything, as Envoy's filter chain
// matcher orders destination IP.
func (t *TCP) Select(dst netip.Addr) (*Chain, bool) {
	dst = dst.Unmap()
	var best *Chain
	bestBits := -2
	for _, c := range t.Chains {
		if len(c.Prefixes) == 0 {
			if bestBits < -1 {
				best, bestBits = c, -1
			}
			continue
		}
		for _, p := range c.Prefixes {
			if p.Contains(dst) && p.Bits() > bestBits {
				best, bestBits = c, p.Bits()
			}
		}
	}
	return best, best != nil
}

// FromProto compiles a Listener resource.
func FromProto(l *listenerv3.Listener) (*Spec, error) {
	path := fmt.Sprintf("Listener %q", l.GetName())
	if err := l.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := fields.Only(l, path, "name", "address", "filter_chains", "listener_filters", "transparent", "traffic_direction", "stat_prefix", "udp_listener_config", "default_filter_chain", "listener_filters_timeout"); err != nil {
		return nil, err
	}
	if l.GetListenerFiltersTimeout() != nil && !isTCPPassthrough(l) && !isQUICPassthrough(l) {
		// Only the gateway's passthrough reads it; elsewhere it would be
		// silently ignored.
		return nil, fmt.Errorf("%s.listener_filters_timeout: supported on an east-west gateway listener only", path)
	}
	if u := l.GetUdpListenerConfig(); u != nil {
		if err := fields.Only(u, path+".udp_listener_config", "quic_options"); err != nil {
			return nil, err
		}
		if q := u.GetQuicOptions(); q != nil {
			if err := fields.Only(q, path+".udp_listener_config.quic_options"); err != nil {
				return nil, err
			}
		}
	}
	if l.GetDefaultFilterChain() != nil && l.GetUdpListenerConfig().GetQuicOptions() == nil {
		return nil, fmt.Errorf("%s.default_filter_chain: supported on a QUIC listener only", path)
	}
	sa := l.GetAddress().GetSocketAddress()
	if sa == nil {
		return nil, fmt.Errorf("%s.address.socket_address: missing", path)
	}
	if err := fields.Only(sa, path+".address.socket_address", "protocol", "address", "port_value", "network_namespace_filepath"); err != nil {
		return nil, err
	}
	ip, err := netip.ParseAddr(sa.GetAddress())
	if err != nil {
		return nil, fmt.Errorf("%s.address.socket_address.address: %w", path, err)
	}
	s := &Spec{Name: l.GetName(), Socket: Socket{
		Protocol:    sa.GetProtocol(),
		Addr:        netip.AddrPortFrom(ip.Unmap(), uint16(sa.GetPortValue())),
		NetnsPath:   sa.GetNetworkNamespaceFilepath(),
		Transparent: l.GetTransparent().GetValue(),
	}}
	switch sa.GetProtocol() {
	case corev3.SocketAddress_UDP:
		if isQUICPassthrough(l) {
			if l.GetUdpListenerConfig() != nil {
				return nil, fmt.Errorf("%s.udp_listener_config: a QUIC passthrough listener terminates nothing; quic_options would terminate", path)
			}
			s.Passthrough, err = quicPassthrough(l, path)
			return s, err
		}
		if l.GetUdpListenerConfig().GetQuicOptions() != nil {
			s.HTTP, err = quicListener(l, path)
			return s, err
		}
		if len(l.GetFilterChains()) != 0 {
			return nil, fmt.Errorf("%s.filter_chains: a UDP listener takes udp_proxy as a listener filter, not filter chains", path)
		}
		if s.UDP, err = udpFilter(l.GetListenerFilters(), path); err != nil {
			return nil, err
		}
	case corev3.SocketAddress_TCP:
		if l.GetUdpListenerConfig() != nil {
			return nil, fmt.Errorf("%s.udp_listener_config: set on a TCP listener", path)
		}
		if isHTTP(l.GetFilterChains()) {
			s.HTTP, err = httpListener(l, path)
			return s, err
		}
		if isTCPPassthrough(l) {
			s.Passthrough, err = tcpPassthrough(l, path)
			return s, err
		}
		if len(l.GetListenerFilters()) != 0 {
			return nil, fmt.Errorf("%s.listener_filters[0] (%q): TCP listener filters are not supported", path, l.GetListenerFilters()[0].GetName())
		}
		if l.GetUdpListenerConfig() != nil {
			return nil, fmt.Errorf("%s.udp_listener_config: set on a TCP listener", path)
		}
		if s.TCP, err = tcpChains(l.GetFilterChains(), path); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func udpFilter(lfs []*listenerv3.ListenerFilter, path string) (*UDP, error) {
	if len(lfs) != 1 {
		return nil, fmt.Errorf("%s.listener_filters: %d filters, want exactly one %s", path, len(lfs), UDPProxyFilter)
	}
	lf := lfs[0]
	fp := fmt.Sprintf("%s.listener_filters[0]", path)
	if err := fields.Only(lf, fp, "name", "typed_config"); err != nil {
		return nil, err
	}
	var cfg udpproxyv3.UdpProxyConfig
	if lf.GetTypedConfig() == nil || lf.GetTypedConfig().UnmarshalTo(&cfg) != nil {
		return nil, fmt.Errorf("%s.typed_config (%q): not an udp_proxy UdpProxyConfig (%s)", fp, lf.GetName(), lf.GetTypedConfig().GetTypeUrl())
	}
	fp += ".typed_config"
	if err := cfg.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", fp, err)
	}
	if err := fields.Only(&cfg, fp, "stat_prefix", "idle_timeout", "matcher", "cluster"); err != nil {
		return nil, err
	}
	u := &UDP{StatPrefix: cfg.GetStatPrefix(), IdleTimeout: DefaultUDPIdleTimeout}
	if cfg.GetIdleTimeout() != nil {
		u.IdleTimeout = cfg.GetIdleTimeout().AsDuration()
		if u.IdleTimeout <= 0 {
			return nil, fmt.Errorf("%s.idle_timeout: %s, want a positive duration", fp, u.IdleTimeout)
		}
	}
	switch rs := cfg.GetRouteSpecifier().(type) {
	case *udpproxyv3.UdpProxyConfig_Matcher:
		m, err := match.Compile(rs.Matcher, fp+".matcher")
		if err != nil {
			return nil, err
		}
		u.Matcher = m
	case *udpproxyv3.UdpProxyConfig_Cluster:
		u.Matcher = match.Always(rs.Cluster)
	default:
		return nil, fmt.Errorf("%s: route_specifier is missing", fp)
	}
	return u, nil
}

// tcpIdleTimeout is tcp_proxy's idle_timeout: absent is Envoy's default,
// an explicit zero disables it.
func tcpIdleTimeout(tp *tcpproxyv3.TcpProxy, fp string) (time.Duration, error) {
	d := tp.GetIdleTimeout()
	if d == nil {
		return DefaultTCPIdleTimeout, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, fmt.Errorf("%s.idle_timeout: %w", fp, err)
	}
	if d.AsDuration() < 0 {
		return 0, fmt.Errorf("%s.idle_timeout: %s, want 0s (disabled) or a positive duration", fp, d.AsDuration())
	}
	return d.AsDuration(), nil
}

func tcpChains(fcs []*listenerv3.FilterChain, path string) (*TCP, error) {
	t := &TCP{}
	seen := map[netip.Prefix]string{}
	catchAll := ""
	for i, fc := range fcs {
		cp := fmt.Sprintf("%s.filter_chains[%d]", path, i)
		if fc.GetName() != "" {
			cp = fmt.Sprintf("%s.filter_chains[%d] (%q)", path, i, fc.GetName())
		}
		if err := fields.Only(fc, cp, "name", "filter_chain_match", "filters"); err != nil {
			return nil, err
		}
		c := &Chain{Name: fc.GetName()}
		if m := fc.GetFilterChainMatch(); m != nil {
			if err := fields.Only(m, cp+".filter_chain_match", "prefix_ranges"); err != nil {
				return nil, err
			}
			for j, r := range m.GetPrefixRanges() {
				a, err := netip.ParseAddr(r.GetAddressPrefix())
				if err != nil {
					return nil, fmt.Errorf("%s.filter_chain_match.prefix_ranges[%d].address_prefix: %w", cp, j, err)
				}
				p, err := a.Unmap().Prefix(int(r.GetPrefixLen().GetValue()))
				if err != nil {
					return nil, fmt.Errorf("%s.filter_chain_match.prefix_ranges[%d].prefix_len: %w", cp, j, err)
				}
				if other, dup := seen[p]; dup {
					// Envoy refuses a listener whose chains share match rules.
					return nil, fmt.Errorf("%s.filter_chain_match.prefix_ranges[%d]: %s is also matched by %s: multiple filter chains with the same matching rules", cp, j, p, other)
				}
				seen[p] = cp
				c.Prefixes = append(c.Prefixes, p)
			}
		}
		if len(c.Prefixes) == 0 {
			if catchAll != "" {
				return nil, fmt.Errorf("%s.filter_chain_match: matches everything, as %s does: multiple filter chains with the same matching rules", cp, catchAll)
			}
			catchAll = cp
		}
		if len(fc.GetFilters()) != 1 {
			return nil, fmt.Errorf("%s.filters: %d filters, want exactly one %s", cp, len(fc.GetFilters()), TCPProxyFilter)
		}
		f := fc.GetFilters()[0]
		fp := cp + ".filters[0]"
		if err := fields.Only(f, fp, "name", "typed_config"); err != nil {
			return nil, err
		}
		var tp tcpproxyv3.TcpProxy
		if f.GetTypedConfig() == nil || f.GetTypedConfig().UnmarshalTo(&tp) != nil {
			return nil, fmt.Errorf("%s.typed_config (%q): not a tcp_proxy TcpProxy (%s)", fp, f.GetName(), f.GetTypedConfig().GetTypeUrl())
		}
		fp += ".typed_config"
		if err := tp.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%s: %w", fp, err)
		}
		if err := fields.Only(&tp, fp, "stat_prefix", "cluster", "idle_timeout"); err != nil {
			return nil, err
		}
		if tp.GetCluster() == "" {
			return nil, fmt.Errorf("%s.cluster: missing", fp)
		}
		c.Cluster, c.StatPrefix = tp.GetCluster(), tp.GetStatPrefix()
		idle, err := tcpIdleTimeout(&tp, fp)
		if err != nil {
			return nil, err
		}
		c.IdleTimeout = idle
		t.Chains = append(t.Chains, c)
	}
	if len(t.Chains) == 0 {
		return nil, fmt.Errorf("%s.filter_chains: a TCP listener needs at least one filter chain", path)
	}
	return t, nil
}
