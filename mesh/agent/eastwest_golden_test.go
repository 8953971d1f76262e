package agent

import (
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// dialledPairs are the pairs of node's pods calling every HTTP service
// they declare (dependsOn), the demand of fixtures/scenarios/eastwest.yaml.
func dialledPairs(st *registry.State, node string) []xdsnames.Twin {
	var out []xdsnames.Twin
	for _, p := range st.LocalPods(node) {
		for _, k := range p.DependsOn {
			if svc, ok := st.Service(k); !ok || !hasHTTP(svc) {
				continue
			}
			t := xdsnames.Twin{Service: k.Name, Namespace: k.Namespace, SA: p.ServiceAccount, SANamespace: p.Namespace}
			if !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	return out
}

func hasHTTP(svc *registry.Service) bool {
	_, ok := svc.HTTPPort()
	return ok
}

// TestEastWestGoldenSnapshots is the east-west scenario as each node's
// agent serves it once its pods have dialled their dependencies: every
// pair admitted over on-demand CDS, the QUIC inbounds beside the TCP ones
// and the outbound routes selecting twins. It checks the gates, that the
// twins are exactly the dialled pairs (fewer than the up-front fan-out,
// local accounts x HTTP destinations in the dependency set), and compares the
// dump with fixtures/xds/eastwest.<node>.quic.json.
func TestEastWestGoldenSnapshots(t *testing.T) {
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "eastwest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		node          string
		twins, fanOut int
	}{
		{"node-a", 3, 4},
		{"node-b", 0, 12},
	} {
		t.Run(c.node, func(t *testing.T) {
			h := testHTTPPath(t, st, c.node)
			h.EastWest = true
			a, err := New(Options{Node: c.node, Mode: constants.CaptureTProxy, HTTP: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Apply(st); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range dialledPairs(st, c.node) {
				names = append(names, xdsnames.TwinCluster(p))
			}
			if refused := a.admit(names); len(refused) != 0 {
				t.Fatalf("dialled pairs refused: %v", refused)
			}
			out, _ := a.Current()
			if err := validate.Check(out.Resources); err != nil {
				t.Fatalf("east-west snapshot fails the gates: %v", err)
			}
			if n := len(a.twins); n != c.twins {
				t.Fatalf("%d twins, want %d", n, c.twins)
			}
			eligible := 0
			for k := range st.DependencySet(c.node) {
				if svc, _ := st.Service(k); hasHTTP(svc) {
					eligible++
				}
			}
			if fan := len(LocalAccounts(st, c.node)) * eligible; fan != c.fanOut {
				t.Fatalf("up-front fan-out %d, want %d", fan, c.fanOut)
			}
			quic := 0
			for _, r := range out.Resources[resource.ListenerType] {
				if strings.HasPrefix(cachev3.GetResourceName(r), xdsnames.QuicInboundListenerPrefix) {
					quic++
				}
			}
			if want := map[string]int{"node-a": 0, "node-b": 3}[c.node]; quic != want {
				t.Fatalf("%d QUIC inbounds, want %d (one per local pod backing an HTTP service)", quic, want)
			}
			got, err := DumpResources(c.node, constants.CaptureTProxy, "", out.Resources)
			if err != nil {
				t.Fatal(err)
			}
			if err := golden.Check(filepath.Join(goldenDir, "eastwest."+c.node+".quic.json"), "generated xDS", got); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestH2EgressKeepsQUICInbounds: --mesh-transport h2 keeps a node's own
// requests on HTTP/2 (no route names a twin, a twin is refused), yet its
// pods' QUIC inbounds stay: a transport switch rolls node by node, and a
// peer still on auto keeps its twins to them. Withdrawing them failed
// that peer's requests 503 UF until it switched too (seen in the soak).
func TestH2EgressKeepsQUICInbounds(t *testing.T) {
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "eastwest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for node, inbounds := range map[string]int{"node-a": 0, "node-b": 3} {
		h := testHTTPPath(t, st, node)
		h.EastWest = true
		a, err := New(Options{Node: node, Mode: constants.CaptureTProxy, HTTP: h, Transport: TransportH2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Apply(st); err != nil {
			t.Fatal(err)
		}
		out, _ := a.Current()
		if err := validate.Check(out.Resources); err != nil {
			t.Fatalf("%s: h2 snapshot fails the gates: %v", node, err)
		}
		got, err := DumpResources(node, constants.CaptureTProxy, "", out.Resources)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(got), `"quic:`) {
			t.Errorf("%s: the h2 snapshot names a twin", node)
		}
		quic := 0
		for _, r := range out.Resources[resource.ListenerType] {
			if strings.HasPrefix(cachev3.GetResourceName(r), xdsnames.QuicInboundListenerPrefix) {
				quic++
			}
		}
		if quic != inbounds {
			t.Errorf("%s: %d QUIC inbounds under --mesh-transport h2, want %d (one per local pod backing an HTTP service, as under auto)", node, quic, inbounds)
		}
	}
}
