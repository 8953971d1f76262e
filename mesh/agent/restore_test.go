package agent

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

func quietAgent(t *testing.T, node, stateDir string) *Agent {
	t.Helper()
	return quietHTTPAgent(t, node, stateDir, nil)
}

// quietHTTPAgent is quietAgent with the mTLS path h (nil: off).
func quietHTTPAgent(t *testing.T, node, stateDir string, h *HTTPPath) *Agent {
	t.Helper()
	a, err := New(Options{Node: node, Mode: constants.CaptureTProxy, StateDir: stateDir, HTTP: h, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestRestartServesLastGood: an agent restarted on the same state dir
// serves the snapshot it last published (the same resources, passing the
// gates, its secrets whole) before any registry read, keeps it through a
// failed read, and replaces it with a later version once a read succeeds.
func TestRestartServesLastGood(t *testing.T) {
	dir := t.TempDir()
	st, err := registry.ParseScenario("mtls", readFixture(t, "mtls.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h := testHTTPPath(t, st, "node-a")
	first := quietHTTPAgent(t, "node-a", dir, h)
	if first.Restored() {
		t.Fatal("an empty state dir restored something")
	}
	for i := 0; i < 2; i++ {
		if err := first.Apply(st); err != nil {
			t.Fatal(err)
		}
	}
	published, version := first.Current()

	second := quietHTTPAgent(t, "node-a", dir, h)
	got, gotVersion := second.Current()
	if !second.Restored() || got == nil || gotVersion != version {
		t.Fatalf("restarted agent serves %v (restored %v), want the last good %s", gotVersion, second.Restored(), version)
	}
	for _, typ := range typeURLs {
		if len(published.Resources[typ]) == 0 {
			t.Fatalf("control: nothing of %s was published", typ)
		}
	}
	if err := sameResources(served(second), published.Resources); err != nil {
		t.Fatalf("restarted agent's cache: %v", err)
	}

	// A failed registry read leaves it in place.
	_ = second.RegistryError(errors.New("scenario unreadable"))
	if _, v := second.Current(); v != version || !second.Restored() {
		t.Fatalf("after a registry error the agent serves %s, want the restored %s", v, version)
	}
	// The first good read replaces it, and versions move on from it.
	if err := second.Apply(st); err != nil {
		t.Fatal(err)
	}
	if _, v := second.Current(); v != "v3" || second.Restored() {
		t.Fatalf("after the first read: version %s restored %v, want v3 from the registry", v, second.Restored())
	}
}

// TestRestoreRefusesForeignOrBrokenState: a state file of another node or
// one that no longer parses is not served; the agent still starts.
func TestRestoreRefusesForeignOrBrokenState(t *testing.T) {
	dir := t.TempDir()
	st, err := registry.ParseScenario("two", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := quietAgent(t, "node-a", dir).Apply(st); err != nil {
		t.Fatal(err)
	}
	// Control: the file as written restores.
	if !quietAgent(t, "node-a", dir).Restored() {
		t.Fatal("control: the written state did not restore")
	}
	a := quietAgent(t, "node-b", dir)
	if out, _ := a.Current(); out != nil || a.Restored() {
		t.Fatal("node-b served node-a's last good snapshot")
	}
	if err := a.restore(); err == nil || !strings.Contains(err.Error(), "field node") {
		t.Fatalf("restore for another node: %v, want an error naming the node field", err)
	}

	path := filepath.Join(dir, LastGoodFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(data), `"transparent": true`, `"transparent": "yes"`, 1)
	if broken == string(data) {
		t.Fatal("test edit did not apply")
	}
	if err := os.WriteFile(path, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	b := quietAgent(t, "node-a", dir)
	if b.Restored() {
		t.Fatal("a broken state file was served")
	}
	if err := b.restore(); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "Listener") {
		t.Fatalf("restore of a broken file: %v, want an error naming the file and the resource", err)
	}
}

// TestRestartWithholdsNoLiveTwin: a twin admitted after the last build is
// persisted as a live pair but is not in last-good.json. Before its first
// build, a restarted agent answers a proxy that holds it nothing of it:
// neither its cluster (held through the wildcard) nor its load assignment
// is stated removed; the first build answers with both. The control, a
// held twin with no pair, is answered removed at once.
func TestRestartWithholdsNoLiveTwin(t *testing.T) {
	dir := t.TempDir()
	a := pairAgent(t, dir, Options{})
	st := scenario(t)
	mustApply(t, a, st)
	if refused := a.admit([]string{twinA}); len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	a.Flush()
	b := pairAgent(t, dir, Options{})
	if !b.Restored() || twinServed(b, twinA) || pairOf(b, twinA) == nil {
		t.Fatalf("control: restored %v, %s served %v, pair %+v: want restored without the twin, its pair carried over",
			b.Restored(), twinA, twinServed(b, twinA), pairOf(b, twinA))
	}
	watch := func(typ, held string) chan cache.DeltaResponse {
		req := &cache.DeltaRequest{TypeUrl: typ, InitialResourceVersions: map[string]string{held: "x"}}
		if typ == resource.EndpointType {
			req.ResourceNamesSubscribe = []string{held}
		}
		// As the ADS server makes it: an empty CDS request is wildcard.
		sub := stream.NewDeltaSubscription(req.ResourceNamesSubscribe, nil, req.InitialResourceVersions, true)
		value := make(chan cache.DeltaResponse, 1)
		cancel, err := b.Cache().CreateDeltaWatch(req, sub, value)
		if err != nil {
			t.Fatal(err)
		}
		if cancel != nil {
			t.Cleanup(cancel)
		}
		return value
	}
	answer := func(value chan cache.DeltaResponse) *discovery.DeltaDiscoveryResponse {
		t.Helper()
		select {
		case r := <-value:
			resp, err := r.GetDeltaDiscoveryResponse()
			if err != nil {
				t.Fatal(err)
			}
			return resp
		default:
			return nil
		}
	}
	kinds := []string{resource.ClusterType, resource.EndpointType}
	for _, typ := range kinds {
		if resp := answer(watch(typ, twinB)); !slices.Contains(resp.GetRemovedResources(), twinB) {
			t.Fatalf("control: %s held without a pair: answered %v, want it removed at once", typ, resp)
		}
	}
	values := []chan cache.DeltaResponse{watch(kinds[0], twinA), watch(kinds[1], twinA)}
	for i, value := range values {
		if resp := answer(value); resp != nil {
			t.Errorf("%s before the first build: answered removed %v, resources %v; want no answer yet", kinds[i], resp.GetRemovedResources(), resourceNames(resp))
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	mustApply(t, b, st)
	for i, value := range values {
		resp := answer(value)
		if !slices.Contains(resourceNames(resp), twinA) || slices.Contains(resp.GetRemovedResources(), twinA) {
			t.Fatalf("%s after the first build: resources %v removed %v, want %s served", kinds[i], resourceNames(resp), resp.GetRemovedResources(), twinA)
		}
	}
}
