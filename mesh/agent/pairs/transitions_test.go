package pairs

import (
	"slices"
	"testing"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

var (
	gone = func(xdsnames.Twin) bool { return true }
	back = func(xdsnames.Twin) bool { return false }
)

// TestSettle (#1036): a pair away goes dormant while the proxy may hold
// and use its twin (subscribed, or held on a fresh stream, #1073), and
// comes back live; one only persisted, or any under DropOnRemoval (the
// pre-#1036 control), is pruned.
func TestSettle(t *testing.T) {
	subscribed := func(opts Options) func(*testing.T, string) *Set {
		return func(t *testing.T, dir string) *Set {
			s := newSet(t, dir, opts)
			fresh(s, 1, nil, nil)
			s.Admit(tA)
			return s
		}
	}
	carriedOver := func(held []string) func(*testing.T, string) *Set {
		return func(t *testing.T, dir string) *Set {
			persist(t, dir, []xdsnames.Twin{tA}, nil)
			s := newSet(t, dir, Options{})
			fresh(s, 1, nil, held)
			return s
		}
	}
	for _, c := range []struct {
		name string
		set  func(*testing.T, string) *Set
		want string // the state once away, "" for pruned
	}{
		{"subscribed", subscribed(Options{}), Dormant},
		{"held", carriedOver([]string{twinA}), Dormant},
		{"only persisted", carriedOver(nil), ""},
		{"subscribed, DropOnRemoval", subscribed(Options{DropOnRemoval: true}), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.set(t, t.TempDir())
			s.Settle(gone)
			got := statusOf(s, twinA)
			live, dormant := persisted(t, s)
			if c.want == "" {
				if got != nil || len(live)+len(dormant) != 0 || s.Counts().Pruned[PrunedOnRemoval] != 1 {
					t.Fatalf("%s = %+v, persisted %v %v, pruned %v: want pruned on removal", twinA, got, live, dormant, s.Counts().Pruned)
				}
				return
			}
			if got == nil || got.State != c.want || !slices.Equal(dormant, []string{twinA}) || len(live) != 0 {
				t.Fatalf("%s = %+v, persisted live %v dormant %v: want %s", twinA, got, live, dormant, c.want)
			}
			s.Settle(back)
			if !s.Live(tA) {
				t.Fatalf("%s = %+v once back, want live", twinA, statusOf(s, twinA))
			}
			if live, _ := persisted(t, s); !slices.Equal(live, []string{twinA}) {
				t.Fatalf("persisted live %v once back, want [%s]", live, twinA)
			}
		})
	}
}

// TestStreams: a fresh stream's first request sets what the proxy
// holds: re-subscribed and held twins are evidence, a dormant pair it
// does not re-subscribe is pruned; a later request is a fetch.
func TestStreams(t *testing.T) {
	dir := t.TempDir()
	persist(t, dir, []xdsnames.Twin{tA, tB}, []xdsnames.Twin{{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"}})
	s := newSet(t, dir, Options{})
	twinAB := xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"})
	fresh(s, 1, []string{twinAB}, []string{twinA})
	for twin, want := range map[string]string{twinA: EvidenceHeld, twinB: EvidencePersisted, twinAB: EvidenceSubscribed} {
		if got := statusOf(s, twin); got == nil || got.Evidence != want {
			t.Fatalf("%s = %+v, want evidence %s", twin, got, want)
		}
	}
	s.Request(StreamID{Stream: 1}, &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}})
	if got := statusOf(s, twinB); got.Evidence != EvidenceSubscribed || !s.pairs[tB].fetched {
		t.Fatalf("%s = %+v, fetched %v after a fetch", twinB, got, s.pairs[tB].fetched)
	}
	s.StreamClosed(StreamID{Stream: 1})
	// A new proxy generation: its fresh stream names no twin.
	fresh(s, 2, nil, nil)
	if statusOf(s, twinAB) != nil || s.Counts().Pruned[PrunedNotResubscribed] != 1 {
		t.Fatalf("dormant %s = %+v, pruned %v: want pruned, not re-subscribed", twinAB, statusOf(s, twinAB), s.Counts().Pruned)
	}
	if c := s.Counts(); c.Live != 2 || c.Dormant != 0 {
		t.Fatalf("counts = %+v, want 2 live", c)
	}
}

// TestFetchWindow: the window prunes a live pair with no evidence of use
// and keeps a held one and a dormant one (re-subscribed, or a fresh
// stream would have pruned it); it is over, counted 0 open, once
// FetchWindowEnded has judged its prunes.
func TestFetchWindow(t *testing.T) {
	dir := t.TempDir()
	tAB := xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"}
	persist(t, dir, []xdsnames.Twin{tA, tB}, []xdsnames.Twin{tAB})
	s := newSet(t, dir, Options{})
	fresh(s, 1, []string{xdsnames.TwinCluster(tAB)}, []string{twinA})
	if !s.EndFetchWindow() {
		t.Fatal("EndFetchWindow pruned nothing")
	}
	if n := testutil.ToFloat64(s.metrics.windowOpen); n != 1 {
		t.Fatalf("fetch window open = %v before its prunes are judged, want 1", n)
	}
	s.FetchWindowEnded()
	if !s.Live(tA) || statusOf(s, twinB) != nil || !s.Dormant(tAB) {
		t.Fatalf("pairs = %+v, want %s live, %s pruned, the dormant one kept", s.Status(), twinA, twinB)
	}
	if c := s.Counts(); c.Pruned[PrunedFetchWindow] != 1 || c.PrunedLive != 0 {
		t.Fatalf("counts = %+v, want one fetch-window prune, none live", c)
	}
	if n := testutil.ToFloat64(s.metrics.windowOpen); n != 0 {
		t.Fatalf("fetch window open = %v, want 0", n)
	}
	if s.EndFetchWindow() {
		t.Fatal("a second EndFetchWindow pruned again")
	}
}

// TestPruneUnfetchedSinceStart: the pre-#1073 control prunes a live pair
// re-subscribed by a fresh stream, in use, and keeps one fetched since
// start; without proxy metrics its prune counts as live.
func TestPruneUnfetchedSinceStart(t *testing.T) {
	dir := t.TempDir()
	persist(t, dir, []xdsnames.Twin{tA, tB}, nil)
	s := newSet(t, dir, Options{PruneUnfetchedSinceStart: true})
	fresh(s, 1, []string{twinA}, []string{twinA})
	s.Request(StreamID{Stream: 1}, &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}})
	s.EndFetchWindow()
	s.FetchWindowEnded()
	if statusOf(s, twinA) != nil || !s.Live(tB) {
		t.Fatalf("pairs = %+v, want %s pruned and %s kept", s.Status(), twinA, twinB)
	}
	if c := s.Counts(); c.Pruned[PrunedUnfetchedSinceStart] != 1 || c.PrunedLive != 1 {
		t.Fatalf("counts = %+v, want one prune by the pre-#1073 rule, counted live", c)
	}
}

// TestAdmitAndRefusalCounted: Admit and CountRefusal move the
// admitted and refused counters, and an admitted pair is subscribed.
func TestAdmitAndRefusalCounted(t *testing.T) {
	s := newSet(t, t.TempDir(), Options{})
	fresh(s, 1, nil, nil)
	s.Admit(tA)
	s.Admit(tA)
	s.CountRefusal()
	if c := s.Counts(); c.Admitted != 2 || c.Refused != 1 || c.Live != 1 {
		t.Fatalf("counts = %+v, want 2 admitted, 1 refused, 1 live", c)
	}
	if !s.subscribed[twinA] {
		t.Fatalf("%s admitted but not subscribed", twinA)
	}
}
