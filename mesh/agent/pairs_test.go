package agent

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether/mesh/agent/pairs"
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
func pairOf(a *Agent, twin string) *pairs.Status {
	for _, p := range a.Pairs() {
		if p.Twin == twin {
			return &p
		}
	}
	return nil
}

// gathered is the value of a's metric name whose one label is label, read
// from the registry a serves, as /metrics shows it.
func gathered(t *testing.T, a *Agent, name, label string) float64 {
	t.Helper()
	fams, err := a.opts.Registerer.(prometheus.Gatherer).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if f.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%q}", name, label)
	return 0
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
	a.cdsRequest(pairs.StreamID{Stream: id}, req)
}

var (
	twinAB   = xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"})
	pruneLbl = func(a *Agent, reason string) float64 { return a.Counts().Pruned[reason] }
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
	if got := pairOf(b, twinA); got == nil || got.State != pairs.Live || got.Evidence != pairs.EvidencePersisted || got.LastSeen != "" {
		t.Fatalf("restarted agent's pair = %+v, want live, persisted, never seen", got)
	}
	mustApply(t, b, scenario(t))
	if !twinServed(b, twinA) {
		t.Fatalf("%s not served by the restarted agent's first build", twinA)
	}
	if n := gathered(t, b, "aether_agent_pairs", pairs.Live); n != 1 {
		t.Fatalf("aether_agent_pairs{state=live} = %v, want 1", n)
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
	if got := pairOf(b, twinA); got == nil || got.Evidence != pairs.EvidenceHeld || got.LastSeen == "" {
		t.Fatalf("%s = %+v, want evidence held, seen", twinA, got)
	}
	if got := pairOf(b, twinB); got != nil {
		t.Fatalf("%s = %+v, want no pair for a twin only held", twinB, got)
	}
	if n := b.Counts().Admitted; n != 0 {
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
	if got := pairOf(a, twinA); got == nil || got.State != pairs.Live || got.Evidence != pairs.EvidenceSubscribed {
		t.Fatalf("%s = %+v, want live, subscribed", twinA, got)
	}
	if n, m := a.Counts().Admitted, testutil.ToFloat64(a.metrics.odcdsAdmitted); n != 1 || m != 1 {
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
			if got := pairOf(a, c.twin); got == nil || got.State != pairs.Dormant {
				t.Fatalf("%s = %+v, want dormant", c.twin, got)
			}
			if live, dormant := persisted(t, a); len(live) != 0 || !slices.Equal(dormant, []string{c.twin}) {
				t.Fatalf("persisted live %v dormant %v, want dormant [%s]", live, dormant, c.twin)
			}
			mustApply(t, a, st)
			if !twinServed(a, c.twin) {
				t.Fatalf("%s not republished when its pair came back", c.twin)
			}
			if got := pairOf(a, c.twin); got == nil || got.State != pairs.Live {
				t.Fatalf("%s = %+v, want live again", c.twin, got)
			}
			if n := a.Counts().Admitted; n != 1 {
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
		if got := pairOf(a, name); got == nil || got.State != pairs.Dormant {
			t.Fatalf("%s: %s = %+v, want dormant", step.name, name, got)
		}
	}
	mustApply(t, a, st)
	if !twinServed(a, name) || pairOf(a, name).State != pairs.Live {
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
	if n := pruneLbl(a, pairs.PrunedOnRemoval); n != 1 {
		t.Fatalf("pruned{reason=%s} = %v, want 1", pairs.PrunedOnRemoval, n)
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
	if got := pairOf(a, twinA); got == nil || got.State != pairs.Dormant {
		t.Fatalf("%s = %+v, want dormant", twinA, got)
	}
	if n := pruneLbl(a, pairs.PrunedOnRemoval); n != 0 {
		t.Fatalf("pruned{reason=%s} = %v, want 0", pairs.PrunedOnRemoval, n)
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
	if n := pruneLbl(a, pairs.PrunedOnRemoval); n != 1 {
		t.Fatalf("pruned{reason=%s} = %v, want 1", pairs.PrunedOnRemoval, n)
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
	if got := pairOf(a, twinA); got == nil || got.State != pairs.Dormant || got.Evidence != pairs.EvidenceSubscribed {
		t.Fatalf("%s = %+v, want dormant, subscribed", twinA, got)
	}
	if n := a.Counts().Refused; n != 0 {
		t.Fatalf("aether_agent_pairs_refused_total = %v, want 0 for a dormant pair", n)
	}

	// A new proxy generation: another stream (of another ADS server, as
	// an agent may serve several), whose first request names no twin.
	openCDS(t, a).recv()
	if got := pairOf(a, twinA); got != nil {
		t.Fatalf("%s = %+v after a fresh stream that does not re-subscribe it, want pruned", twinA, got)
	}
	if n := pruneLbl(a, pairs.PrunedNotResubscribed); n != 1 {
		t.Fatalf("pruned{reason=%s} = %v, want 1", pairs.PrunedNotResubscribed, n)
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
		if n := pruneLbl(a, pairs.PrunedFetchWindow); n != 0 {
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
		if got := pairOf(a, twinAB); got == nil || got.State != pairs.Dormant {
			t.Fatalf("dormant %s = %+v, want kept", twinAB, got)
		}
		if n := pruneLbl(a, pairs.PrunedFetchWindow); n != 1 {
			t.Fatalf("pruned{reason=%s} = %v, want 1", pairs.PrunedFetchWindow, n)
		}
		if n := a.Counts().PrunedLive; n != 0 {
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
		if got := pairOf(a, twinAB); got == nil || got.State != pairs.Dormant {
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
		a.cdsRequest(pairs.StreamID{Stream: 1}, &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}})
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
		if n := pruneLbl(a, pairs.PrunedUnfetchedSinceStart); n != 1 {
			t.Fatalf("pruned{reason=%s} = %v, want 1", pairs.PrunedUnfetchedSinceStart, n)
		}
		if n := a.Counts().PrunedLive; n != 1 {
			t.Fatalf("pruned_live = %v, want 1: %s showed use within the minute", n, twinA)
		}
	})
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
		Pairs  []pairs.Status `json:"pairs"`
		Counts pairs.Counts   `json:"counts"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("/debug/pairs = %s: %v", rec.Body, err)
	}
	if c := got.Counts; c.Live != 2 || c.Dormant != 1 || c.PrunedLive != 0 || len(c.Pruned) != len(pairs.PrunedReasons) {
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
	if ab.Source != "backend.demo" || ab.Destination != "svc-a.demo" || ab.State != pairs.Dormant || ab.Evidence != pairs.EvidenceSubscribed {
		t.Fatalf("%s = %+v", twinAB, ab)
	}
	if _, err := time.Parse(time.RFC3339Nano, tA.LastSeen); err != nil || tA.Evidence != pairs.EvidenceHeld || tA.State != pairs.Live {
		t.Fatalf("%s = %+v (%v), want live, held, an RFC 3339 last_seen", twinA, tA, err)
	}
	if tB.Evidence != pairs.EvidencePersisted || tB.LastSeen != "" {
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
