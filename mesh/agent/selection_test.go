package agent

import (
	"fmt"
	"strings"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// mesh: four UDP services behind one front service; e is unready.
const shapesBase = `
nodes: [{name: n1}]
pods:
  - {name: c, namespace: t, node: n1, ip: 10.244.1.1, netns: /run/netns/c}
  - {name: a, namespace: t, node: n1, ip: 10.244.1.2, labels: {app: a}}
  - {name: b, namespace: t, node: n1, ip: 10.244.1.3, labels: {app: b}}
  - {name: d, namespace: t, node: n1, ip: 10.244.1.4, labels: {app: d}}
  - {name: e, namespace: t, node: n1, ip: 10.244.1.5, labels: {app: e}, ready: false}
services:
  - {name: front, namespace: t, clusterIP: 10.96.0.1, ports: [{port: 53, protocol: UDP}]}
  - {name: a, namespace: t, clusterIP: 10.96.0.2, selector: {app: a}, ports: [{port: 53, protocol: UDP}]}
  - {name: b, namespace: t, clusterIP: 10.96.0.3, selector: {app: b}, ports: [{port: 53, protocol: UDP}]}
  - {name: d, namespace: t, clusterIP: 10.96.0.4, selector: {app: d}, ports: [{port: 53, protocol: UDP}]}
  - {name: e, namespace: t, clusterIP: 10.96.0.5, selector: {app: e}, ports: [{port: 53, protocol: UDP}]}
udpRoutes:
`

func route(name, parent string, backends ...string) string {
	return fmt.Sprintf("  - metadata: {name: %s, namespace: t}\n    spec: {parentRefs: [{kind: Service, name: %s}], rules: [{backendRefs: [%s]}]}\n",
		name, parent, strings.Join(backends, ", "))
}

func be(name string, weight int) string { return fmt.Sprintf("{name: %s, weight: %d}", name, weight) }

func selectFor(t *testing.T, routes ...string) UDPSelection {
	t.Helper()
	st, err := registry.ParseScenario("shapes.yaml", []byte(shapesBase+strings.Join(routes, "")))
	if err != nil {
		t.Fatal(err)
	}
	return SelectUDPRoutes(st, st.DependencySet("n1"))
}

func arms(s UDPSelection) string {
	var out []string
	for _, a := range s.Arms {
		out = append(out, a.ClusterIP.String()+"->"+a.Cluster)
	}
	return strings.Join(out, " ")
}

func reasons(s UDPSelection) string {
	var out []string
	for _, u := range s.Unsupported {
		out = append(out, u.Reason)
	}
	return strings.Join(out, ",")
}

func TestSelectUDPRoutes(t *testing.T) {
	cases := []struct {
		name        string
		routes      []string
		arms        string
		unsupported string
		noHealthy   int
		fallback    string
	}{
		{name: "one backend per route, two routes",
			routes: []string{route("ra", "a", be("a", 1)), route("rb", "b", be("b", 1))},
			arms:   "10.96.0.2->udp:a.t 10.96.0.3->udp:b.t", fallback: "udp:a.t"},
		{name: "weighted split collapses onto the heaviest and is reported",
			routes: []string{route("r", "front", be("a", 30), be("b", 70))},
			arms:   "10.96.0.1->udp:b.t", unsupported: ReasonWeightedSplit, fallback: "udp:b.t"},
		{name: "equal weights: lower cluster name wins",
			routes: []string{route("r", "front", be("b", 5), be("a", 5))},
			arms:   "10.96.0.1->udp:a.t", unsupported: ReasonWeightedSplit, fallback: "udp:a.t"},
		{name: "weight 0 is drain, not a split",
			routes: []string{route("r", "front", be("a", 0), be("b", 1))},
			arms:   "10.96.0.1->udp:b.t", fallback: "udp:b.t"},
		{name: "an unready backend is not live",
			routes: []string{route("r", "front", be("e", 100), be("d", 1))},
			arms:   "10.96.0.1->udp:d.t", fallback: "udp:d.t"},
		{name: "no healthy backend keeps the arm on the service's own cluster",
			routes: []string{route("r", "e", be("e", 1))},
			arms:   "10.96.0.5->udp:e.t", noHealthy: 1, fallback: "udp:e.t"},
		{name: "every backend drained: no arm",
			routes: []string{route("r", "front", be("a", 0))},
			arms:   "", noHealthy: 1},
		{name: "second route on the same parent is a conflict",
			routes: []string{route("r1", "front", be("a", 1)), route("r2", "front", be("b", 1))},
			arms:   "10.96.0.1->udp:a.t", unsupported: ReasonParentConflict, fallback: "udp:a.t"},
		{name: "non-Service backend",
			routes: []string{route("r", "front", "{kind: ServiceImport, group: multicluster.x-k8s.io, name: a}", be("b", 1))},
			arms:   "10.96.0.1->udp:b.t", unsupported: ReasonBackendKind, fallback: "udp:b.t"},
		{name: "fallback prefers a healthy winner over a heavier unhealthy one",
			routes: []string{route("re", "e", be("e", 9)), route("rd", "d", be("d", 1))},
			arms:   "10.96.0.4->udp:d.t 10.96.0.5->udp:e.t", noHealthy: 1, fallback: "udp:d.t"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := selectFor(t, c.routes...)
			if got := arms(s); got != c.arms {
				t.Errorf("arms = %q, want %q", got, c.arms)
			}
			if got := reasons(s); got != c.unsupported {
				t.Errorf("unsupported = %q, want %q (%v)", got, c.unsupported, s.Unsupported)
			}
			if len(s.NoHealthyBackend) != c.noHealthy {
				t.Errorf("no healthy backend = %v, want %d", s.NoHealthyBackend, c.noHealthy)
			}
			got := ""
			if s.Fallback != nil {
				got = s.Fallback.Cluster
			}
			if got != c.fallback {
				t.Errorf("fallback = %q, want %q", got, c.fallback)
			}
		})
	}
}

func TestMultipleRulesReported(t *testing.T) {
	r := "  - metadata: {name: r, namespace: t}\n    spec: {parentRefs: [{kind: Service, name: front}], rules: [{backendRefs: [{name: a}]}, {backendRefs: [{name: b}]}]}\n"
	s := selectFor(t, r)
	if arms(s) != "10.96.0.1->udp:a.t" || reasons(s) != ReasonMultipleRules {
		t.Fatalf("arms %q unsupported %q, want rule 0 only and multiple_rules", arms(s), reasons(s))
	}
}

// TestOnNoMatchFollowsCaptureMode: the same mesh gives a blackhole
// on_no_match under tproxy and the tie-break winner under redirect, which is
// what makes the redirect control reproduce pre-038 collapse.
func TestOnNoMatchFollowsCaptureMode(t *testing.T) {
	st, err := registry.ParseScenario("shapes.yaml", []byte(shapesBase+route("ra", "a", be("a", 1))+route("rb", "b", be("b", 3))))
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[constants.CaptureMode]string{constants.CaptureTProxy: xdsnames.BlackholeCluster, constants.CaptureRedirect: "udp:b.t"} {
		out, err := NewBuilder("n1", mode).Build(st, "v1")
		if err != nil {
			t.Fatal(err)
		}
		var l *listener.Listener
		for _, r := range out.Resources[resource.ListenerType] {
			if x := r.(*listener.Listener); strings.HasPrefix(x.GetName(), "udp-capture~") {
				l = x
			}
		}
		if l == nil {
			t.Fatalf("%s: no UDP capture listener", mode)
		}
		cfg := &udpproxy.UdpProxyConfig{}
		if err := l.GetListenerFilters()[0].GetTypedConfig().UnmarshalTo(cfg); err != nil {
			t.Fatal(err)
		}
		r := &udpproxy.Route{}
		if err := cfg.GetMatcher().GetOnNoMatch().GetAction().GetTypedConfig().UnmarshalTo(r); err != nil {
			t.Fatal(err)
		}
		if r.GetCluster() != want {
			t.Errorf("%s: on_no_match = %q, want %q", mode, r.GetCluster(), want)
		}
		if n := len(cfg.GetMatcher().GetMatcherTree().GetExactMatchMap().GetMap()); n != 2 {
			t.Errorf("%s: %d arms, want 2 in both modes", mode, n)
		}
	}
}
