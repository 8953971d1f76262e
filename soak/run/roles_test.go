package run

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/node"
)

func scenario(t *testing.T, name string) *registry.State {
	t.Helper()
	st, err := registry.LoadScenarioFile(filepath.Join("..", "..", "fixtures", "scenarios", name))
	if err != nil {
		t.Fatal(err)
	}
	st.DeriveEndpoints()
	return st
}

// scale says how a scenario falls short of the long soak's size: at least
// 4 nodes, 32 pods, 16 services and 8 service accounts.
func scale(st *registry.State) []string {
	accounts := map[string]bool{}
	for _, p := range st.Pods {
		accounts[p.ServiceAccount] = true
	}
	var short []string
	for _, c := range []struct {
		what      string
		got, want int
	}{{"nodes", len(st.Nodes), 4}, {"pods", len(st.Pods), 32}, {"services", len(st.Services), 16}, {"service accounts in use", len(accounts), 8}} {
		if c.got < c.want {
			short = append(short, fmt.Sprintf("%d %s < %d", c.got, c.what, c.want))
		}
	}
	return short
}

// The long soak's scenario is at scale, and soak.yaml (the witness that
// the check can fail) is not.
func TestLongScenarioIsAtScale(t *testing.T) {
	if short := scale(scenario(t, "soak-long.yaml")); len(short) > 0 {
		t.Fatalf("soak-long.yaml: %s", strings.Join(short, ", "))
	}
	if short := scale(scenario(t, "soak.yaml")); len(short) != 3 {
		t.Fatalf("soak.yaml falls short by %v; want nodes, pods and services", short)
	}
}

// The long soak's scenario is one the mesh and the rig serve as the soak
// needs: every service's pods run as the service's account (else it gets
// no twin and the h3 windows measure HTTP/2), its addresses are in the
// rig's plan, every node has a load source and a prober, the sources
// call every service, and every prober calls across nodes.
func TestLongScenarioServesTheSoak(t *testing.T) {
	st := scenario(t, "soak-long.yaml")
	if err := LongRoles.Check(st); err != nil {
		t.Fatal(err)
	}
	podNode := map[string]string{}
	for _, p := range st.Pods {
		podNode[p.Name] = p.Node
		if !node.PodPrefix.Contains(p.IP) {
			t.Errorf("pod %s: %s outside the rig's pod range", p.Name, p.IP)
		}
	}
	for _, s := range st.Services {
		if !node.ServicePrefix.Contains(s.ClusterIP) {
			t.Errorf("service %s: %s outside the rig's service range", s.Name, s.ClusterIP)
		}
		eps := st.Endpoints[s.Key()]
		if len(eps) == 0 {
			t.Errorf("service %s has no endpoint", s.Name)
		}
		for _, ep := range eps {
			for _, p := range st.Pods {
				if p.Name == ep.Pod && p.ServiceAccount != s.Name {
					t.Errorf("service %s: pod %s runs as %q; a twin needs the service's own name", s.Name, p.Name, p.ServiceAccount)
				}
			}
		}
	}
	called := map[string]bool{}
	sourceOn, proberOn := map[string]bool{}, map[string]bool{}
	for src, svcs := range LongRoles.Sources {
		sourceOn[podNode[src]] = true
		for _, s := range svcs {
			called[s] = true
		}
	}
	for _, s := range st.Services {
		if !called[s.Name] {
			t.Errorf("no load source calls %s", s.Name)
		}
	}
	for _, pr := range LongRoles.Probers {
		proberOn[podNode[pr.Pod]] = true
		for _, ep := range st.Endpoints[registry.Key{Namespace: LongRoles.Namespace, Name: pr.Target}] {
			if ep.Node == podNode[pr.Pod] {
				t.Errorf("prober %s calls %s, which has an endpoint on its own node %s", pr.Pod, pr.Target, ep.Node)
			}
		}
	}
	for _, n := range st.Nodes {
		if !sourceOn[n.Name] || !proberOn[n.Name] {
			t.Errorf("node %s: load source %v, prober %v; want both", n.Name, sourceOn[n.Name], proberOn[n.Name])
		}
	}
	if got := RolesFor("x/fixtures/scenarios/soak-long.yaml").Probers; len(got) != 4 {
		t.Errorf("RolesFor(soak-long.yaml) has %d probers, want LongRoles' 4", len(got))
	}
}

// A fault on each node is probed across its link: by the role whose
// target lives there.
func TestDirectForCrossesTheFaultedLink(t *testing.T) {
	st := scenario(t, "soak-long.yaml")
	nodeOf := func(pod string) string {
		for _, p := range st.Pods {
			if p.Name == pod {
				return p.Node
			}
		}
		return ""
	}
	for _, n := range st.Nodes {
		d, err := LongRoles.DirectFor(n.Name, nodeOf)
		if err != nil {
			t.Fatal(err)
		}
		if nodeOf(d.Pod) != n.Name || nodeOf(d.FromPod) == n.Name {
			t.Errorf("a fault on %s is probed %s (on %s) -> %s (on %s)", n.Name, d.FromPod, nodeOf(d.FromPod), d.Pod, nodeOf(d.Pod))
		}
	}
	// soak.yaml's one role crosses both of its nodes' links.
	two := scenario(t, "soak.yaml")
	for _, n := range two.Nodes {
		if _, err := SoakRoles.DirectFor(n.Name, func(p string) string {
			for _, sp := range two.Pods {
				if sp.Name == p {
					return sp.Node
				}
			}
			return ""
		}); err != nil {
			t.Errorf("soak.yaml: %v", err)
		}
	}
}

// Roles the scenario cannot serve are refused, naming what is wrong.
func TestRolesCheckRefusesWhatTheScenarioCannotServe(t *testing.T) {
	st := scenario(t, "soak-long.yaml")
	for _, tc := range []struct {
		edit func(*Roles)
		want string
	}{
		{func(r *Roles) { r.Probers = nil }, "no prober"},
		{func(r *Roles) { r.Probers = append(r.Probers, r.Probers[0]) }, `prober pod "probe-0" named twice`},
		{func(r *Roles) { r.Probers[1].Target = "nope" }, `prober probe-1 calls "nope"`},
		{func(r *Roles) { r.Direct[0].FromPod = "web-0" }, `direct prober web-0 runs as "web"`},
		{func(r *Roles) { r.Direct[0].FromPod = "probe-1" }, "stays on node node-b"},
		{func(r *Roles) { r.Direct = r.Direct[1:3] }, "no direct probe role crosses node node-a's link"},
	} {
		r := LongRoles
		r.Probers = append([]ProbeRole(nil), LongRoles.Probers...)
		r.Direct = append([]DirectRole(nil), LongRoles.Direct...)
		tc.edit(&r)
		if err := r.Check(st); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
}
