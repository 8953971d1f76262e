package agent

import (
	"slices"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

type svcClusters struct {
	cluster *cluster.Cluster
	cla     *endpoint.ClusterLoadAssignment
	claFP   uint64
	// name is kept beside the messages so that indexing a full build
	// reads the entry alone, not each cluster's message.
	name string
}

// claPatch is a load assignment that replaces the one at pos in claList.
type claPatch struct {
	pos int
	cla *endpoint.ClusterLoadAssignment
}

// UDPMaxSessions is every UDP cluster's max_connections circuit breaker:
// Envoy's udp_proxy counts each session as one connection of its cluster,
// so this caps the sessions one service's datagrams can hold open on the
// node, and the data plane counts the datagrams refused past it. 1024 is
// Envoy's default; the agent states it on every UDP cluster rather than
// leave the bound to a default the config does not show, and the
// udp_session_limit gate refuses a snapshot without it.
const UDPMaxSessions = 1024

// udpSessionLimit is the circuit breaker every UDP cluster shares (outputs
// are never mutated, see blocks.go).
var udpSessionLimit = &cluster.CircuitBreakers{Thresholds: []*cluster.CircuitBreakers_Thresholds{{
	Priority:       core.RoutingPriority_DEFAULT,
	MaxConnections: wrapperspb.UInt32(UDPMaxSessions),
}}}

// clusters returns a service's cluster and load assignment for one
// transport. The cluster depends on its name only (which carries the
// transport), so it is kept (and its version with it: Envoy re-warms a
// cluster whose CDS entry changes); the load assignment is rebuilt when its
// port or endpoints moved.
func (b *Builder) clusters(c *svcClusters, name string, proto core.SocketAddress_Protocol, port uint16, ready []readyEndpoint, addrs string, prev *svcClusters) {
	h := b.hasher("cla")
	h.str(name).u64(uint64(proto)<<16 | uint64(port))
	for _, ep := range ready {
		h.addr(ep.ip).u64(uint64(ep.weight))
	}
	fp := h.Sum64()
	c.claFP, c.name = fp, name
	// A full build indexes everything at the end (indexAll).
	full := !b.warm
	if prev != nil && prev.name == name {
		c.cluster = prev.cluster
	} else {
		c.cluster = b.edsCluster(name)
		if proto == core.SocketAddress_UDP {
			c.cluster.CircuitBreakers = udpSessionLimit
		}
		if !full {
			b.idx[clusterIdx].set(name, c.cluster)
		}
	}
	if prev != nil && prev.claFP == fp {
		c.cla = prev.cla
	} else {
		c.cla = b.loadAssignment(name, proto, port, ready, addrs)
		if !full {
			b.idx[endpointIdx].set(name, c.cla)
		}
	}
}

func (b *Builder) dropClusters(c *svcClusters) {
	b.idx[clusterIdx].del(c.name)
	b.idx[endpointIdx].del(c.name)
}

func blackhole() *cluster.Cluster {
	return &cluster.Cluster{
		Name:                 xdsnames.BlackholeCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment:       &endpoint.ClusterLoadAssignment{ClusterName: xdsnames.BlackholeCluster},
	}
}

// indexAll fills the cluster and endpoint name indexes of a full build in
// one pass, sized exactly. Filling them one service at a time, between
// the allocations that build each service's messages, costs a cache miss
// per insert once the tables outgrow the cache (at 10,000 services they
// are megabytes); in one tight loop the misses overlap.
func (b *Builder) indexAll() {
	n := 0
	for _, e := range b.services {
		if e.udp != nil {
			n++
		}
		if e.tcp != nil {
			n++
		}
	}
	ci, ei := &b.idx[clusterIdx], &b.idx[endpointIdx]
	ci.items, ei.items = make(map[string]types.Resource, n+1), make(map[string]types.Resource, n)
	ci.changed, ei.changed = true, true
	ci.items[xdsnames.BlackholeCluster] = b.blackhole
	for _, e := range b.services {
		for _, c := range [2]*svcClusters{e.udp, e.tcp} {
			if c == nil {
				continue
			}
			ci.items[c.name], ei.items[c.name] = c.cluster, c.cla
		}
	}
}

// listClusters rebuilds the cluster list when one of its members changed;
// an unchanged list is the previous output's (outputs are never mutated).
func (b *Builder) listClusters() {
	if !b.idx[clusterIdx].changed && b.clusterList != nil {
		return
	}
	b.clusterList = make([]types.Resource, 1, len(b.idx[clusterIdx].items))
	b.clusterList[0] = b.blackhole
	for _, e := range b.services {
		for _, c := range []*svcClusters{e.udp, e.tcp} {
			if c != nil {
				b.clusterList = append(b.clusterList, c.cluster)
			}
		}
	}
}

// listLoadAssignments brings the load assignment list up to the services:
// patched in place when only load assignments changed, rebuilt when one
// moved, else the previous output's.
func (b *Builder) listLoadAssignments(moved bool, patches []claPatch) {
	switch {
	case b.claList != nil && !moved:
		if len(patches) > 0 {
			// Only load assignments changed, each in its place: a copy of
			// the list with them replaced, instead of a walk over every
			// entry.
			b.claList = slices.Clone(b.claList)
			for _, p := range patches {
				b.claList[p.pos] = p.cla
			}
		}
	case b.idx[endpointIdx].changed || b.claList == nil:
		b.claList = make([]types.Resource, 0, len(b.idx[endpointIdx].items))
		for _, e := range b.services {
			e.claPos = int32(len(b.claList))
			for _, c := range [2]*svcClusters{e.udp, e.tcp} {
				if c != nil {
					b.claList = append(b.claList, c.cla)
				}
			}
		}
	}
}
