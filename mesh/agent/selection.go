package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Reasons a UDPRoute shape is reported as unsupported. They are the label
// values of aether_agent_l4route_udp_unsupported.
const (
	// ReasonWeightedSplit: more than one live backend with a non-zero weight.
	// udp_proxy's only route action is Route{cluster}; there is no weighted
	// action in any version (docs/decisions, 038 "Why #873's fix cannot
	// work"), so the rule collapses onto its tie-break winner.
	ReasonWeightedSplit = "weighted_split"
	// ReasonMultipleRules: UDP rules carry no match, so only the first rule
	// of a route can ever apply.
	ReasonMultipleRules = "multiple_rules"
	// ReasonBackendKind: a backendRef that is not a core Service.
	ReasonBackendKind = "backend_kind"
	// ReasonParentConflict: a second route claims a ClusterIP an earlier
	// route (in namespace/name order) already owns.
	ReasonParentConflict = "parent_conflict"
)

// UnsupportedUDPRouteShape is a route shape the mesh cannot express, with
// what it did instead.
type UnsupportedUDPRouteShape struct {
	Route  registry.Key
	Rule   int
	Reason string
	Detail string
}

func (u UnsupportedUDPRouteShape) String() string {
	return fmt.Sprintf("UDPRoute %s rule %d: %s: %s", u.Route, u.Rule, u.Reason, u.Detail)
}

// UDPArm is one arm of the capture listener's destination-IP matcher: a
// datagram for ClusterIP goes to Cluster.
type UDPArm struct {
	ClusterIP netip.Addr
	Backend   registry.Key
	Cluster   string
	Weight    int32
	// Healthy is false when the winner has no ready endpoint; the arm still
	// names it so that such datagrams are dropped on the service's own
	// cluster (and its stats) instead of falling through to another service.
	Healthy bool
	Route   registry.Key
}

// UDPSelection is the outcome of applying #914's rules to every UDPRoute the
// node depends on.
type UDPSelection struct {
	// Arms in ClusterIP order.
	Arms        []UDPArm
	Unsupported []UnsupportedUDPRouteShape
	// NoHealthyBackend lists the routes (or arms) left with no healthy
	// backend: every backend drained, missing, or without a ready endpoint.
	NoHealthyBackend []registry.Key
	// Fallback is the single-cluster tie-break winner across every arm: the
	// pre-038 behaviour, used as on_no_match in redirect mode.
	Fallback *UDPArm
}

// UDPClusterName names a service's UDP cluster.
func UDPClusterName(k registry.Key) string { return xdsnames.UDPCluster(k.Name, k.Namespace) }

// TCPClusterName names a service's TCP cluster.
func TCPClusterName(k registry.Key) string { return xdsnames.TCPCluster(k.Name, k.Namespace) }

type candidate struct {
	key     registry.Key
	svc     *registry.Service
	weight  int32
	healthy bool
}

// better is #914's tie-break: heavier wins, equal weights go to the lower
// cluster name, so the choice never depends on list order.
func better(a, b candidate) bool {
	if a.weight != b.weight {
		return a.weight > b.weight
	}
	return UDPClusterName(a.key) < UDPClusterName(b.key)
}

// SelectUDPRoutes applies the UDPRoute rules (#914) for one node: weight 0 is
// drain; a rule collapses onto its heaviest live backend, ties broken by
// cluster name; shapes the mesh cannot express are reported, never silently
// dropped. Backends outside deps (the node's dependency set) are not
// considered. It is the from-scratch form of what the Builder maintains
// incrementally (selector); both share evalRoute and the claim rules.
func SelectUDPRoutes(st *registry.State, deps map[registry.Key]bool) UDPSelection {
	d := registry.Deps{Keys: deps}
	s := newSelector()
	svcs := &serviceIndex{st: st}
	for ri := range st.UDPRoutes {
		r := &st.UDPRoutes[ri]
		s.set(r.Key(), evalRoute(st, svcs, d, r))
	}
	sel, _ := s.selection(UDPSelection{}, true)
	return sel
}

// routeEval is one route's outcome on its own, before routes are weighed
// against each other for the ClusterIPs they claim. It depends only on the
// route and on the services in refs, which is what lets a rebuild
// re-evaluate just the routes a change touched.
type routeEval struct {
	unsupported []UnsupportedUDPRouteShape
	noHealthy   bool
	// arm is the winner, without its ClusterIP; nil when no backend is left.
	arm *UDPArm
	// armBuf is what arm points to, in the evaluation's own allocation.
	armBuf UDPArm
	// ips are the ClusterIPs the route claims, in parentRef order.
	ips  []netip.Addr
	refs []registry.Key
}

func (e *routeEval) equal(o *routeEval) bool {
	if e.noHealthy != o.noHealthy || (e.arm == nil) != (o.arm == nil) || e.arm != nil && *e.arm != *o.arm {
		return false
	}
	return slices.Equal(e.unsupported, o.unsupported) && slices.Equal(e.ips, o.ips) && slices.Equal(e.refs, o.refs)
}

// serviceIndex finds a State's services by key for route evaluation.
// Routes are evaluated in key order and the services a route names sit
// mostly near those of the route before it (both orders are namespace
// first, and a route is usually named for what it routes), so each search
// starts from the last hit and widens from there: O(log distance) probes,
// where a binary search over the whole list would take O(log n) probes,
// each one a cache miss once the list outgrows the cache.
type serviceIndex struct {
	st   *registry.State
	last int
	// healthy, when set, says per service (in State order) whether it has
	// a ready endpoint, as a build already found out: the route then
	// needs no endpoint lookup of its own. It is only read for services
	// the node depends on.
	healthy []bool
}

// hasReady reports whether the service at i, with key k, has a ready
// endpoint.
func (x *serviceIndex) hasReady(i int, k registry.Key) bool {
	if x.healthy != nil {
		return x.healthy[i]
	}
	return hasReady(x.st.Endpoints[k])
}

func (x *serviceIndex) find(k registry.Key) (int, bool) {
	svcs := x.st.Services
	if len(svcs) == 0 {
		return 0, false
	}
	at := min(x.last, len(svcs)-1)
	// [lo, hi) is widened from at until it holds k's place.
	var lo, hi int
	switch c := cmpKey(svcs[at].Key(), k); {
	case c == 0:
		return at, true
	case c < 0:
		step := 1
		for at+step < len(svcs) && cmpKey(svcs[at+step].Key(), k) < 0 {
			step *= 2
		}
		lo, hi = at+step/2+1, min(at+step+1, len(svcs))
	default:
		step := 1
		for at-step >= 0 && cmpKey(svcs[at-step].Key(), k) > 0 {
			step *= 2
		}
		lo, hi = max(at-step, 0), at-step/2
	}
	i, found := slices.BinarySearchFunc(svcs[lo:hi], k, func(s registry.Service, k registry.Key) int { return cmpKey(s.Key(), k) })
	x.last = lo + i
	return lo + i, found
}

func evalRoute(st *registry.State, svcs *serviceIndex, deps registry.Deps, r *registry.UDPRoute) *routeEval {
	e := &routeEval{}
	rk := r.Key()
	nrefs := len(r.ParentRefs)
	if len(r.Rules) > 0 {
		nrefs += len(r.Rules[0].BackendRefs)
	}
	e.refs = make([]registry.Key, 0, nrefs)
	for _, p := range r.ParentRefs {
		if p.Kind == "Service" && (p.Group == "" || p.Group == "core") {
			e.refs = append(e.refs, registry.Key{Namespace: p.Namespace, Name: p.Name})
		}
	}
	if len(r.Rules) == 0 {
		return e
	}
	if len(r.Rules) > 1 {
		e.unsupported = append(e.unsupported, UnsupportedUDPRouteShape{Route: rk, Rule: 1, Reason: ReasonMultipleRules,
			Detail: fmt.Sprintf("%d rules; UDP rules have no match, only rule 0 applies", len(r.Rules))})
	}
	// Routes rarely name more than a few backends; up to that many the
	// candidates stay off the heap.
	var liveBuf, resolvedBuf [4]candidate
	live, resolved := liveBuf[:0], resolvedBuf[:0]
	for _, br := range r.Rules[0].BackendRefs {
		if (br.Group != "" && br.Group != "core") || br.Kind != "Service" {
			e.unsupported = append(e.unsupported, UnsupportedUDPRouteShape{Route: rk, Reason: ReasonBackendKind,
				Detail: fmt.Sprintf("backend %s/%s %s is not a Service; skipped", br.Group, br.Kind, br.Name)})
			continue
		}
		w := int32(1)
		if br.Weight != nil {
			w = *br.Weight
		}
		if w == 0 {
			continue // drain
		}
		k := registry.Key{Namespace: br.Namespace, Name: br.Name}
		e.refs = append(e.refs, k)
		i, ok := svcs.find(k)
		if !ok || !deps.Has(k) {
			continue
		}
		svc := &st.Services[i]
		if _, ok := svc.FirstPort(registry.ProtocolUDP); !ok {
			continue
		}
		c := candidate{key: k, svc: svc, weight: w, healthy: svcs.hasReady(i, k)}
		resolved = append(resolved, c)
		if c.healthy {
			live = append(live, c)
		}
	}
	if len(live) > 1 {
		var ws []string
		for _, c := range live {
			ws = append(ws, fmt.Sprintf("%s=%d", UDPClusterName(c.key), c.weight))
		}
		w := pick(live)
		e.unsupported = append(e.unsupported, UnsupportedUDPRouteShape{Route: rk, Reason: ReasonWeightedSplit,
			Detail: fmt.Sprintf("split %s cannot be expressed; all traffic to %s", strings.Join(ws, ","), UDPClusterName(w.key))})
	}
	pool := live
	if len(pool) == 0 {
		pool = resolved
		e.noHealthy = true
	}
	if len(pool) == 0 {
		return e
	}
	win := pick(pool)
	e.armBuf = UDPArm{Backend: win.key, Cluster: UDPClusterName(win.key), Weight: win.weight, Healthy: win.healthy, Route: rk}
	e.arm = &e.armBuf
	e.ips = parentIPs(svcs, r, win)
	return e
}

func hasReady(eps []registry.Endpoint) bool {
	for i := range eps {
		if eps[i].Ready {
			return true
		}
	}
	return false
}

// selector holds every route's evaluation and who claims which ClusterIP.
// A ClusterIP belongs to the first route in namespace/name order that
// claims it; a later claim to another cluster is a parent_conflict.
type selector struct {
	routes map[registry.Key]*routeEval
	// claims lists the routes claiming each ClusterIP, in key order.
	claims map[netip.Addr][]claim
	// dirty are the ClusterIPs whose claims changed since the last
	// selection; issues is set when a route's own findings changed.
	dirty  map[netip.Addr]bool
	issues bool
	// settled is set by the first selection; before it every ClusterIP
	// is treated as dirty.
	settled bool
	arms    map[netip.Addr]UDPArm
}

func newSelector() *selector { return newSelectorFor(0) }

// newSelectorFor is a selector sized for n routes (each with a ClusterIP
// of its own, the common case).
func newSelectorFor(n int) *selector {
	return &selector{routes: make(map[registry.Key]*routeEval, n), claims: make(map[netip.Addr][]claim, n),
		dirty: map[netip.Addr]bool{}, arms: make(map[netip.Addr]UDPArm, n)}
}

// set records route k's evaluation (nil: the route is gone) and reports
// whether anything changed.
func (s *selector) set(k registry.Key, e *routeEval) bool {
	old := s.routes[k]
	if old == nil && e == nil || old != nil && e != nil && old.equal(e) {
		return false
	}
	if old != nil {
		for _, ip := range old.ips {
			s.markDirty(ip)
			cl := s.claims[ip]
			// A route leaving a shared ClusterIP can clear another route's
			// parent_conflict.
			if len(cl) > 1 {
				s.issues = true
			}
			if i, ok := slices.BinarySearchFunc(cl, k, cmpClaim); ok {
				cl = slices.Delete(cl, i, i+1)
			}
			if len(cl) == 0 {
				delete(s.claims, ip)
			} else {
				s.claims[ip] = cl
			}
		}
		if len(old.unsupported) > 0 || old.noHealthy {
			s.issues = true
		}
		delete(s.routes, k)
	}
	if e != nil {
		s.routes[k] = e
		for _, ip := range e.ips {
			s.markDirty(ip)
			cl := s.claims[ip]
			if i, ok := slices.BinarySearchFunc(cl, k, cmpClaim); !ok {
				cl = slices.Insert(cl, i, claim{key: k, eval: e})
				s.claims[ip] = cl
			}
			if len(cl) > 1 {
				s.issues = true
			}
		}
		if len(e.unsupported) > 0 || e.noHealthy {
			s.issues = true
		}
	}
	return true
}

// claim is one route's claim on a ClusterIP; it carries the route's
// evaluation so that settling a ClusterIP needs no lookup by route key.
type claim struct {
	key  registry.Key
	eval *routeEval
}

func cmpClaim(c claim, k registry.Key) int { return cmpKey(c.key, k) }

// markDirty records that ip's claims changed. Until the first selection
// every ClusterIP is settled anyway, so nothing is recorded.
func (s *selector) markDirty(ip netip.Addr) {
	if s.settled {
		s.dirty[ip] = true
	}
}

func cmpKey(a, b registry.Key) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.Name, b.Name)
}

// selection returns the selection after the recorded changes, reusing
// prev's slices for whatever did not change (they are never mutated), and
// whether the arms changed. full recomputes every derived list.
func (s *selector) selection(prev UDPSelection, full bool) (UDPSelection, bool) {
	armsChanged := full
	settle := func(ip netip.Addr, cl []claim) {
		old, had := s.arms[ip]
		if len(cl) == 0 {
			if had {
				delete(s.arms, ip)
				armsChanged = true
			}
			return
		}
		a := *cl[0].eval.arm
		a.ClusterIP = ip
		if !had || old != a {
			s.arms[ip] = a
			armsChanged = true
		}
	}
	if s.settled {
		for ip := range s.dirty {
			settle(ip, s.claims[ip])
		}
	} else {
		for ip, cl := range s.claims {
			settle(ip, cl)
		}
		s.settled = true
	}
	issues := full || s.issues
	for ip := range s.dirty {
		delete(s.dirty, ip)
	}
	s.issues = false

	sel := prev
	if armsChanged {
		sel.Arms = make([]UDPArm, 0, len(s.arms))
		for _, a := range s.arms {
			sel.Arms = append(sel.Arms, a)
		}
		slices.SortFunc(sel.Arms, func(a, b UDPArm) int { return a.ClusterIP.Compare(b.ClusterIP) })
		sel.Fallback = nil
		best := -1
		for i := range sel.Arms {
			if best < 0 || fallbackBetter(sel.Arms[i], sel.Arms[best]) {
				best = i
			}
		}
		if best >= 0 {
			f := sel.Arms[best]
			sel.Fallback = &f
		}
	}
	if issues {
		sel.Unsupported, sel.NoHealthyBackend = s.issueLists()
	}
	return sel, armsChanged
}

// issueLists is Unsupported and NoHealthyBackend in route order: a route's
// own findings first, then its parent conflicts in parentRef order.
func (s *selector) issueLists() ([]UnsupportedUDPRouteShape, []registry.Key) {
	conflicted := map[registry.Key]bool{}
	for _, cl := range s.claims {
		for _, c := range cl[min(1, len(cl)):] {
			conflicted[c.key] = true
		}
	}
	var keys []registry.Key
	for k, e := range s.routes {
		if len(e.unsupported) > 0 || e.noHealthy || conflicted[k] {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, cmpKey)
	var unsupported []UnsupportedUDPRouteShape
	var noHealthy []registry.Key
	for _, k := range keys {
		e := s.routes[k]
		unsupported = append(unsupported, e.unsupported...)
		if e.noHealthy {
			noHealthy = append(noHealthy, k)
		}
		if !conflicted[k] {
			continue
		}
		for _, ip := range e.ips {
			owner := s.claims[ip][0].key
			if owner == k {
				continue
			}
			if w := s.arms[ip]; w.Cluster != e.arm.Cluster {
				unsupported = append(unsupported, UnsupportedUDPRouteShape{Route: k, Reason: ReasonParentConflict,
					Detail: fmt.Sprintf("%s already routed by %s to %s", ip, owner, w.Cluster)})
			}
		}
	}
	return unsupported, noHealthy
}

func fallbackBetter(a, b UDPArm) bool {
	if a.Healthy != b.Healthy {
		return a.Healthy
	}
	if a.Weight != b.Weight {
		return a.Weight > b.Weight
	}
	return a.Cluster < b.Cluster
}

func pick(cs []candidate) candidate {
	w := cs[0]
	for _, c := range cs[1:] {
		if better(c, w) {
			w = c
		}
	}
	return w
}

// parentIPs is the ClusterIPs whose datagrams follow the route: the parent
// Services' (a GAMMA mesh route), or, for a route attached to a Gateway,
// the winner's own.
func parentIPs(svcs *serviceIndex, r *registry.UDPRoute, win candidate) []netip.Addr {
	ips := make([]netip.Addr, 0, max(len(r.ParentRefs), 1))
	sawService := false
	for _, p := range r.ParentRefs {
		if p.Kind != "Service" || (p.Group != "" && p.Group != "core") {
			continue
		}
		sawService = true
		if i, ok := svcs.find(registry.Key{Namespace: p.Namespace, Name: p.Name}); ok {
			ips = append(ips, svcs.st.Services[i].ClusterIP)
		}
	}
	if !sawService {
		ips = append(ips, win.svc.ClusterIP)
	}
	return ips
}
