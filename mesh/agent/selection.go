package agent

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/aether-mesh/aether/mesh/registry"
)

// Reasons a UDPRoute shape is reported as unsupported. They are the label
// values of aether_agent_l4route_udp_unsupported.
const (
	// ReasonWeightedSplit: more than one live backend with a non-zero weight.
	// udp_proxy's only route action is Route{cluster}; there is no weighted
	// action in any version (038 "Why #873's fix cannot work"), so the rule
	// collapses onto its tie-break winner.
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
func UDPClusterName(k registry.Key) string { return "udp:" + k.Name + "." + k.Namespace }

// TCPClusterName names a service's TCP cluster.
func TCPClusterName(k registry.Key) string { return "tcp:" + k.Name + "." + k.Namespace }

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
// considered.
func SelectUDPRoutes(st *registry.State, deps map[registry.Key]bool) UDPSelection {
	var sel UDPSelection
	owner := map[netip.Addr]int{}
	for ri := range st.UDPRoutes {
		r := &st.UDPRoutes[ri]
		rk := r.Key()
		if len(r.Rules) == 0 {
			continue
		}
		if len(r.Rules) > 1 {
			sel.Unsupported = append(sel.Unsupported, UnsupportedUDPRouteShape{Route: rk, Rule: 1, Reason: ReasonMultipleRules,
				Detail: fmt.Sprintf("%d rules; UDP rules have no match, only rule 0 applies", len(r.Rules))})
		}
		var live, resolved []candidate
		for _, br := range r.Rules[0].BackendRefs {
			if (br.Group != "" && br.Group != "core") || br.Kind != "Service" {
				sel.Unsupported = append(sel.Unsupported, UnsupportedUDPRouteShape{Route: rk, Reason: ReasonBackendKind,
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
			svc, ok := st.Service(k)
			if !ok || !deps[k] {
				continue
			}
			if _, ok := svc.FirstPort(registry.ProtocolUDP); !ok {
				continue
			}
			c := candidate{key: k, svc: svc, weight: w, healthy: len(st.ReadyEndpoints(k)) > 0}
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
			sel.Unsupported = append(sel.Unsupported, UnsupportedUDPRouteShape{Route: rk, Reason: ReasonWeightedSplit,
				Detail: fmt.Sprintf("split %s cannot be expressed; all traffic to %s", strings.Join(ws, ","), UDPClusterName(w.key))})
		}
		pool := live
		if len(pool) == 0 {
			pool = resolved
			sel.NoHealthyBackend = append(sel.NoHealthyBackend, rk)
		}
		if len(pool) == 0 {
			continue
		}
		win := pick(pool)
		arm := UDPArm{Backend: win.key, Cluster: UDPClusterName(win.key), Weight: win.weight, Healthy: win.healthy, Route: rk}
		for _, ip := range parentIPs(st, r, win) {
			if prev, taken := owner[ip]; taken {
				if sel.Arms[prev].Cluster != arm.Cluster {
					sel.Unsupported = append(sel.Unsupported, UnsupportedUDPRouteShape{Route: rk, Reason: ReasonParentConflict,
						Detail: fmt.Sprintf("%s already routed by %s to %s", ip, sel.Arms[prev].Route, sel.Arms[prev].Cluster)})
				}
				continue
			}
			a := arm
			a.ClusterIP = ip
			owner[ip] = len(sel.Arms)
			sel.Arms = append(sel.Arms, a)
		}
	}
	sort.Slice(sel.Arms, func(i, j int) bool { return sel.Arms[i].ClusterIP.Less(sel.Arms[j].ClusterIP) })
	for i := range sel.Arms {
		a := sel.Arms[i]
		if sel.Fallback == nil || fallbackBetter(a, *sel.Fallback) {
			sel.Fallback = &a
		}
	}
	return sel
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
func parentIPs(st *registry.State, r *registry.UDPRoute, win candidate) []netip.Addr {
	var ips []netip.Addr
	sawService := false
	for _, p := range r.ParentRefs {
		if p.Kind != "Service" || (p.Group != "" && p.Group != "core") {
			continue
		}
		sawService = true
		if svc, ok := st.Service(registry.Key{Namespace: p.Namespace, Name: p.Name}); ok {
			ips = append(ips, svc.ClusterIP)
		}
	}
	if !sawService {
		ips = append(ips, win.svc.ClusterIP)
	}
	return ips
}
