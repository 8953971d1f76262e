package run

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"

	"github.com/aether-mesh/aether/mesh/registry"
)

// Roles says which pods of the scenario do what.
type Roles struct {
	Namespace string
	// Sources maps each load source pod to the services it calls.
	Sources map[string][]string
	// Probers are the liveness probers: each pod calls its service through
	// the mesh, every probe on a new connection.
	Probers []ProbeRole
	// Churn is the pod the chaos schedule removes and adds back, and
	// ChurnTarget the service it calls before and after.
	Churn, ChurnTarget string
	// Direct is what the network fault steps' direct probes call: a fault
	// on a node is probed by the first role whose target pod lives there,
	// or else by the first whose prober does (DirectFor), so the probes
	// cross the faulted link.
	Direct []DirectRole
}

// ProbeRole is one liveness prober: its pod and the service it calls.
type ProbeRole struct{ Pod, Target string }

// DirectRole is the pod the direct probes call, from where, and as what.
type DirectRole struct {
	// FromPod is the prober's pod and From its account. Pod serves Service
	// on Port; Account is its service account, the identity its inbound
	// must present.
	FromPod, Pod, Account, Service, From string
	Port                                 uint16
}

// SoakRoles are the roles of fixtures/scenarios/soak.yaml.
var SoakRoles = Roles{
	Namespace: "demo",
	Sources: map[string][]string{
		"web-0":    {"api", "cart", "ledger"},
		"batch-0":  {"api"},
		"worker-0": {"api", "ledger"},
	},
	Probers: []ProbeRole{{Pod: "probe-0", Target: "api"}},
	Churn:   "cron-0", ChurnTarget: "cart",
	Direct: []DirectRole{{FromPod: "probe-0", Pod: "api-0", Account: "api", Service: "api", Port: 8080, From: "probe"}},
}

// LongRoles are the roles of fixtures/scenarios/soak-long.yaml: a load
// source and a prober on each of its four nodes, each prober calling a
// service whose one pod is on the next node, and the direct probes of a
// fault on a node made from the prober before it.
var LongRoles = Roles{
	Namespace: "demo",
	Sources: map[string][]string{
		"web-0":    {"api", "cart", "search", "user"},
		"batch-0":  {"ledger", "billing", "orders", "report"},
		"worker-0": {"auth", "stock", "notify", "price", "geo"},
		"jobs-0":   {"review", "ship", "media", "search", "api"},
	},
	Probers: []ProbeRole{{Pod: "probe-0", Target: "cart"}, {Pod: "probe-1", Target: "stock"}, {Pod: "probe-2", Target: "orders"}, {Pod: "probe-3", Target: "media"}},
	Churn:   "cron-0", ChurnTarget: "cart",
	Direct: []DirectRole{
		{FromPod: "probe-0", Pod: "cart-0", Account: "cart", Service: "cart", Port: 8080, From: "probe"},
		{FromPod: "probe-1", Pod: "stock-0", Account: "stock", Service: "stock", Port: 8080, From: "probe"},
		{FromPod: "probe-2", Pod: "orders-0", Account: "orders", Service: "orders", Port: 8080, From: "probe"},
		{FromPod: "probe-3", Pod: "media-0", Account: "media", Service: "media", Port: 8080, From: "probe"},
	},
}

// RolesFor returns the roles of a scenario file by its name: soak-long.yaml
// has LongRoles, any other file soak.yaml's (a scenario of the same shape).
func RolesFor(scenario string) Roles {
	if filepath.Base(scenario) == "soak-long.yaml" {
		return LongRoles
	}
	return SoakRoles
}

// DirectFor returns the direct role that probes a fault on node: the
// first whose target pod is on it, else the first whose prober is; nodeOf
// says where a pod lives ("" for none).
func (r Roles) DirectFor(node string, nodeOf func(pod string) string) (DirectRole, error) {
	for _, d := range r.Direct {
		if nodeOf(d.Pod) == node {
			return d, nil
		}
	}
	for _, d := range r.Direct {
		if nodeOf(d.FromPod) == node {
			return d, nil
		}
	}
	return DirectRole{}, fmt.Errorf("no direct probe role crosses node %s's link (roles %+v)", node, r.Direct)
}

// Check holds the roles to the scenario st: every pod they name exists
// in their namespace, every service they call is one of its services,
// no two probers share a pod, and every node has a direct role that
// crosses its link, so a fault there is probed.
func (r Roles) Check(st *registry.State) error {
	pods := map[string]registry.Pod{}
	for _, p := range st.Pods {
		if p.Namespace == r.Namespace {
			pods[p.Name] = p
		}
	}
	services := map[string]bool{}
	for _, s := range st.Services {
		if s.Namespace == r.Namespace {
			services[s.Name] = true
		}
	}
	pod := func(role, name string) error {
		if _, ok := pods[name]; !ok {
			return fmt.Errorf("roles: %s %q is not a pod of namespace %s", role, name, r.Namespace)
		}
		return nil
	}
	svc := func(role, name string) error {
		if !services[name] {
			return fmt.Errorf("roles: %s calls %q, not a service of namespace %s", role, name, r.Namespace)
		}
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(r.Sources)) {
		if err := pod("load source", name); err != nil {
			return err
		}
		for _, s := range r.Sources[name] {
			if err := svc("load source "+name, s); err != nil {
				return err
			}
		}
	}
	if len(r.Probers) == 0 {
		return fmt.Errorf("roles: no prober")
	}
	seen := map[string]bool{}
	for _, p := range r.Probers {
		if err := pod("prober", p.Pod); err != nil {
			return err
		}
		if seen[p.Pod] {
			return fmt.Errorf("roles: prober pod %q named twice", p.Pod)
		}
		seen[p.Pod] = true
		if err := svc("prober "+p.Pod, p.Target); err != nil {
			return err
		}
	}
	if err := pod("churn pod", r.Churn); err != nil {
		return err
	}
	if err := svc("churn pod "+r.Churn, r.ChurnTarget); err != nil {
		return err
	}
	for _, d := range r.Direct {
		for _, p := range []string{d.FromPod, d.Pod} {
			if err := pod("direct probe", p); err != nil {
				return err
			}
		}
		if got := pods[d.Pod].ServiceAccount; got != d.Account {
			return fmt.Errorf("roles: direct probe target %s runs as %q, not the %q its inbound is checked for", d.Pod, got, d.Account)
		}
		if got := pods[d.FromPod].ServiceAccount; got != d.From {
			return fmt.Errorf("roles: direct prober %s runs as %q, not the %q its SVID names", d.FromPod, got, d.From)
		}
		if pods[d.FromPod].Node == pods[d.Pod].Node {
			return fmt.Errorf("roles: direct probe %s -> %s stays on node %s and crosses no link", d.FromPod, d.Pod, pods[d.Pod].Node)
		}
	}
	nodeOf := func(name string) string { return pods[name].Node }
	for _, n := range st.Nodes {
		if _, err := r.DirectFor(n.Name, nodeOf); err != nil {
			return fmt.Errorf("roles: %w", err)
		}
	}
	return nil
}
