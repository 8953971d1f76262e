package agent

import (
	"fmt"
	"net/netip"
	"slices"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"

	"github.com/aether-mesh/aether/mesh/registry"
)

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

// readyEndpoint is what a load assignment reads of an endpoint.
type readyEndpoint struct {
	ip     netip.Addr
	weight uint32
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

// serviceWalk is what one build's walk over the services found changed.
type serviceWalk struct {
	// changedSvcs are the services whose routes must be evaluated again.
	changedSvcs []registry.Key
	// chainsChanged is set when a TCP chain came, went or changed.
	chainsChanged bool
	// listsMoved is set when a service came, went or changed its clusters,
	// which moves load assignments in claList; otherwise the changed ones
	// are claPatches.
	listsMoved bool
	claPatches []claPatch
}

// start empties w for a build, keeping its slices' room.
func (w *serviceWalk) start(full bool) {
	clear(w.changedSvcs)
	clear(w.claPatches)
	*w = serviceWalk{changedSvcs: w.changedSvcs[:0], claPatches: w.claPatches[:0], chainsChanged: full, listsMoved: full}
}

// walkServices brings b.services up to st, recording in w what moved: an
// entry whose inputs are unchanged is kept, a changed service is generated
// again, a service gone (or no longer a dependency of the node) is dropped
// from the name index.
func (b *Builder) walkServices(w *serviceWalk, st *registry.State, deps registry.Deps, full bool) error {
	w.start(full)
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
			return fmt.Errorf("registry state for node %q: services are not in key order at %s (sources must call State.Sort)", b.Node, k)
		}
		// Entries before k are services gone from the State; one
		// comparison per entry, as this runs for every service.
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
			b.dropEntry(w, prev[j])
		}
		if !deps.Has(k) {
			if e != nil {
				b.dropEntry(w, e)
			}
			continue
		}
		if eps := st.Endpoints[k]; e == nil || !e.same(svc, eps) {
			var err error
			if e, err = b.updateService(w, svc, eps, e, full); err != nil {
				return err
			}
		}
		b.services = append(b.services, e)
		b.healthy[i] = len(e.ready) > 0
	}
	for ; j < len(prev); j++ {
		b.dropEntry(w, prev[j])
	}
	return nil
}

// dropEntry removes a service that left the node's output.
func (b *Builder) dropEntry(w *serviceWalk, e *svcEntry) {
	w.chainsChanged = b.dropService(e) || w.chainsChanged
	w.changedSvcs = append(w.changedSvcs, e.key)
	w.listsMoved = true
	release(e)
}

// updateService generates a changed (or new) service's entry again,
// replacing old, and records in w what the change moved.
func (b *Builder) updateService(w *serviceWalk, svc *registry.Service, eps []registry.Endpoint, old *svcEntry, full bool) (*svcEntry, error) {
	e, err := b.generateService(svc, eps, old)
	if err != nil {
		return nil, err
	}
	if old == nil || e.chainFP != old.chainFP {
		w.chainsChanged = true
	}
	if !full {
		// A full build evaluates every route anyway.
		w.changedSvcs = append(w.changedSvcs, e.key)
	}
	if old == nil || (old.udp == nil) != (e.udp == nil) || (old.tcp == nil) != (e.tcp == nil) {
		w.listsMoved = true
	} else {
		w.patchLoadAssignments(old, e)
	}
	if old != nil {
		release(old)
	}
	return e, nil
}

// patchLoadAssignments records e's changed load assignments in the places
// old's held: the same clusters keep their places in the list.
func (w *serviceWalk) patchLoadAssignments(old, e *svcEntry) {
	e.claPos = old.claPos
	pos := int(old.claPos)
	for _, c := range [2][2]*svcClusters{{old.udp, e.udp}, {old.tcp, e.tcp}} {
		if c[0] == nil {
			continue
		}
		if c[0].cla != c[1].cla {
			w.claPatches = append(w.claPatches, claPatch{pos, c[1].cla})
		}
		pos++
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
