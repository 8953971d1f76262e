package agent

import (
	"hash/maphash"

	matcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// Output is one node's generated configuration.
type Output struct {
	Resources map[resource.Type][]types.Resource
	// Changes is what this build changed since the builder's previous
	// one, per type: what a cache holding the previous output needs to
	// serve this one. A full build (Full) leaves it empty; the whole of
	// Resources is the change.
	Changes   map[resource.Type]Changes
	Full      bool
	Selection UDPSelection
	// PodsWithoutNetns are local pods that got no capture listener because
	// their sandbox path is not known yet.
	PodsWithoutNetns []registry.Key
}

// Changes is one resource type's difference between two builds.
type Changes struct {
	Updated map[string]types.Resource
	Removed []string
}

// Builder generates a node's xDS resources incrementally. Every build
// compares the new State with the inputs each cached piece was generated
// from and regenerates only what a change touched: a service's clusters,
// load assignments and TCP chain, the UDPRoutes that name the service, the
// shared udp_proxy filter when an arm moved, and the per-pod listeners whose
// filter changed. The name index is kept between builds too and is never
// handed out: a build reports the names it touched (Output.Changes), and
// only those are published, so a change costs no copy of the index.
//
// A Builder is not safe for concurrent use. A failed Build leaves it cold,
// so the next one starts from scratch.
type Builder struct {
	Node string
	Mode constants.CaptureMode
	// HTTP, when set, adds the mTLS HTTP/2 path (httppath.go).
	HTTP *HTTPPath
	// httpPrev is the last build's mTLS path resources by type and name.
	httpPrev map[resource.Type]map[string]types.Resource

	seed maphash.Seed
	warm bool
	gen  uint64
	deps registry.Deps
	// services and routes are the last build's entries in key order.
	services []*svcEntry
	routes   []*routeEntry

	// portSlab and readySlab back the entries' input copies; only ever
	// appended to, so the entries' sub-slices stay valid.
	portSlab    []registry.ServicePort
	readySlab   []readyEndpoint
	parentSlab  []registry.ParentRef
	ruleSlab    []registry.UDPRouteRule
	backendSlab []registry.BackendRef
	weightSlab  []int32
	// slabFloor is the slabs' size after the last full build; past twice
	// that, changed services have left enough dead copies behind that the
	// next build starts over (an amortised compaction).
	slabFloor int

	// healthy is, per service of the last State, whether it has a ready
	// endpoint (for route evaluation; see serviceIndex).
	healthy []bool

	// entrySlab holds a full build's entries (see newEntry).
	entrySlab []svcEntry

	spareServices []*svcEntry
	spareRoutes   []*routeEntry
	// walk is the current build's walk over the services; its slices are
	// kept for the next build's.
	walk serviceWalk
	// byService lists the routes whose evaluation read each service.
	byService map[registry.Key][]registry.Key
	sel       *selector
	selection UDPSelection
	actions   map[string]*matcher.Matcher_OnMatch
	pods      map[registry.Key]*podEntry

	// The udp_proxy filter is one message over every arm, shared by every
	// pod's UDP listener; it is encoded again only when the arms or
	// on_no_match change, not on an endpoint change.
	blackhole  *cluster.Cluster
	udpFP      uint64
	udpFilter  *listener.ListenerFilter
	udpArms    []UDPArm
	udpNoMatch string
	// chains is every TCP service's filter chain in service order, shared
	// by every pod's TCP listener.
	chains   []*listener.FilterChain
	chainsFP uint64
	// clusterList and claList are the last output's resource lists.
	clusterList, claList []types.Resource

	idx [numTypes]typeIndex

	// encBuf and textBuf are the chunks encoded messages and text are
	// carved from (see marshal); proxy is the scratch tcp_proxy encoded
	// for every TCP chain.
	encBuf, textBuf []byte
	// The message blocks of services, carved from chunks (see chunks).
	clusterBlocks chunks[clusterBlock]
	claBlocks     chunks[claBlock]
	lbBlocks      chunks[lbBlock]
	lbPtrs        chunks[*endpoint.LbEndpoint]
	chainBlocks   chunks[chainBlock]
	actionBlocks  chunks[actionBlock]
	// route is the scratch udp_proxy route encoded for every action.
	route        udpproxy.Route
	proxy        tcpproxy.TcpProxy
	proxyCluster tcpproxy.TcpProxy_Cluster
}

// NewBuilder returns a builder for node in mode.
func NewBuilder(node string, mode constants.CaptureMode) *Builder {
	b := &Builder{Node: node, Mode: mode, seed: maphash.MakeSeed()}
	b.reset()
	return b
}

// reset drops every cached piece: the next build is a full one.
func (b *Builder) reset() {
	b.warm = false
	b.services, b.routes = nil, nil
	b.portSlab, b.readySlab, b.parentSlab, b.ruleSlab, b.backendSlab, b.weightSlab = nil, nil, nil, nil, nil, nil
	b.entrySlab = nil
	b.byService = map[registry.Key][]registry.Key{}
	b.sel = newSelector()
	b.selection = UDPSelection{}
	b.actions = map[string]*matcher.Matcher_OnMatch{}
	b.pods = map[registry.Key]*podEntry{}
	b.udpFP, b.udpFilter, b.udpArms, b.udpNoMatch = 0, nil, nil, ""
	b.chains, b.chainsFP = nil, 0
	b.httpPrev = nil
	for i := range b.idx {
		b.idx[i] = typeIndex{items: map[string]types.Resource{}, changed: true}
	}
}

// Build generates the node's resources from st, and what changed since the
// previous build. The result is the same as a fresh builder's
// (TestIncrementalBuildEqualsFromScratch). version is the caller's name for
// the build; resources are versioned by the cache, from their content.
func (b *Builder) Build(st *registry.State, version string) (out *Output, err error) {
	defer func() {
		if err != nil {
			b.reset()
		}
	}()
	deps := st.Dependencies(b.Node)
	full := b.begin(st, deps)
	w := &b.walk
	if err = b.walkServices(w, st, deps, full); err != nil {
		return nil, err
	}
	if full {
		b.indexAll()
	}
	b.listClusters()
	b.listLoadAssignments(w.listsMoved, w.claPatches)
	if w.chainsChanged {
		b.joinChains()
	}
	out = &Output{Full: full}
	if out.Selection, err = b.selectRoutes(st, deps, w.changedSvcs, full); err != nil {
		return nil, err
	}
	udpFilter, err := b.udpProxyFilter(out.Selection)
	if err != nil {
		return nil, err
	}
	out.Resources = map[resource.Type][]types.Resource{
		resource.ClusterType:  b.clusterList,
		resource.EndpointType: b.claList,
		resource.ListenerType: b.podListeners(st, udpFilter, out),
	}
	if err = b.addHTTPPath(st, deps, out); err != nil {
		return nil, err
	}
	out.Changes = b.takeChanges(full)
	if full {
		b.slabFloor = b.slabSize()
	}
	b.warm = true
	return out, nil
}

// begin starts a build and reports whether it is a full one, readying a
// full build's state sized for st.
func (b *Builder) begin(st *registry.State, deps registry.Deps) (full bool) {
	// Past twice the last full build's slab size, dead copies dominate; and
	// when which services exist for the node changed wholesale, a full build
	// is simpler than tracking it.
	if b.warm && (b.slabSize() > 2*b.slabFloor+1024 || !deps.Equal(b.deps)) {
		b.reset()
	}
	b.deps = deps
	b.gen++
	if b.warm {
		return false
	}
	b.sizeSlabs(st)
	b.entrySlab = make([]svcEntry, 0, len(st.Services))
	b.sel = newSelectorFor(len(st.UDPRoutes))
	b.byService = make(map[registry.Key][]registry.Key, len(st.UDPRoutes))
	b.actions = make(map[string]*matcher.Matcher_OnMatch, len(st.UDPRoutes)+1)
	// The cluster and endpoint indexes are filled after the walk, when
	// their sizes are known (indexAll).
	b.idx[listenerIdx].items = make(map[string]types.Resource, 2*len(st.Pods))
	b.blackhole = blackhole()
	b.clusterList, b.claList = nil, nil
	return true
}

// takeChanges is what the build changed per type, and starts the next
// build's record. A full build's change is its whole output, so it reports
// none.
func (b *Builder) takeChanges(full bool) map[resource.Type]Changes {
	c := make(map[resource.Type]Changes, numTypes)
	for i := range b.idx {
		if full {
			b.idx[i].touched, b.idx[i].changed = b.idx[i].touched[:0], false
			continue
		}
		c[typeURLs[i]] = b.idx[i].changes()
	}
	return c
}

// sizeSlabs gives a full build's slabs the capacity its State needs, and
// an eighth more for the copies changed services add in the builds that
// follow: the ports and routes counted (a walk over memory the build reads
// anyway), the ready endpoints guessed at two per service, which only
// costs an append's copy when short.
func (b *Builder) sizeSlabs(st *registry.State) {
	ports := 0
	for i := range st.Services {
		ports += len(st.Services[i].Ports)
	}
	var parents, rules, backends, weights int
	for i := range st.UDPRoutes {
		r := &st.UDPRoutes[i]
		parents += len(r.ParentRefs)
		rules += len(r.Rules)
		for j := range r.Rules {
			backends += len(r.Rules[j].BackendRefs)
			for _, br := range r.Rules[j].BackendRefs {
				if br.Weight != nil {
					weights++
				}
			}
		}
	}
	room := func(n int) int { return n + n/8 + 16 }
	b.portSlab = make([]registry.ServicePort, 0, room(ports))
	b.readySlab = make([]readyEndpoint, 0, room(2*len(st.Services)))
	b.parentSlab, b.ruleSlab = make([]registry.ParentRef, 0, room(parents)), make([]registry.UDPRouteRule, 0, room(rules))
	b.backendSlab, b.weightSlab = make([]registry.BackendRef, 0, room(backends)), make([]int32, 0, room(weights))
}

func (b *Builder) slabSize() int {
	return len(b.portSlab) + len(b.readySlab) + len(b.parentSlab) + len(b.ruleSlab) + len(b.backendSlab) + len(b.weightSlab)
}

// clear0 empties s for reuse, dropping its pointers for the collector.
func clear0[T any](s []*T) []*T {
	clear(s)
	return s[:0]
}
