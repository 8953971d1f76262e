package validate

import (
	"sort"
	"strings"

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
)

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
