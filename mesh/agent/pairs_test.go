package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether/mesh/agent/pairstate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// pairAgent is an agent for node-a of two-udp-services.yaml on stateDir,
// not yet built.
func pairAgent(t *testing.T, stateDir string, opts Options) *Agent {
	t.Helper()
	opts.Node, opts.Mode, opts.StateDir = "node-a", constants.CaptureTProxy, stateDir
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Before the state dir goes: a pair write may still be under way.
	t.Cleanup(a.Flush)
	return a
}

func scenario(t *testing.T) *registry.State {
	t.Helper()
	st, err := registry.ParseScenario("two-udp-services.yaml", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func mustApply(t *testing.T, a *Agent, st *registry.State) {
	t.Helper()
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
}

// persist writes a state file by hand, as a previous agent would have.
func persist(t *testing.T, dir string, live, dormant []string) {
	t.Helper()
	var st pairstate.State
	for i, l := range [][]string{live, dormant} {
		for _, n := range l {
			tw, err := xdsnames.ParseTwin(n)
			if err != nil {
				t.Fatal(err)
			}
			if i == 0 {
				st.Live = append(st.Live, tw)
			} else {
				st.Dormant = append(st.Dormant, tw)
			}
		}
	}
	if err := pairstate.Write(dir, st); err != nil {
		t.Fatal(err)
	}
}

// persisted reads a's state file back as names, once a's writes are done.
func persisted(t *testing.T, a *Agent) (live, dormant []string) {
	t.Helper()
	a.Flush()
	st, err := pairstate.Load(a.opts.StateDir, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, tw := range st.Live {
		live = append(live, xdsnames.TwinCluster(tw))
	}
	for _, tw := range st.Dormant {
		dormant = append(dormant, xdsnames.TwinCluster(tw))
	}
	slices.Sort(live)
	slices.Sort(dormant)
	return live, dormant
}

// pairOf is the status of twin, or nil.
func pairOf(a *Agent, twin string) *PairStatus {
	for _, p := range a.Pairs() {
		if p.Twin == twin {
			return &p
		}
	}
	return nil
}

func twinServed(a *Agent, name string) bool {
	_, ok := a.caches[clusterIdx].GetResources()[name]
	return ok
}

// freshStream sends a to-be stream's first CDS request straight to the
// callback, as the ADS server would: subscribe are its names, held its
// initial_resource_versions.
func freshStream(a *Agent, id int64, subscribe, held []string) {
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: append([]string{"*"}, subscribe...),
		InitialResourceVersions: map[string]string{}}
	for _, n := range held {
		req.InitialResourceVersions[n] = "1"
	}
	a.cdsRequest(streamID{stream: id}, req)
}

var (
	twinAB   = xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"})
	pruneLbl = func(a *Agent, reason string) float64 {
		return testutil.ToFloat64(a.metrics.pairsPruned.WithLabelValues(reason))
	}
)

// TestPairsCarriedOverARestart: an admitted pair is persisted at once; an
// agent restarted on the state dir starts with it (evidence: persisted,
// no last_seen) and serves its twin from its first build, with no request.
func TestPairsCarriedOverARestart(t *testing.T) {
	dir := t.TempDir()
	a := pairAgent(t, dir, Options{})
	mustApply(t, a, scenario(t))
	if refused := a.admit([]string{twinA}); len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	if live, dormant := persisted(t, a); !slices.Equal(live, []string{twinA}) || len(dormant) != 0 {
		t.Fatalf("persisted live %v dormant %v, want live [%s]", live, dormant, twinA)
	}

	a.Flush()
	b := pairAgent(t, dir, Options{})
	if got := pairOf(b, twinA); got == nil || got.State != PairLive || got.Evidence != EvidencePersisted || got.LastSeen != "" {
		t.Fatalf("restarted agent's pair = %+v, want live, persisted, never seen", got)
	}
	mustApply(t, b, scenario(t))
	if !twinServed(b, twinA) {
		t.Fatalf("%s not served by the restarted agent's first build", twinA)
	}
	if n := testutil.ToFloat64(b.metrics.pairs.WithLabelValues(PairLive)); n != 1 {
		t.Fatalf("aether_agent_pairs{state=live} = %v, want 1", n)
	}
}

// TestCorruptPairStateMovedAside: an unusable state file is counted, moved
// aside (kept, not replaced), and the agent starts with no pairs.
func TestCorruptPairStateMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, pairstate.File)
	if err := os.WriteFile(path, []byte(`{"quic_pairs": ["quic:svc-a.demo@client.demo"], "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	a := pairAgent(t, dir, Options{})
	if n := testutil.ToFloat64(a.metrics.pairStateCorrupt); n != 1 {
		t.Fatalf("aether_agent_pair_state_corrupt_total = %v, want 1", n)
	}
	if ps := a.Pairs(); len(ps) != 0 {
		t.Fatalf("pairs = %+v, want none from a corrupt file", ps)
	}
	aside, _ := filepath.Glob(path + ".corrupt-*")
	if len(aside) != 1 {
		t.Fatalf("moved-aside files = %v, want one", aside)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("%s still in place: %v", path, err)
	}
}

// TestHeldTwinAdmitsNothingUnlessPersisted (#1033): a restarted agent
// serves, from its restored snapshot, the twins of persisted pairs only. A
// fresh stream re-stating a twin it holds but does not re-subscribe admits
// no pair: the unpersisted one is answered absent in removed_resources,
// the persisted one is kept and counts as used (#1073).
func TestHeldTwinAdmitsNothingUnlessPersisted(t *testing.T) {
	dir := t.TempDir()
	a := pairAgent(t, dir, Options{})
	mustApply(t, a, scenario(t))
	if refused := a.admit([]string{twinA, twinB}); len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	mustApply(t, a, scenario(t))
	a.Flush()
	// The previous agent served both twins; only twinA was persisted
	// (rev245's up-front twins were never recorded).
	persist(t, dir, []string{twinA}, nil)

	b := pairAgent(t, dir, Options{})
	// Before its first build: the restored snapshot answers.
	s := openCDSWith(t, b, &discovery.DeltaDiscoveryRequest{InitialResourceVersions: map[string]string{twinA: "x", twinB: "x"}})
	resp := s.recv()
	if removed := resp.GetRemovedResources(); !slices.Contains(removed, twinB) || slices.Contains(removed, twinA) {
		t.Fatalf("removed_resources = %v, want %s (held, not persisted) and not %s", removed, twinB, twinA)
	}
	if got := pairOf(b, twinA); got == nil || got.Evidence != EvidenceHeld || got.LastSeen == "" {
		t.Fatalf("%s = %+v, want evidence held, seen", twinA, got)
	}
	if got := pairOf(b, twinB); got != nil {
		t.Fatalf("%s = %+v, want no pair for a twin only held", twinB, got)
	}
	if n := testutil.ToFloat64(b.metrics.pairsAdmitted); n != 0 {
		t.Fatalf("aether_agent_pairs_admitted_total = %v, want 0: holding admits nothing", n)
	}
}

// TestReSubscribedTwinAdmitted: a fresh stream re-subscribing a twin by
// name admits its pair, and records the evidence.
func TestReSubscribedTwinAdmitted(t *testing.T) {
	a := pairAgent(t, t.TempDir(), Options{})
	mustApply(t, a, scenario(t))
	s := openCDS(t, a, "*", twinA)
	if got := resourceNames(s.recv()); !slices.Contains(got, twinA) {
		t.Fatalf("first response = %v, want %s", got, twinA)
	}
	if got := pairOf(a, twinA); got == nil || got.State != PairLive || got.Evidence != EvidenceSubscribed {
		t.Fatalf("%s = %+v, want live, subscribed", twinA, got)
	}
	if n, m := testutil.ToFloat64(a.metrics.pairsAdmitted), testutil.ToFloat64(a.metrics.odcdsAdmitted); n != 1 || m != 1 {
		t.Fatalf("pairs admitted %v, odcds admitted %v, want 1 and 1", n, m)
	}
}

// removeClient is st without client-0, the one pod of account client.
func removeClient(st *registry.State) *registry.State {
	next := cloneState(st)
	next.Pods = slices.DeleteFunc(next.Pods, func(p registry.Pod) bool { return p.Name == "client-0" })
	return next
}

// dependsOnSvcAOnly is st with client-0 depending on svc-a alone.
func dependsOnSvcAOnly(st *registry.State) *registry.State {
	next := cloneState(st)
	i := slices.IndexFunc(next.Pods, func(p registry.Pod) bool { return p.Name == "client-0" })
	next.Pods[i].DependsOn = []registry.Key{{Namespace: "demo", Name: "svc-a"}}
	return next
}

// TestDormantPairs (#1036): a subscribed pair whose source account leaves
// the node, or whose destination leaves the dependency set, loses its
// twin and stays persisted as dormant; when it comes back the same build
// republishes the twin, with no request.
func TestDormantPairs(t *testing.T) {
	for _, c := range []struct {
		name  string
		leave func(*registry.State) *registry.State
		twin  string
	}{
		{"source leaves the node", removeClient, twinA},
		{"destination leaves the dependency set", dependsOnSvcAOnly, twinB},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			a := pairAgent(t, dir, Options{})
			st := scenario(t)
			mustApply(t, a, st)
			freshStream(a, 1, nil, nil)
			if refused := a.admit([]string{c.twin}); len(refused) != 0 {
				t.Fatalf("refused %v", refused)
			}
			mustApply(t, a, c.leave(st))
			if twinServed(a, c.twin) {
				t.Fatalf("%s still served while its pair is away", c.twin)
			}
			if got := pairOf(a, c.twin); got == nil || got.State != PairDormant {
				t.Fatalf("%s = %+v, want dormant", c.twin, got)
			}
			if live, dormant := persisted(t, a); len(live) != 0 || !slices.Equal(dormant, []string{c.twin}) {
				t.Fatalf("persisted live %v dormant %v, want dormant [%s]", live, dormant, c.twin)
			}
			mustApply(t, a, st)
			if !twinServed(a, c.twin) {
				t.Fatalf("%s not republished when its pair came back", c.twin)
			}
			if got := pairOf(a, c.twin); got == nil || got.State != PairLive {
				t.Fatalf("%s = %+v, want live again", c.twin, got)
			}
			if n := testutil.ToFloat64(a.metrics.pairsAdmitted); n != 1 {
				t.Fatalf("aether_agent_pairs_admitted_total = %v, want 1: the return needs no request", n)
			}
		})
	}
}

// TestSourceSandboxLeavesFirst: the CNI's DEL takes a pod's sandbox
// before the registry drops the pod, and the build between the two drops
// the account's SVID secret. The same build withdraws the account's twin
// and its pair goes dormant: no build is refused for a twin naming a
// secret that is no longer served (sds_names_resolve).
func TestSourceSandboxLeavesFirst(t *testing.T) {
	a, st, _ := quicControlsAgent(t, "node-a", Controls{})
	mustApply(t, a, st)
	freshStream(a, 1, nil, nil)
	name := admittedTwin(t, a).GetName()
	const web = "spiffe://aether.test/ns/demo/sa/web"
	secrets := func() map[string]types.Resource { return a.caches[secretIdx].GetResources() }
	if _, ok := secrets()[web]; !ok {
		t.Fatalf("control: %s's secret is not served while web-0 has its sandbox", web)
	}

	noSandbox := cloneState(st)
	i := slices.IndexFunc(noSandbox.Pods, func(p registry.Pod) bool { return p.Name == "web-0" })
	noSandbox.Pods[i].NetnsPath = ""
	for _, step := range []struct {
		name string
		st   *registry.State
	}{{"sandbox gone, pod still listed", noSandbox}, {"pod gone", removePod(st, "web-0")}} {
		if err := a.Apply(step.st); err != nil {
			t.Fatalf("%s: build refused: %v", step.name, err)
		}
		if _, ok := secrets()[web]; ok {
			t.Fatalf("control: %s: %s's secret is still served", step.name, web)
		}
		if twinServed(a, name) {
			t.Fatalf("%s: %s still served", step.name, name)
		}
		if got := pairOf(a, name); got == nil || got.State != PairDormant {
			t.Fatalf("%s: %s = %+v, want dormant", step.name, name, got)
		}
	}
	mustApply(t, a, st)
	if !twinServed(a, name) || pairOf(a, name).State != PairLive {
		t.Fatalf("%s not live and served once web-0 is back", name)
	}
}

// removePod is st without pod name.
func removePod(st *registry.State, name string) *registry.State {
	next := cloneState(st)
	next.Pods = slices.DeleteFunc(next.Pods, func(p registry.Pod) bool { return p.Name == name })
	return next
}

// TestRemovedPairDroppedWhenNotSubscribed: a pair only persisted (the
// proxy's fresh stream neither re-subscribes nor holds its twin) is
// dropped when its source leaves: that proxy asks for it again.
func TestRemovedPairDroppedWhenNotSubscribed(t *testing.T) {
	dir := t.TempDir()
	persist(t, dir, []string{twinA}, nil)
	a := pairAgent(t, dir, Options{})
	st := scenario(t)
	mustApply(t, a, st)
	freshStream(a, 1, nil, nil)
	mustApply(t, a, removeClient(st))
	if got := pairOf(a, twinA); got != nil {
		t.Fatalf("%s = %+v, want dropped", twinA, got)
	}
	if n := pruneLbl(a, PrunedOnRemoval); n != 1 {
		t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedOnRemoval, n)
	}
}

// TestRemovedHeldPairGoesDormant: a twin the proxy holds without an
// on-demand subscription (the wildcard delivered it to a proxy that
// started after the pair was admitted: a hot restart's new generation)
// is in use (#1073), so its source leaving leaves the pair dormant, not
// pruned: pruning it pruned a twin that had served requests a moment
// before (the local soak's prunes of in-use twins). Its return
// republishes the twin with no request.
func TestRemovedHeldPairGoesDormant(t *testing.T) {
	dir := t.TempDir()
	persist(t, dir, []string{twinA}, nil)
	a := pairAgent(t, dir, Options{})
	st := scenario(t)
	mustApply(t, a, st)
	freshStream(a, 1, nil, []string{twinA})
	mustApply(t, a, removeClient(st))
	if got := pairOf(a, twinA); got == nil || got.State != PairDormant {
		t.Fatalf("%s = %+v, want dormant", twinA, got)
	}
	if n := pruneLbl(a, PrunedOnRemoval); n != 0 {
		t.Fatalf("pruned{reason=%s} = %v, want 0", PrunedOnRemoval, n)
	}
	mustApply(t, a, st)
	if !twinServed(a, twinA) {
		t.Fatalf("%s not republished when its source came back", twinA)
	}
}

// TestDropPairOnRemovalControl: the pre-#1036 control drops a subscribed
// pair when its source leaves; its return republishes nothing.
func TestDropPairOnRemovalControl(t *testing.T) {
	dir := t.TempDir()
	a := pairAgent(t, dir, Options{Controls: Controls{DropPairOnRemoval: true}})
	st := scenario(t)
	mustApply(t, a, st)
	freshStream(a, 1, nil, nil)
	if refused := a.admit([]string{twinA}); len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	mustApply(t, a, removeClient(st))
	mustApply(t, a, st)
	if twinServed(a, twinA) || pairOf(a, twinA) != nil {
		t.Fatalf("%s served (%v) or recorded (%+v) after a drop on removal", twinA, twinServed(a, twinA), pairOf(a, twinA))
	}
	if live, dormant := persisted(t, a); len(live)+len(dormant) != 0 {
		t.Fatalf("persisted live %v dormant %v, want nothing", live, dormant)
	}
	if n := pruneLbl(a, PrunedOnRemoval); n != 1 {
		t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedOnRemoval, n)
	}
}

// TestDormantPrunedOnlyWhenNotResubscribed: a fresh stream whose first CDS
// request re-subscribes a dormant pair keeps it (and its re-subscription
// is answered absent without counting a refusal); one that does not (a
// new proxy generation) prunes it.
func TestDormantPrunedOnlyWhenNotResubscribed(t *testing.T) {
	dir := t.TempDir()
	persist(t, dir, nil, []string{twinA})
	a := pairAgent(t, dir, Options{})
	st := removeClient(scenario(t))
	mustApply(t, a, st)

	s := openCDS(t, a, "*", twinA)
	if resp := s.recv(); !slices.Contains(resp.GetRemovedResources(), twinA) && !slices.Contains(s.recv().GetRemovedResources(), twinA) {
		t.Fatalf("re-subscribed dormant %s not answered absent", twinA)
	}
	if got := pairOf(a, twinA); got == nil || got.State != PairDormant || got.Evidence != EvidenceSubscribed {
		t.Fatalf("%s = %+v, want dormant, subscribed", twinA, got)
	}
	if n := testutil.ToFloat64(a.metrics.pairsRefused); n != 0 {
		t.Fatalf("aether_agent_pairs_refused_total = %v, want 0 for a dormant pair", n)
	}

	// A new proxy generation: another stream (of another ADS server, as
	// an agent may serve several), whose first request names no twin.
	openCDS(t, a).recv()
	if got := pairOf(a, twinA); got != nil {
		t.Fatalf("%s = %+v after a fresh stream that does not re-subscribe it, want pruned", twinA, got)
	}
	if n := pruneLbl(a, PrunedNotResubscribed); n != 1 {
		t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedNotResubscribed, n)
	}
	if live, dormant := persisted(t, a); len(live)+len(dormant) != 0 {
		t.Fatalf("persisted live %v dormant %v, want nothing", live, dormant)
	}
}

// windowAgent runs f in a synctest bubble with an agent whose fetch
// window is one minute, its state dir holding live and dormant pairs.
func windowAgent(t *testing.T, live, dormant []string, ctl Controls, f func(a *Agent)) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		persist(t, dir, live, dormant)
		a := pairAgent(t, dir, Options{PairFetchWindow: time.Minute, Controls: ctl})
		mustApply(t, a, scenario(t))
		f(a)
	})
}

// TestFetchWindow: one window after start, a live pair with no evidence
// of use is pruned with its twin; a held one (#1073), a re-subscribed
// one and a dormant one are kept.
func TestFetchWindow(t *testing.T) {
	windowAgent(t, []string{twinA, twinB}, []string{twinAB}, Controls{}, func(a *Agent) {
		// twinA held, twinB not re-stated: the proxy no longer has it.
		freshStream(a, 1, []string{twinAB}, []string{twinA})
		time.Sleep(59 * time.Second)
		synctest.Wait()
		if n := pruneLbl(a, PrunedFetchWindow); n != 0 {
			t.Fatalf("pruned before the window ended: %v", n)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if pairOf(a, twinB) != nil || twinServed(a, twinB) {
			t.Fatalf("%s kept (served %v) with no evidence of use in the window", twinB, twinServed(a, twinB))
		}
		if pairOf(a, twinA) == nil || !twinServed(a, twinA) {
			t.Fatalf("held %s pruned", twinA)
		}
		if got := pairOf(a, twinAB); got == nil || got.State != PairDormant {
			t.Fatalf("dormant %s = %+v, want kept", twinAB, got)
		}
		if n := pruneLbl(a, PrunedFetchWindow); n != 1 {
			t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedFetchWindow, n)
		}
		if n := testutil.ToFloat64(a.metrics.pairsPrunedLive); n != 0 {
			t.Fatalf("pruned_live = %v, want 0: the pruned pair showed no use", n)
		}
		if live, dormant := persisted(t, a); !slices.Equal(live, []string{twinA}) || !slices.Equal(dormant, []string{twinAB}) {
			t.Fatalf("persisted live %v dormant %v", live, dormant)
		}
	})
}

// TestFetchWindowSparesDormantWithoutEvidence: with no stream at all, the
// window prunes the live carry-over and never the dormant one.
func TestFetchWindowSparesDormantWithoutEvidence(t *testing.T) {
	windowAgent(t, []string{twinA}, []string{twinAB}, Controls{}, func(a *Agent) {
		time.Sleep(61 * time.Second)
		synctest.Wait()
		if pairOf(a, twinA) != nil {
			t.Fatalf("%s kept with no evidence of use", twinA)
		}
		if got := pairOf(a, twinAB); got == nil || got.State != PairDormant {
			t.Fatalf("dormant %s = %+v, want kept: the fetch window never prunes a dormant pair", twinAB, got)
		}
	})
}

// TestPruneUnfetchedSinceStartControl: the pre-#1073 rule prunes a twin
// the agent restart's fresh stream re-subscribed, in use, and keeps only
// the carried-over one a later request fetched; without proxy metrics the
// prune counts as live (evidence within the minute).
func TestPruneUnfetchedSinceStartControl(t *testing.T) {
	windowAgent(t, []string{twinA, twinB}, nil, Controls{PruneUnfetchedSinceStart: true}, func(a *Agent) {
		freshStream(a, 1, []string{twinA}, []string{twinA})
		time.Sleep(30 * time.Second)
		a.cdsRequest(streamID{stream: 1}, &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}})
		if refused := a.admit([]string{twinB}); len(refused) != 0 {
			t.Fatalf("refused %v", refused)
		}
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if pairOf(a, twinA) != nil || twinServed(a, twinA) {
			t.Fatalf("%s kept (served %v): the pre-#1073 rule prunes a re-subscribed twin", twinA, twinServed(a, twinA))
		}
		if pairOf(a, twinB) == nil {
			t.Fatalf("%s pruned though fetched since start", twinB)
		}
		if n := pruneLbl(a, PrunedUnfetchedSinceStart); n != 1 {
			t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedUnfetchedSinceStart, n)
		}
		if n := testutil.ToFloat64(a.metrics.pairsPrunedLive); n != 1 {
			t.Fatalf("pruned_live = %v, want 1: %s showed use within the minute", n, twinA)
		}
	})
}

// TestPrunedLiveByProxyMetrics: with the proxy's metrics, a prune counts
// as live when the twin's request counter grew since the minute before,
// and not for a twin whose counter stood still or only counted 503 NC.
func TestPrunedLiveByProxyMetrics(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	defer srv.Close()
	metric := func(a, b, nc int) string {
		return "# TYPE aether_proxy_http_requests_total counter\n" +
			"aether_proxy_http_requests_total{listener=\"out\",cluster=\"" + twinA + "\",code=\"200\",flags=\"-\"} " + strconv.Itoa(a) + "\n" +
			"aether_proxy_http_requests_total{listener=\"out\",cluster=\"" + twinB + "\",code=\"200\",flags=\"-\"} " + strconv.Itoa(b) + "\n" +
			"aether_proxy_http_requests_total{listener=\"out\",cluster=\"" + twinB + "\",code=\"503\",flags=\"NC\"} " + strconv.Itoa(nc) + "\n"
	}
	dir := t.TempDir()
	persist(t, dir, []string{twinA, twinB}, nil)
	a := pairAgent(t, dir, Options{ProxyMetricsURL: srv.URL})
	body = metric(5, 7, 0)
	if err := a.traffic.sample(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	body = metric(6, 7, 3)
	mustApply(t, a, scenario(t))
	a.endFetchWindow()
	if n := pruneLbl(a, PrunedFetchWindow); n != 2 {
		t.Fatalf("pruned{reason=%s} = %v, want 2", PrunedFetchWindow, n)
	}
	if n := testutil.ToFloat64(a.metrics.pairsPrunedLive); n != 1 {
		t.Fatalf("pruned_live = %v, want 1: only %s served a request", n, twinA)
	}
}

// TestDormantPruneJudgedSinceDormant: a pair pruned dormant (a new proxy
// generation not re-subscribing it) is judged on what its twin served
// after it went dormant, not on the requests its source sent before
// leaving, even when the prune comes seconds after them and the sample
// that first sees them is taken after the pair went dormant (as the
// prune's own sample is). A twin whose count grows after a sample taken
// while it is dormant is still counted as served.
func TestDormantPruneJudgedSinceDormant(t *testing.T) {
	for _, c := range []struct {
		name     string
		metrics  bool
		whileOut bool
		want     float64
	}{
		{"proxy metrics, served before it went dormant", true, false, 0},
		{"proxy metrics, served while dormant", true, true, 1},
		{"evidence of use, before it went dormant", false, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 5
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, "# TYPE aether_proxy_http_requests_total counter\n"+
					"aether_proxy_http_requests_total{listener=\"out\",cluster=\""+twinA+"\",code=\"200\",flags=\"-\"} "+strconv.Itoa(n)+"\n")
			}))
			defer srv.Close()
			var opts Options
			if c.metrics {
				opts.ProxyMetricsURL = srv.URL
			}
			a := pairAgent(t, t.TempDir(), opts)
			st := scenario(t)
			mustApply(t, a, st)
			freshStream(a, 1, nil, nil)
			if c.metrics {
				if err := a.traffic.sample(t.Context(), time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			if refused := a.admit([]string{twinA}); len(refused) != 0 {
				t.Fatalf("refused %v", refused)
			}
			n++ // client-0's request over the twin, before it leaves
			mustApply(t, a, removeClient(st))
			if got := pairOf(a, twinA); got == nil || got.State != PairDormant {
				t.Fatalf("%s = %+v, want dormant", twinA, got)
			}
			if c.whileOut {
				if err := a.traffic.sample(t.Context(), time.Now()); err != nil {
					t.Fatal(err)
				}
				n++
			}
			freshStream(a, 2, nil, nil)
			a.Flush()
			if got := pruneLbl(a, PrunedNotResubscribed); got != 1 {
				t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedNotResubscribed, got)
			}
			if got := testutil.ToFloat64(a.metrics.pairsPrunedLive); got != c.want {
				t.Fatalf("pruned_live = %v, want %v", got, c.want)
			}
		})
	}
}

// TestDebugPairs: /debug/pairs lists every pair, sorted by twin, with its
// source, destination, state, evidence and last sighting.
func TestDebugPairs(t *testing.T) {
	dir := t.TempDir()
	persist(t, dir, []string{twinB, twinA}, []string{twinAB})
	a := pairAgent(t, dir, Options{})
	mustApply(t, a, scenario(t))
	freshStream(a, 1, []string{twinAB}, []string{twinA})
	rec := httptest.NewRecorder()
	a.DebugHandler(prometheus.NewRegistry()).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/debug/pairs", nil))
	var got struct {
		Pairs  []PairStatus `json:"pairs"`
		Counts PairCounts   `json:"counts"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("/debug/pairs = %s: %v", rec.Body, err)
	}
	if c := got.Counts; c.Live != 2 || c.Dormant != 1 || c.PrunedLive != 0 || len(c.Pruned) != len(prunedReasons) {
		t.Fatalf("counts = %+v, want 2 live, 1 dormant, every prune reason listed", c)
	}
	var twins []string
	for _, p := range got.Pairs {
		twins = append(twins, p.Twin)
	}
	if want := []string{twinAB, twinA, twinB}; !slices.Equal(twins, want) {
		t.Fatalf("twins = %v, want %v", twins, want)
	}
	ab, tA, tB := got.Pairs[0], got.Pairs[1], got.Pairs[2]
	if ab.Source != "backend.demo" || ab.Destination != "svc-a.demo" || ab.State != PairDormant || ab.Evidence != EvidenceSubscribed {
		t.Fatalf("%s = %+v", twinAB, ab)
	}
	if _, err := time.Parse(time.RFC3339Nano, tA.LastSeen); err != nil || tA.Evidence != EvidenceHeld || tA.State != PairLive {
		t.Fatalf("%s = %+v (%v), want live, held, an RFC 3339 last_seen", twinA, tA, err)
	}
	if tB.Evidence != EvidencePersisted || tB.LastSeen != "" {
		t.Fatalf("%s = %+v, want persisted with no last_seen", twinB, tB)
	}
}

// BenchmarkAdmitPersisted is one on-demand admission with a state dir:
// the pair's write must stay off the admission, which the proxy's paused
// request waits on.
func BenchmarkAdmitPersisted(b *testing.B) {
	st, err := registry.ParseScenario("two-udp-services.yaml", readFixture(b, "two-udp-services.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		b.StopTimer()
		a, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, StateDir: b.TempDir(),
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		if err := a.Apply(st); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if refused := a.admit([]string{twinA}); len(refused) != 0 {
			b.Fatalf("refused %v", refused)
		}
		b.StopTimer()
		a.Flush()
		b.StartTimer()
	}
}

// TestPairWritesNeverLandOutOfOrder: a write of an older pair set that
// starts after a newer one landed leaves the newer on disk.
func TestPairWritesNeverLandOutOfOrder(t *testing.T) {
	a := pairAgent(t, t.TempDir(), Options{})
	older := pairstate.State{Live: []xdsnames.Twin{{Service: "svc-a", Namespace: "demo", SA: "client", SANamespace: "demo"}}}
	newer := pairstate.State{Dormant: older.Live}
	a.background.Add(2)
	a.writePairs(2, newer)
	a.writePairs(1, older)
	if live, dormant := persisted(t, a); len(live) != 0 || !slices.Equal(dormant, []string{twinA}) {
		t.Fatalf("persisted live %v dormant %v, want the newer set: dormant [%s]", live, dormant, twinA)
	}
}

// TestProxyTrafficSamples: a twin served a request when its count grew
// between two samples, or restarted from 0 and counted again (a new proxy
// process); the first sample is a baseline, and a count that stands still
// is not service.
func TestProxyTrafficSamples(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "# TYPE aether_proxy_http_requests_total counter\n"+
			"aether_proxy_http_requests_total{listener=\"out\",cluster=\""+twinA+"\",code=\"200\",flags=\"-\"} "+strconv.Itoa(n)+"\n")
	}))
	defer srv.Close()
	p := newProxyTraffic(srv.URL)
	at := time.Unix(1000, 0)
	for i, c := range []struct {
		count  int
		served bool
	}{{5, false}, {5, false}, {6, true}, {2, true}, {2, false}, {0, false}} {
		n = c.count
		now := at.Add(time.Duration(i) * time.Minute)
		if err := p.sample(t.Context(), now); err != nil {
			t.Fatal(err)
		}
		if got := p.servedSince(twinA, now, time.Time{}); got != c.served {
			t.Fatalf("sample %d (count %d): served = %v, want %v", i, c.count, got, c.served)
		}
	}
}
