package validate

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsext"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// The east-west gateway's gates (ARCHITECTURE.md, "The east-west gateway's
// passthrough (18009)"). That every gateway chain's cluster is in CDS is
// tcp_chains_resolve_cds's: the chains end in tcp_proxy on both transports.
const (
	// GateGatewayListener: the gateway binds EastWestTunnelPort on TCP
	// and on UDP, on one address, with tls_inspector and a stated
	// listener_filters_timeout on TCP and the QUIC passthrough filter on
	// UDP, and the two transports route the same server names to the
	// same clusters.
	GateGatewayListener = "gateway_listener"
	// GateGatewayServerNames: no server name in two chains of one
	// listener (Envoy refuses such a listener; the proxy NACKs it), and
	// no chain without one (a catch-all would forward any SNI to one
	// service).
	GateGatewayServerNames = "gateway_server_names_unique"
	// GateGatewayBounds: the QUIC passthrough's bounds are all stated and
	// positive.
	GateGatewayBounds = "gateway_bounds"
	// GateGatewayChainRoutes: each chain forwards the server name it
	// matches, <port>.<svc>.<ns>.<mesh-domain>, to that service's own
	// gateway:<svc>.<ns> cluster. A chain sending one service's SNI to
	// another's pods delivers a client to a destination it did not name.
	GateGatewayChainRoutes = "gateway_chain_routes_own_service"
)

type gatewayListeners struct {
	tcp, udp *listener.Listener
}

func (c *checker) gateways() {
	byNode := map[string]*gatewayListeners{}
	var nodes []string
	get := func(node string) *gatewayListeners {
		g := byNode[node]
		if g == nil {
			g = &gatewayListeners{}
			byNode[node] = g
			nodes = append(nodes, node)
		}
		return g
	}
	for _, res := range c.r[resource.ListenerType] {
		l, ok := res.(*listener.Listener)
		if !ok {
			continue
		}
		switch n := l.GetName(); {
		case strings.HasPrefix(n, xdsnames.GatewayTCPListenerPrefix):
			get(strings.TrimPrefix(n, xdsnames.GatewayTCPListenerPrefix)).tcp = l
		case strings.HasPrefix(n, xdsnames.GatewayUDPListenerPrefix):
			get(strings.TrimPrefix(n, xdsnames.GatewayUDPListenerPrefix)).udp = l
		}
	}
	slices.Sort(nodes)
	for _, node := range nodes {
		g := byNode[node]
		if g.tcp == nil || g.udp == nil {
			have, miss := xdsnames.GatewayTCPListener(node), xdsnames.GatewayUDPListener(node)
			if g.tcp == nil {
				have, miss = miss, have
			}
			c.fail(GateGatewayListener, "Listener "+have, "the gateway serves both transports of %d, but listener %q is missing", constants.EastWestTunnelPort, miss)
		}
		var routes [2]map[string]string
		if g.tcp != nil {
			c.gatewayAddress(g.tcp, core.SocketAddress_TCP)
			c.gatewayTCPFilters(g.tcp)
			routes[0] = c.gatewayChains(g.tcp, true)
		}
		if g.udp != nil {
			c.gatewayAddress(g.udp, core.SocketAddress_UDP)
			c.gatewayUDPFilter(g.udp)
			routes[1] = c.gatewayChains(g.udp, false)
		}
		if g.tcp != nil && g.udp != nil {
			ta, ua := g.tcp.GetAddress().GetSocketAddress().GetAddress(), g.udp.GetAddress().GetSocketAddress().GetAddress()
			if ta != ua {
				c.fail(GateGatewayListener, "Listener "+g.udp.GetName(), "binds %s, the TCP listener %s: the gateway has one address", ua, ta)
			}
			for _, d := range diffRoutes(routes[0], routes[1]) {
				c.fail(GateGatewayListener, "Listener "+g.udp.GetName(), "%s", d)
			}
		}
	}
}

func (c *checker) gatewayAddress(l *listener.Listener, want core.SocketAddress_Protocol) {
	sa := l.GetAddress().GetSocketAddress()
	if sa.GetProtocol() != want || sa.GetPortValue() != uint32(constants.EastWestTunnelPort) {
		c.fail(GateGatewayListener, "Listener "+l.GetName(), "address must be %s <gateway address>:%d (EastWestTunnelPort), is %s %s:%d",
			want, constants.EastWestTunnelPort, sa.GetProtocol(), sa.GetAddress(), sa.GetPortValue())
	}
}

func (c *checker) gatewayTCPFilters(l *listener.Listener) {
	name := "Listener " + l.GetName()
	lfs := l.GetListenerFilters()
	if len(lfs) != 1 || lfs[0].GetName() != xdsnames.TLSInspector {
		c.fail(GateGatewayListener, name, "listener_filters must be exactly %s, which matching server_names needs", xdsnames.TLSInspector)
	}
	if d := l.GetListenerFiltersTimeout(); d == nil || d.AsDuration() <= 0 {
		c.fail(GateGatewayListener, name, "listener_filters_timeout must be stated and positive (a ClientHello's deadline), is %v", d.AsDuration())
	}
}

func (c *checker) gatewayUDPFilter(l *listener.Listener) {
	name := "Listener " + l.GetName()
	lfs := l.GetListenerFilters()
	if len(lfs) != 1 || lfs[0].GetName() != xdsnames.QUICPassthroughFilter {
		c.fail(GateGatewayListener, name, "listener_filters must be exactly %s", xdsnames.QUICPassthroughFilter)
		return
	}
	q, err := xdsext.QUICPassthroughFrom(lfs[0].GetTypedConfig(), "listener_filters[0].typed_config")
	if err != nil {
		gate := GateGatewayBounds
		if errors.Is(err, xdsext.ErrNotQUICPassthrough) {
			gate = GateGatewayListener
		}
		c.fail(gate, name, "%v", err)
		return
	}
	for _, b := range []struct {
		field string
		set   bool
	}{
		{"max_flows", q.MaxFlows > 0},
		{"max_pending_flows", q.MaxPendingFlows > 0},
		{"max_pending_bytes_per_flow", q.MaxPendingBytesPerFlow > 0},
		{"idle_timeout", q.IdleTimeout > 0},
		{"client_hello_timeout", q.ClientHelloTimeout > 0},
	} {
		if !b.set {
			c.fail(GateGatewayBounds, name, "listener_filters[0].typed_config.value.%s: not stated; every bound of the QUIC passthrough is stated and positive", b.field)
		}
	}
}

// gatewayChains checks one listener's server names (and, on TCP, that
// each chain forwards to the service it names) and returns its server
// name → cluster map.
func (c *checker) gatewayChains(l *listener.Listener, tcp bool) map[string]string {
	name := "Listener " + l.GetName()
	routes := map[string]string{}
	owner := map[string]int{}
	for i, fc := range l.GetFilterChains() {
		sns := fc.GetFilterChainMatch().GetServerNames()
		if len(sns) == 0 {
			c.fail(GateGatewayServerNames, name, "filter_chains[%d] (%q) lists no server name: it would take every SNI no other chain lists", i, fc.GetName())
		}
		cluster := ""
		for _, f := range fc.GetFilters() {
			var tp tcpproxy.TcpProxy
			if f.GetTypedConfig().UnmarshalTo(&tp) == nil {
				cluster = tp.GetCluster()
			}
		}
		for _, sn := range sns {
			k := strings.ToLower(strings.TrimSuffix(sn, "."))
			if j, dup := owner[k]; dup {
				c.fail(GateGatewayServerNames, name, "server name %q is in filter_chains[%d] and filter_chains[%d]", sn, j, i)
				continue
			}
			owner[k] = i
			routes[k] = cluster
			// The UDP chains are held to the TCP ones by gateway_listener.
			if tcp && !routesOwnService(k, cluster) {
				c.fail(GateGatewayChainRoutes, name, "filter_chains[%d] (%q) forwards server name %q to %q, not to the cluster of the service it names", i, fc.GetName(), sn, cluster)
			}
		}
	}
	return routes
}

// routesOwnService reports whether cluster is gateway:<svc>.<ns> for the
// server name <port>.<svc>.<ns>.<mesh-domain>.
func routesOwnService(serverName, cluster string) bool {
	svc, ok := strings.CutPrefix(cluster, xdsnames.GatewayClusterPrefix)
	if !ok {
		return false
	}
	_, rest, ok := strings.Cut(serverName, ".")
	return ok && strings.HasPrefix(rest, strings.ToLower(svc)+".")
}

func diffRoutes(tcp, udp map[string]string) []string {
	var out []string
	for _, sn := range sortedKeys(tcp) {
		if u, ok := udp[sn]; !ok {
			out = append(out, fmt.Sprintf("server name %q: routed on TCP (to %q), not on UDP", sn, tcp[sn]))
		} else if u != tcp[sn] {
			out = append(out, fmt.Sprintf("server name %q: routed to %q on TCP, to %q on UDP", sn, tcp[sn], u))
		}
	}
	for _, sn := range sortedKeys(udp) {
		if _, ok := tcp[sn]; !ok {
			out = append(out, fmt.Sprintf("server name %q: routed on UDP (to %q), not on TCP", sn, udp[sn]))
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
