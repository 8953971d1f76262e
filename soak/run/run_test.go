package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if err := netns.LeakCheck(); err != nil {
		fmt.Fprintln(os.Stderr, "leak check:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// TestRunWritesWhatTheGradersRead runs a soak of five short pairs (every
// chaos kind this build has gets a gap) and grades its folder: every gate
// is decided from the run's own files, and every window was measured.
func TestRunWritesWhatTheGradersRead(t *testing.T) {
	privileged.Require(t, privileged.NetAdmin, privileged.SysAdmin)
	root, err := node.ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	// The long soak's machinery on the short one: its probe plan (5/s over
	// soak.yaml's one prober is every 200 ms) and its resource sampling,
	// every second.
	leaks := DefaultLeaks()
	leaks.Every = time.Second
	cfg := Config{
		Scenario: filepath.Join(root, "fixtures", "scenarios", "soak.yaml"), Roles: SoakRoles,
		Mesh: MeshNames{TrustDomain: "aether.local", MeshDomain: "mesh.local"}, Out: out, ID: "tiny",
		Duration: 60 * time.Second, Tick: 500 * time.Millisecond, Warmup: time.Second, Pairs: 5, MinWindow: time.Second,
		Rate: 60, ProbeRate: 5, DirectInterval: 200 * time.Millisecond, SVIDTTL: time.Minute, PairFetchWindow: 3 * time.Second, Seed: 3, MaxRatio: 1.5, SLO: "99.9",
		Build: "abc1234", Progress: testWriter{t}, Logf: t.Logf, Leaks: &leaks,
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Partial != "" {
		t.Fatalf("run partial: %s", res.Partial)
	}
	m, err := manifest.Load(res.Manifest)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grade.Run(m)
	if err != nil {
		t.Fatalf("the run's own files do not grade: %v", err)
	}
	if len(m.Windows) != 10 || g.CPU == nil || len(g.CPU.Pairs) != 5 {
		t.Fatalf("%d windows, cpu %+v; want 10 windows in 5 pairs", len(m.Windows), g.CPU)
	}
	for _, w := range g.CPU.Windows {
		if w.CPUSeconds == nil || w.ProxyRequests == nil || w.ClientRequests == nil || *w.ClientRequests == 0 {
			t.Errorf("window %s not measured: %+v", w.Name, w)
		}
	}
	if g.Liveness == nil || g.Liveness.Total == 0 {
		t.Errorf("no probes graded: %+v", g.Liveness)
	}
	kinds := map[StepKind]bool{}
	for _, sp := range readSpans(t, filepath.Join(res.Dir, SpansFile)) {
		kinds[sp.Kind] = true
	}
	for _, k := range ChaosKinds() {
		if !kinds[k] {
			t.Errorf("chaos kind %s never ran (ran %v)", k, kinds)
		}
	}
	// Every node's agent and proxy was sampled, and the gates that read
	// the samples are the manifest's; a minute decides none of them.
	if len(m.Gates.Leaks) != 4 {
		t.Errorf("%d leak gates, want resident memory, fds, goroutines and pairs", len(m.Gates.Leaks))
	}
	for _, l := range g.Leaks {
		for _, p := range l.Processes {
			if p.Lives == 0 {
				t.Errorf("%s: %s was not sampled", l.Name, p.Name)
			}
		}
	}
	if short := gate(t, g, grade.GateProbesShort); short.Inputs.Count == nil || short.Inputs.Count.Limit == 0 {
		t.Errorf("the probes-short gate has no plan to hold the prober to: %+v", short)
	}
	for _, gt := range g.Gates {
		t.Logf("%s: %s %s (%s)", gt.Name, gt.Verdict, gt.Figure, gt.Reason)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }
