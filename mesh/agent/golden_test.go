package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
)

const (
	scenarioDir = "../../fixtures/scenarios"
	goldenDir   = "../../fixtures/xds"
)

// TestGoldenSnapshots generates every fixture scenario for every node that
// has local pods, in both capture modes, with the mTLS path on, checks the
// gates and compares the protojson dump (secrets redacted) with
// fixtures/xds. An east-west gateway with no pods has no capture, so it
// is generated once, in the default mode.
func TestGoldenSnapshots(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files under %s (err %v)", scenarioDir, err)
	}
	compared := 0
	for _, g := range goldenMeshes(t, files) {
		st, base := g.st, g.base
		for _, n := range st.Nodes {
			modes := []constants.CaptureMode{constants.CaptureTProxy, constants.CaptureRedirect}
			if len(st.LocalPods(n.Name)) == 0 {
				if n.Gateway == nil {
					continue
				}
				modes = modes[:1]
			}
			for _, mode := range modes {
				name := base + "." + n.Name + "." + string(mode)
				t.Run(name, func(t *testing.T) {
					b := NewBuilder(n.Name, mode)
					b.HTTP = testHTTPPathIn(t, st, n.Name, g.trustDomain, g.meshDomain)
					out, err := b.Build(st, "golden")
					if err != nil {
						t.Fatalf("build: %v", err)
					}
					if err := validate.Check(out.Resources); err != nil {
						t.Fatalf("fixture snapshot fails the gates: %v", err)
					}
					got, err := DumpResources(n.Name, mode, "", out.Resources)
					if err != nil {
						t.Fatal(err)
					}
					if err := golden.Check(filepath.Join(goldenDir, name+".json"), "generated xDS", got); err != nil {
						t.Error(err)
					}
				})
				compared++
			}
		}
	}
	if compared == 0 {
		t.Fatal("no golden snapshot compared")
	}
}

// goldenMesh is one cluster of a fixture: a scenario file's, or one of a
// clusters file's with the remotes the other clusters export.
type goldenMesh struct {
	st                      *registry.State
	base                    string
	trustDomain, meshDomain string
}

// goldenMeshes loads every fixture file: a scenario is one mesh in the
// test trust domain, named by its file; a clusters file is one per
// cluster, named <file>.<cluster>, in the cluster's own trust and mesh
// domains.
func goldenMeshes(t *testing.T, files []string) []goldenMesh {
	t.Helper()
	var out []goldenMesh
	for _, f := range files {
		base := strings.TrimSuffix(filepath.Base(f), ".yaml")
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !registry.IsClustersFile(data) {
			st, err := registry.ParseScenario(f, data)
			if err != nil {
				t.Fatalf("fixture scenario does not load: %v", err)
			}
			out = append(out, goldenMesh{st: st, base: base, trustDomain: "aether.test", meshDomain: "mesh.test"})
			continue
		}
		cs, err := registry.DecodeClusters(f, data)
		if err != nil {
			t.Fatalf("fixture clusters file does not load: %v", err)
		}
		states, err := registry.FederatedStates(f, cs)
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range cs {
			out = append(out, goldenMesh{st: states[i], base: base + "." + c.Name, trustDomain: c.TrustDomain, meshDomain: c.MeshDomain})
		}
	}
	return out
}

// testHTTPPath is the mTLS path with a fresh embedded CA holding the
// node's accounts' SVIDs; the dump redacts them, so goldens are stable.
func testHTTPPath(t testing.TB, st *registry.State, node string) *HTTPPath {
	return testHTTPPathIn(t, st, node, "aether.test", "mesh.test")
}

// testHTTPPathIn is testHTTPPath in a given trust and mesh domain.
func testHTTPPathIn(t testing.TB, st *registry.State, node, trustDomain, meshDomain string) *HTTPPath {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: trustDomain, MeshDomain: meshDomain})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	rot, err := identity.NewRotator(ca, store, identity.RotatorConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rot.Keep(LocalAccounts(st, node)); err != nil {
		t.Fatal(err)
	}
	return &HTTPPath{TrustDomain: ca.TrustDomain(), MeshDomain: meshDomain, AccessLog: "/var/log/aether/access-" + node + ".log", Identities: store}
}
