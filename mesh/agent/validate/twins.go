package validate

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Gates on QUIC twins (ARCHITECTURE.md, "On-demand twins").
const (
	// GateTwinEDSName: a twin's EDS name is its own. A twin that shares
	// its base cluster's EDS name is added after that name was subscribed
	// and answered, so no EDS response comes and it stalls until the
	// initial fetch timeout (#1008).
	GateTwinEDSName = "twin_eds_name_own"
	// GateTwinPooling: a twin pools upstream connections across
	// downstream connections. Per-downstream-connection pooling gives
	// every request its own QUIC connection, where HTTP/3 misses its CPU
	// budget (#1021).
	GateTwinPooling = "twin_pooling_pinned_off"
	// GateQuicR4: every QUIC chain states enable_resumption and
	// enable_early_data false. Left unset they default to false only
	// while the context validates client certificates; set true, a
	// resumed session skips the client certificate check (R4).
	GateQuicR4 = "quic_r4_pinned"
)

// quicR4 checks every QUIC listener's chains, the default chain included.
func (c *checker) quicR4() {
	for _, res := range c.r[resource.ListenerType] {
		l, ok := res.(*listener.Listener)
		if !ok || l.GetUdpListenerConfig().GetQuicOptions() == nil {
			continue
		}
		chains := slices.Clone(l.GetFilterChains())
		if d := l.GetDefaultFilterChain(); d != nil {
			chains = append(chains, d)
		}
		for i, fc := range chains {
			where := fmt.Sprintf("Listener %s chain %d (%s)", l.GetName(), i, fc.GetName())
			q := &quicv3.QuicDownstreamTransport{}
			if fc.GetTransportSocket().GetName() != xdsnames.QUICTransportSocket || fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(q) != nil {
				c.fail(GateQuicR4, where, "transport_socket is not a QuicDownstreamTransport")
				continue
			}
			for field, v := range map[string]*wrapperspb.BoolValue{"enable_resumption": q.GetEnableResumption(), "enable_early_data": q.GetEnableEarlyData()} {
				if v == nil || v.GetValue() {
					c.fail(GateQuicR4, where, "%s is not stated false (%v)", field, v)
				}
			}
		}
	}
}

func (c *checker) twins() {
	names := make([]string, 0)
	for n := range c.clusters {
		if strings.HasPrefix(n, xdsnames.TwinClusterPrefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		cl := c.clusters[n]
		if cl.GetConnectionPoolPerDownstreamConnection() {
			c.fail(GateTwinPooling, "Cluster "+n, "connection_pool_per_downstream_connection is true: every downstream connection would get its own QUIC connection")
		}
		eds := cl.GetEdsClusterConfig().GetServiceName()
		if eds == "" {
			eds = n
		}
		if eds != n {
			c.fail(GateTwinEDSName, "Cluster "+n, "EDS service name %q is not the twin's own name", eds)
		}
		for other, ocl := range c.clusters {
			if other != n && ocl.GetEdsClusterConfig().GetServiceName() == eds {
				c.fail(GateTwinEDSName, "Cluster "+n, "EDS service name %q is shared with cluster %q", eds, other)
			}
		}
	}
}
