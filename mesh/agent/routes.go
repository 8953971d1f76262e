package agent

import (
	"fmt"
	"slices"

	"github.com/aether-mesh/aether/mesh/registry"
)

type routeEntry struct {
	key  registry.Key
	spec registry.UDPRoute
	eval *routeEval
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
			re = b.evaluateRoute(st, svcs, deps, r, re)
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

// evaluateRoute evaluates r again, replacing old (nil for a new route) in
// the service index and the selector.
func (b *Builder) evaluateRoute(st *registry.State, svcs *serviceIndex, deps registry.Deps, r *registry.UDPRoute, old *routeEntry) *routeEntry {
	rk := r.Key()
	ev := evalRoute(st, svcs, deps, r)
	if old != nil {
		b.unindex(rk, old.eval)
	}
	re := &routeEntry{key: rk, spec: b.cloneRoute(r), eval: ev}
	for _, k := range ev.refs {
		if rs := b.byService[k]; !slices.Contains(rs, rk) {
			b.byService[k] = append(rs, rk)
		}
	}
	b.sel.set(rk, ev)
	return re
}

// unindex removes route rk from the service index's entries for the
// services ev read.
func (b *Builder) unindex(rk registry.Key, ev *routeEval) {
	for _, k := range ev.refs {
		b.byService[k] = slices.DeleteFunc(b.byService[k], func(x registry.Key) bool { return x == rk })
		if len(b.byService[k]) == 0 {
			delete(b.byService, k)
		}
	}
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
