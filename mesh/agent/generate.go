package agent

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
	"time"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	netinputs "github.com/envoyproxy/go-control-plane/envoy/extensions/matching/common_inputs/network/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// Resource names the agent emits.
const (
	BlackholeCluster = "blackhole"

	UDPProxyFilterName     = "envoy.filters.udp_listener.udp_proxy"
	TCPProxyFilterName     = "envoy.filters.network.tcp_proxy"
	DestinationIPInputName = "envoy.matching.inputs.destination_ip"
	IPRangeMatcherName     = "envoy.matching.custom_matchers.ip_range_matcher"
	UDPRouteActionName     = "route"

	udpIdleTimeout = 60 * time.Second
)

// UDPCaptureListenerName and TCPCaptureListenerName name a pod's capture
// listeners; the pod is in the name because every pod netns has its own.
func UDPCaptureListenerName(p *registry.Pod) string {
	return "udp-capture~" + p.Namespace + "~" + p.Name
}

func TCPCaptureListenerName(p *registry.Pod) string {
	return "tcp-capture~" + p.Namespace + "~" + p.Name
}

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

// The resource types the agent emits, as indexes into Builder.idx.
const (
	clusterIdx = iota
	endpointIdx
	listenerIdx
	secretIdx
	numTypes
)

var typeURLs = [numTypes]resource.Type{resource.ClusterType, resource.EndpointType, resource.ListenerType, resource.SecretType}

// typeIndex is one type's name index, the builder's own: touched records
// the names a build set or deleted, from which the build's Changes are
// drawn. Resource versions are the cache's, a hash of each resource's
// encoding, so a version moves exactly when its content does.
type typeIndex struct {
	items   map[string]types.Resource
	changed bool
	touched []string
}

func (t *typeIndex) set(name string, r types.Resource) {
	t.items[name] = r
	t.touched = append(t.touched, name)
	t.changed = true
}

func (t *typeIndex) del(name string) {
	if _, ok := t.items[name]; ok {
		delete(t.items, name)
		t.touched = append(t.touched, name)
		t.changed = true
	}
}

// changes is what the build touched, and starts the next build's record.
func (t *typeIndex) changes() Changes {
	c := Changes{Updated: make(map[string]types.Resource, len(t.touched))}
	for _, name := range t.touched {
		if r, ok := t.items[name]; ok {
			c.Updated[name] = r
		} else if !slices.Contains(c.Removed, name) {
			c.Removed = append(c.Removed, name)
		}
	}
	t.touched, t.changed = t.touched[:0], false
	return c
}

// svcEntry is one service's generated pieces and the inputs they were
// generated from (copied: sources may reuse their slices).
type svcEntry struct {
	key       registry.Key
	clusterIP netip.Addr
	ports     []registry.ServicePort
	ready     []readyEndpoint
	udp, tcp  *svcClusters
	tcpChain  *listener.FilterChain
	chainFP   uint64
	// udpBuf and tcpBuf hold what udp and tcp point to, in the entry's own
	// allocation.
	udpBuf, tcpBuf svcClusters
	// claPos is the place of the entry's first load assignment in the
	// builder's claList.
	claPos int32
}

// claPatch is a load assignment that replaces the one at pos in claList.
type claPatch struct {
	pos int
	cla *endpoint.ClusterLoadAssignment
}

// readyEndpoint is what a load assignment reads of an endpoint.
type readyEndpoint struct {
	ip     netip.Addr
	weight uint32
}

type svcClusters struct {
	cluster *cluster.Cluster
	cla     *endpoint.ClusterLoadAssignment
	claFP   uint64
	// name is kept beside the messages so that indexing a full build
	// reads the entry alone, not each cluster's message.
	name string
}

type routeEntry struct {
	key  registry.Key
	spec registry.UDPRoute
	eval *routeEval
}

type podEntry struct {
	seen         uint64
	udp, tcp     *listener.Listener
	udpFP, tcpFP uint64
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

// hasher is the builder's fingerprint of a piece's inputs: per process
// (the seed is random), so it never outlives the code that computed it.
type hasher struct{ maphash.Hash }

func (b *Builder) hasher(tag string) (h hasher) {
	h.SetSeed(b.seed)
	h.WriteString(tag)
	h.WriteByte(0)
	return h
}

func (h *hasher) str(s string) *hasher { h.WriteString(s); h.WriteByte(0); return h }

func (h *hasher) addr(a netip.Addr) *hasher {
	b := a.As16()
	h.Write(b[:])
	return h
}

func (h *hasher) u64(v uint64) *hasher {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	h.Write(b[:])
	return h
}

// listenerFP is a capture listener's inputs: its name, its pod's netns and
// the shared filter (or chains) it carries.
func (b *Builder) listenerFP(tag, name, netns string, filter uint64) uint64 {
	h := b.hasher(tag)
	return h.str(name).str(netns).u64(filter).Sum64()
}

// same reports whether svc and its endpoints are the inputs e was
// generated from.
func (e *svcEntry) same(svc *registry.Service, eps []registry.Endpoint) bool {
	if e.clusterIP != svc.ClusterIP || !slices.Equal(e.ports, svc.Ports) {
		return false
	}
	n := 0
	for i := range eps {
		if !eps[i].Ready {
			continue
		}
		if n >= len(e.ready) || e.ready[n].ip != eps[i].IP || e.ready[n].weight != eps[i].Weight {
			return false
		}
		n++
	}
	return n == len(e.ready)
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
	if b.warm && b.slabSize() > 2*b.slabFloor+1024 {
		b.reset()
	}
	if b.warm && !deps.Equal(b.deps) {
		// Which services exist for the node changed wholesale; a full
		// build is simpler than tracking it.
		b.reset()
	}
	full := !b.warm
	if full {
		b.sizeSlabs(st)
		b.entrySlab = make([]svcEntry, 0, len(st.Services))
		b.sel = newSelectorFor(len(st.UDPRoutes))
		b.byService = make(map[registry.Key][]registry.Key, len(st.UDPRoutes))
		b.actions = make(map[string]*matcher.Matcher_OnMatch, len(st.UDPRoutes)+1)
		// The cluster and endpoint indexes are filled after the walk, when
		// their sizes are known (indexAll).
		li := &b.idx[listenerIdx]
		li.items = make(map[string]types.Resource, 2*len(st.Pods))
	}
	b.deps = deps
	b.gen++
	out = &Output{Resources: map[resource.Type][]types.Resource{}}

	if full {
		b.blackhole = blackhole()
		b.clusterList, b.claList = nil, nil
	}
	chainsChanged := full
	var changedSvcs []registry.Key
	// listsMoved is set when a service came, went or changed its clusters,
	// which moves load assignments in claList; otherwise the changed ones
	// are claPatches.
	listsMoved := full
	var claPatches []claPatch
	// The previous build's entries and the State are both in key order, so
	// one walk over the two pairs them up without a map probe per service.
	// prev and the new order swap buffers: nothing outside the builder
	// holds either.
	prev := b.services
	b.services = b.spareServices[:0]
	defer func() { b.spareServices = clear0(prev) }()
	b.healthy = slices.Grow(b.healthy[:0], len(st.Services))[:len(st.Services)]
	clear(b.healthy)
	j := 0
	for i := range st.Services {
		svc := &st.Services[i]
		k := svc.Key()
		if i > 0 && cmpKey(st.Services[i-1].Key(), k) >= 0 {
			return nil, fmt.Errorf("registry state for node %q: services are not in key order at %s (sources must call State.Sort)", b.Node, k)
		}
		var e *svcEntry
		for ; j < len(prev); j++ {
			c := cmpKey(prev[j].key, k)
			if c == 0 {
				e = prev[j]
				j++
				break
			}
			if c > 0 {
				break
			}
			chainsChanged = b.dropService(prev[j]) || chainsChanged
			changedSvcs = append(changedSvcs, prev[j].key)
			release(prev[j])
			listsMoved = true
		}
		if !deps.Has(k) {
			if e != nil {
				chainsChanged = b.dropService(e) || chainsChanged
				changedSvcs = append(changedSvcs, k)
				release(e)
				listsMoved = true
			}
			continue
		}
		eps := st.Endpoints[k]
		if e == nil || !e.same(svc, eps) {
			ne, err := b.generateService(svc, eps, e)
			if err != nil {
				return nil, err
			}
			if e == nil || ne.chainFP != e.chainFP {
				chainsChanged = true
			}
			if !full {
				// A full build evaluates every route anyway.
				changedSvcs = append(changedSvcs, k)
			}
			if e != nil && (e.udp == nil) == (ne.udp == nil) && (e.tcp == nil) == (ne.tcp == nil) {
				// Same clusters, so its load assignments keep their
				// places in the list.
				ne.claPos = e.claPos
				pos := int(e.claPos)
				for _, c := range [2][2]*svcClusters{{e.udp, ne.udp}, {e.tcp, ne.tcp}} {
					if c[0] == nil {
						continue
					}
					if c[0].cla != c[1].cla {
						claPatches = append(claPatches, claPatch{pos, c[1].cla})
					}
					pos++
				}
			} else {
				listsMoved = true
			}
			if e != nil {
				release(e)
			}
			e = ne
		}
		b.services = append(b.services, e)
		b.healthy[i] = len(e.ready) > 0
	}
	for ; j < len(prev); j++ {
		chainsChanged = b.dropService(prev[j]) || chainsChanged
		changedSvcs = append(changedSvcs, prev[j].key)
		release(prev[j])
		listsMoved = true
	}
	if full {
		b.indexAll()
	}
	// The lists are rebuilt only when one of their members changed; an
	// unchanged list is the previous output's (outputs are never mutated).
	if b.idx[clusterIdx].changed || b.clusterList == nil {
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
	switch {
	case b.claList != nil && !listsMoved:
		if len(claPatches) > 0 {
			// Only load assignments changed, each in its place: a copy of
			// the list with them replaced, instead of a walk over every
			// entry.
			b.claList = slices.Clone(b.claList)
			for _, p := range claPatches {
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
	if chainsChanged {
		b.chains = b.chains[:0:0]
		h := b.hasher("chains")
		for _, e := range b.services {
			if e.tcpChain != nil {
				b.chains = append(b.chains, e.tcpChain)
				h.u64(e.chainFP)
			}
		}
		b.chainsFP = h.Sum64()
	}

	if out.Selection, err = b.selectRoutes(st, deps, changedSvcs, full); err != nil {
		return nil, err
	}
	udpFilter, err := b.udpProxyFilter(out.Selection)
	if err != nil {
		return nil, err
	}
	listeners, err := b.podListeners(st, udpFilter, out)
	if err != nil {
		return nil, err
	}

	out.Resources[resource.ClusterType] = b.clusterList
	out.Resources[resource.EndpointType] = b.claList
	out.Resources[resource.ListenerType] = listeners
	if err := b.addHTTPPath(st, deps, out); err != nil {
		return nil, err
	}
	out.Full = full
	out.Changes = make(map[resource.Type]Changes, numTypes)
	for i := range b.idx {
		if full {
			b.idx[i].touched, b.idx[i].changed = b.idx[i].touched[:0], false
			continue
		}
		out.Changes[typeURLs[i]] = b.idx[i].changes()
	}
	if full {
		b.slabFloor = b.slabSize()
	}
	b.warm = true
	return out, nil
}

// selectRoutes re-evaluates the routes that changed and those naming a
// changed service, and lets the selector settle the ClusterIPs they claim.
func (b *Builder) selectRoutes(st *registry.State, deps registry.Deps, changedSvcs []registry.Key, full bool) (UDPSelection, error) {
	// stale is the routes naming a changed service, in key order: the walk
	// below meets them in that order, so a cursor finds them without a
	// lookup per route.
	var stale []registry.Key
	for _, k := range changedSvcs {
		stale = append(stale, b.byService[k]...)
	}
	slices.SortFunc(stale, cmpKey)
	stale = slices.Compact(stale)
	isStale := func(rk registry.Key) bool {
		for len(stale) > 0 && cmpKey(stale[0], rk) < 0 {
			stale = stale[1:]
		}
		return len(stale) > 0 && stale[0] == rk
	}
	prev := b.routes
	b.routes = b.spareRoutes[:0]
	defer func() { b.spareRoutes = clear0(prev) }()
	svcs := &serviceIndex{st: st, healthy: b.healthy}
	drop := func(re *routeEntry) {
		b.unindex(re.key, re.eval)
		b.sel.set(re.key, nil)
	}
	j := 0
	for ri := range st.UDPRoutes {
		r := &st.UDPRoutes[ri]
		rk := r.Key()
		var re *routeEntry
		for ; j < len(prev); j++ {
			c := cmpKey(prev[j].key, rk)
			if c == 0 {
				re = prev[j]
				j++
				break
			}
			if c > 0 {
				break
			}
			drop(prev[j])
		}
		if stale := isStale(rk); re == nil || stale || !sameRoute(&re.spec, r) {
			ev := evalRoute(st, svcs, deps, r)
			if re != nil {
				b.unindex(rk, re.eval)
			}
			re = &routeEntry{key: rk, spec: b.cloneRoute(r), eval: ev}
			for _, k := range ev.refs {
				if rs := b.byService[k]; !slices.Contains(rs, rk) {
					b.byService[k] = append(rs, rk)
				}
			}
			b.sel.set(rk, ev)
		}
		if n := len(b.routes); n > 0 && cmpKey(b.routes[n-1].key, rk) >= 0 {
			return UDPSelection{}, fmt.Errorf("registry state for node %q: UDPRoutes are not in key order at %s (sources must call State.Sort)", b.Node, rk)
		}
		b.routes = append(b.routes, re)
	}
	for ; j < len(prev); j++ {
		drop(prev[j])
	}
	b.selection, _ = b.sel.selection(b.selection, full)
	return b.selection, nil
}

func (b *Builder) unindex(rk registry.Key, ev *routeEval) {
	for _, k := range ev.refs {
		b.byService[k] = slices.DeleteFunc(b.byService[k], func(x registry.Key) bool { return x == rk })
		if len(b.byService[k]) == 0 {
			delete(b.byService, k)
		}
	}
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

func sameRoute(a, b *registry.UDPRoute) bool {
	if a.Name != b.Name || a.Namespace != b.Namespace || !slices.Equal(a.ParentRefs, b.ParentRefs) || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		ra, rb := &a.Rules[i], &b.Rules[i]
		if ra.Name != rb.Name || len(ra.BackendRefs) != len(rb.BackendRefs) {
			return false
		}
		for j := range ra.BackendRefs {
			x, y := ra.BackendRefs[j], rb.BackendRefs[j]
			if (x.Weight == nil) != (y.Weight == nil) || x.Weight != nil && *x.Weight != *y.Weight {
				return false
			}
			x.Weight, y.Weight = nil, nil
			if x != y {
				return false
			}
		}
	}
	return true
}

// cloneRoute copies r into the route slabs (see portSlab).
func (b *Builder) cloneRoute(r *registry.UDPRoute) registry.UDPRoute {
	c := *r
	start := len(b.parentSlab)
	b.parentSlab = append(b.parentSlab, r.ParentRefs...)
	c.ParentRefs = b.parentSlab[start:len(b.parentSlab):len(b.parentSlab)]
	start = len(b.ruleSlab)
	b.ruleSlab = append(b.ruleSlab, r.Rules...)
	c.Rules = b.ruleSlab[start:len(b.ruleSlab):len(b.ruleSlab)]
	for i, rule := range r.Rules {
		start := len(b.backendSlab)
		b.backendSlab = append(b.backendSlab, rule.BackendRefs...)
		brs := b.backendSlab[start:len(b.backendSlab):len(b.backendSlab)]
		for j, br := range rule.BackendRefs {
			if br.Weight != nil {
				b.weightSlab = append(b.weightSlab, *br.Weight)
				brs[j].Weight = &b.weightSlab[len(b.weightSlab)-1]
			}
		}
		c.Rules[i].BackendRefs = brs
	}
	return c
}

// podListeners returns every local pod's capture listeners, building anew
// only those whose netns path or shared filter changed.
func (b *Builder) podListeners(st *registry.State, udpFilter *listener.ListenerFilter, out *Output) ([]types.Resource, error) {
	li := &b.idx[listenerIdx]
	var listeners []types.Resource
	seen := 0
	for i := range st.Pods {
		p := &st.Pods[i]
		if p.Node != b.Node {
			continue
		}
		if p.NetnsPath == "" {
			out.PodsWithoutNetns = append(out.PodsWithoutNetns, p.Key())
			continue
		}
		pk := p.Key()
		pe := b.pods[pk]
		if pe == nil {
			pe = &podEntry{}
			b.pods[pk] = pe
		}
		pe.seen = b.gen
		seen++
		uname, tname := UDPCaptureListenerName(p), TCPCaptureListenerName(p)
		if udpFilter == nil {
			pe.udp, pe.udpFP = nil, 0
			li.del(uname)
		} else if fp := b.listenerFP("udp-listener", uname, p.NetnsPath, b.udpFP); pe.udp == nil || pe.udpFP != fp {
			pe.udp, pe.udpFP = &listener.Listener{
				Name:            uname,
				Address:         captureAddress(core.SocketAddress_UDP, p.NetnsPath),
				Transparent:     wrapperspb.Bool(true),
				ListenerFilters: []*listener.ListenerFilter{udpFilter},
			}, fp
			li.set(uname, pe.udp)
		}
		if len(b.chains) == 0 {
			pe.tcp, pe.tcpFP = nil, 0
			li.del(tname)
		} else if fp := b.listenerFP("tcp-listener", tname, p.NetnsPath, b.chainsFP); pe.tcp == nil || pe.tcpFP != fp {
			pe.tcp, pe.tcpFP = &listener.Listener{
				Name:         tname,
				Address:      captureAddress(core.SocketAddress_TCP, p.NetnsPath),
				Transparent:  wrapperspb.Bool(true),
				FilterChains: b.chains,
			}, fp
			li.set(tname, pe.tcp)
		}
		if pe.udp != nil {
			listeners = append(listeners, pe.udp)
		}
		if pe.tcp != nil {
			listeners = append(listeners, pe.tcp)
		}
	}
	if len(b.pods) > seen {
		for pk, pe := range b.pods {
			if pe.seen != b.gen {
				if pe.udp != nil {
					li.del(pe.udp.GetName())
				}
				if pe.tcp != nil {
					li.del(pe.tcp.GetName())
				}
				delete(b.pods, pk)
			}
		}
	}
	return listeners, nil
}

func captureAddress(proto core.SocketAddress_Protocol, netns string) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:                 proto,
		Address:                  "0.0.0.0",
		PortSpecifier:            &core.SocketAddress_PortValue{PortValue: uint32(constants.ProxyL4OutboundPort)},
		NetworkNamespaceFilepath: netns,
	}}}
}

func blackhole() *cluster.Cluster {
	return &cluster.Cluster{
		Name:                 BlackholeCluster,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_STATIC},
		ConnectTimeout:       durationpb.New(time.Second),
		LoadAssignment:       &endpoint.ClusterLoadAssignment{ClusterName: BlackholeCluster},
	}
}

// generateService builds svc's pieces, reusing old's where their inputs
// are unchanged, and records them in the name index.
func (b *Builder) generateService(svc *registry.Service, eps []registry.Endpoint, old *svcEntry) (*svcEntry, error) {
	k := svc.Key()
	// The copies are carved from slabs so that the next build's comparison
	// walks memory in service order instead of chasing one small
	// allocation per service.
	start := len(b.portSlab)
	b.portSlab = append(b.portSlab, svc.Ports...)
	e := b.newEntry()
	e.key, e.clusterIP, e.ports = k, svc.ClusterIP, b.portSlab[start:len(b.portSlab):len(b.portSlab)]
	start = len(b.readySlab)
	for i := range eps {
		if eps[i].Ready {
			b.readySlab = append(b.readySlab, readyEndpoint{ip: eps[i].IP, weight: eps[i].Weight})
		}
	}
	e.ready = b.readySlab[start:len(b.readySlab):len(b.readySlab)]
	var prevUDP, prevTCP *svcClusters
	if old != nil {
		prevUDP, prevTCP = old.udp, old.tcp
	}
	udpPort, hasUDP := svc.FirstPort(registry.ProtocolUDP)
	tcpPort, hasTCP := svc.FirstPort(registry.ProtocolTCP)
	text := b.svcText(k, hasUDP, hasTCP, svc.ClusterIP, e.ready)
	if hasUDP {
		e.udp = &e.udpBuf
		b.clusters(e.udp, text.udp, core.SocketAddress_UDP, udpPort.TargetPort, e.ready, text.addrs, prevUDP)
	} else if prevUDP != nil {
		b.dropClusters(prevUDP)
	}
	if hasTCP {
		name := text.tcp
		e.tcp = &e.tcpBuf
		b.clusters(e.tcp, name, core.SocketAddress_TCP, tcpPort.TargetPort, e.ready, text.addrs, prevTCP)
		h := b.hasher("chain")
		e.chainFP = h.str(name).addr(svc.ClusterIP).Sum64()
		if old != nil && old.tcpChain != nil && old.chainFP == e.chainFP {
			e.tcpChain = old.tcpChain
		} else {
			chain, err := b.tcpChain(name, svc.ClusterIP, text.clusterIP)
			if err != nil {
				return nil, fmt.Errorf("failed to generate the TCP chain of service %s: %w", k, err)
			}
			e.tcpChain = chain
		}
	} else if prevTCP != nil {
		b.dropClusters(prevTCP)
	}
	return e, nil
}

// newEntry is a zero entry, from the entry slab while it has room: a full
// build's entries then lie in service order in one block, which the walks
// over them after the build (indexAll, the lists) read front to back.
// The slab never grows, so the entries' addresses hold.
func (b *Builder) newEntry() *svcEntry {
	if n := len(b.entrySlab); n < cap(b.entrySlab) {
		b.entrySlab = b.entrySlab[:n+1]
		return &b.entrySlab[n]
	}
	return &svcEntry{}
}

// release clears an entry that left the builder, so that one still in
// the entry slab does not keep its old messages alive.
func release(e *svcEntry) { *e = svcEntry{} }

// dropService removes a service's pieces from the name index and reports
// whether it had a TCP chain.
func (b *Builder) dropService(e *svcEntry) bool {
	for _, c := range []*svcClusters{e.udp, e.tcp} {
		if c != nil {
			b.dropClusters(c)
		}
	}
	return e.tcpChain != nil
}

func (b *Builder) dropClusters(c *svcClusters) {
	b.idx[clusterIdx].del(c.name)
	b.idx[endpointIdx].del(c.name)
}

// clusters returns a service's cluster and load assignment for one
// transport. The cluster depends on its name only, so it is kept (and its
// version with it: Envoy re-warms a cluster whose CDS entry changes); the
// load assignment is rebuilt when its port or endpoints moved.
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
	ci.items[BlackholeCluster] = b.blackhole
	for _, e := range b.services {
		for _, c := range [2]*svcClusters{e.udp, e.tcp} {
			if c == nil {
				continue
			}
			ci.items[c.name], ei.items[c.name] = c.cluster, c.cla
		}
	}
}

func (b *Builder) routeAction(clusterName string) (*matcher.Matcher_OnMatch, error) {
	if a, ok := b.actions[clusterName]; ok {
		return a, nil
	}
	b.route.Cluster = clusterName
	value, err := b.marshal(&b.route)
	if err != nil {
		return nil, fmt.Errorf("failed to encode udp_proxy route to %q: %w", clusterName, err)
	}
	blk := &b.actionBlocks.take(1)[0]
	blk.any.TypeUrl, blk.any.Value = udpRouteTypeURL, value
	blk.ext.Name, blk.ext.TypedConfig = UDPRouteActionName, &blk.any
	blk.action.Action = &blk.ext
	blk.onMatch.OnMatch = &blk.action
	b.actions[clusterName] = &blk.onMatch
	return &blk.onMatch, nil
}

var destinationIPInput = func() *anypb.Any {
	a, err := anyOf(&netinputs.DestinationIPInput{})
	if err != nil {
		panic(err)
	}
	return a
}()

// udpProxyFilter is the listener filter every pod's UDP capture listener
// shares. It is nil when there is nothing to route, so pods get no UDP
// listener rather than one that only drops.
//
// The arms are an exact_match_map keyed by ClusterIP, unless the ClusterIPs
// routed to one cluster fill a CIDR block of two or more addresses: then
// the whole tree is a custom_match ip_range_matcher with that block and a
// /32 (/128) for every other ClusterIP. Both forms route every destination
// alike, the blocks hold only the arms' own addresses; the range form is
// what a service range behind one backend reads as, and one arm for it
// instead of one per address.
func (b *Builder) udpProxyFilter(sel UDPSelection) (*listener.ListenerFilter, error) {
	if len(sel.Arms) == 0 {
		b.udpFP, b.udpFilter, b.udpArms = 0, nil, nil
		return nil, nil
	}
	noMatch := BlackholeCluster
	if b.Mode == constants.CaptureRedirect && sel.Fallback != nil {
		noMatch = sel.Fallback.Cluster
	}
	if b.udpFilter != nil && noMatch == b.udpNoMatch && len(sel.Arms) == len(b.udpArms) && &sel.Arms[0] == &b.udpArms[0] {
		// The selector hands back the very same slice when no arm moved.
		return b.udpFilter, nil
	}
	b.udpArms, b.udpNoMatch = sel.Arms, noMatch
	h := b.hasher("udp-filter")
	h.str(noMatch)
	for _, a := range sel.Arms {
		h.addr(a.ClusterIP).str(a.Cluster)
	}
	fp := h.Sum64()
	if b.udpFilter != nil && fp == b.udpFP {
		return b.udpFilter, nil
	}
	onNoMatch, err := b.routeAction(noMatch)
	if err != nil {
		return nil, err
	}
	input := &xdscore.TypedExtensionConfig{Name: DestinationIPInputName, TypedConfig: destinationIPInput}
	tree := &matcher.Matcher_MatcherTree{Input: input}
	if ranges, ok := armRanges(sel.Arms); ok {
		ipm := &matcher.IPMatcher{}
		for _, r := range ranges {
			act, err := b.routeAction(r.cluster)
			if err != nil {
				return nil, err
			}
			rm := &matcher.IPMatcher_IPRangeMatcher{OnMatch: act}
			for _, p := range r.prefixes {
				rm.Ranges = append(rm.Ranges, &xdscore.CidrRange{AddressPrefix: p.Addr().String(), PrefixLen: wrapperspb.UInt32(uint32(p.Bits()))})
			}
			ipm.RangeMatchers = append(ipm.RangeMatchers, rm)
		}
		tc, err := anyOf(ipm)
		if err != nil {
			return nil, fmt.Errorf("failed to encode the ip_range_matcher of the udp_proxy filter: %w", err)
		}
		tree.TreeType = &matcher.Matcher_MatcherTree_CustomMatch{CustomMatch: &xdscore.TypedExtensionConfig{Name: IPRangeMatcherName, TypedConfig: tc}}
	} else {
		m := make(map[string]*matcher.Matcher_OnMatch, len(sel.Arms))
		for _, a := range sel.Arms {
			act, err := b.routeAction(a.Cluster)
			if err != nil {
				return nil, err
			}
			b.textRoom(len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
			start := len(b.textBuf)
			b.textBuf = a.ClusterIP.AppendTo(b.textBuf)
			m[b.textFrom(start)] = act
		}
		tree.TreeType = &matcher.Matcher_MatcherTree_ExactMatchMap{ExactMatchMap: &matcher.Matcher_MatcherTree_MatchMap{Map: m}}
	}
	cfg := &udpproxy.UdpProxyConfig{
		StatPrefix:  "udp_capture",
		IdleTimeout: durationpb.New(udpIdleTimeout),
		RouteSpecifier: &udpproxy.UdpProxyConfig_Matcher{Matcher: &matcher.Matcher{
			MatcherType: &matcher.Matcher_MatcherTree_{MatcherTree: tree},
			OnNoMatch:   onNoMatch,
		}},
	}
	tc, err := anyOf(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to encode udp_proxy config: %w", err)
	}
	b.udpFP = fp
	b.udpFilter = &listener.ListenerFilter{Name: UDPProxyFilterName, ConfigType: &listener.ListenerFilter_TypedConfig{TypedConfig: tc}}
	return b.udpFilter, nil
}

// clusterRanges is the address blocks routed to one cluster.
type clusterRanges struct {
	cluster  string
	prefixes []netip.Prefix
}

// armRanges covers each cluster's ClusterIPs with the fewest CIDR blocks
// that hold no other address, in cluster name order, and reports whether
// any block is wider than one address (otherwise the exact form stays).
// arms are in ClusterIP order.
func armRanges(arms []UDPArm) ([]clusterRanges, bool) {
	// A block wider than one address holds two consecutive ClusterIPs of
	// one cluster, which are neighbours in ClusterIP order; without such a
	// pair the exact form stays and there is nothing to group.
	pair := false
	for i := 1; i < len(arms) && !pair; i++ {
		pair = arms[i].Cluster == arms[i-1].Cluster && arms[i].ClusterIP == arms[i-1].ClusterIP.Next()
	}
	if !pair {
		return nil, false
	}
	byCluster := map[string][]netip.Addr{}
	for _, a := range arms {
		byCluster[a.Cluster] = append(byCluster[a.Cluster], a.ClusterIP)
	}
	wide := false
	out := make([]clusterRanges, 0, len(byCluster))
	for cl, ips := range byCluster {
		r := clusterRanges{cluster: cl}
		for i := 0; i < len(ips); {
			// ips[i:j] is a run of consecutive addresses.
			j := i + 1
			for j < len(ips) && ips[j] == ips[j-1].Next() {
				j++
			}
			for _, p := range runPrefixes(ips[i], ips[j-1]) {
				wide = wide || p.Bits() < p.Addr().BitLen()
				r.prefixes = append(r.prefixes, p)
			}
			i = j
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b clusterRanges) int { return strings.Compare(a.cluster, b.cluster) })
	return out, wide
}

// runPrefixes splits the address run [lo, hi] into aligned CIDR blocks,
// each as wide as its start's alignment and the run's end allow.
func runPrefixes(lo, hi netip.Addr) []netip.Prefix {
	var out []netip.Prefix
	for {
		bits := lo.BitLen()
		for bits > 0 {
			p, _ := lo.Prefix(bits - 1)
			if p.Addr() != lo || lastAddr(p).Compare(hi) > 0 {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(lo, bits)
		out = append(out, p)
		last := lastAddr(p)
		if last.Compare(hi) >= 0 {
			return out
		}
		lo = last.Next()
	}
}

// lastAddr is the highest address in p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// anyOf packs m deterministically: map fields (the exact_match_map) in key
// order, so equal configuration is equal bytes, build after build.
func anyOf(m proto.Message) (*anypb.Any, error) {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, err
	}
	return a, nil
}

// ClusterIPs returns the arms' keys, for tests and the debug dump.
func (s UDPSelection) ClusterIPs() []netip.Addr {
	out := make([]netip.Addr, len(s.Arms))
	for i, a := range s.Arms {
		out[i] = a.ClusterIP
	}
	return out
}
