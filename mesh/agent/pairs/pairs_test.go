package pairs

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether/mesh/agent/pairstate"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

var (
	tA    = xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "client", SANamespace: "demo"}
	tB    = xdsnames.Twin{Service: "svc-b", Namespace: "demo", SA: "client", SANamespace: "demo"}
	twinA = xdsnames.TwinCluster(tA)
	twinB = xdsnames.TwinCluster(tB)
)

// newSet is a set on stateDir, with opts.
func newSet(t *testing.T, stateDir string, opts Options) *Set {
	t.Helper()
	opts.StateDir = stateDir
	opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	// Before the state dir goes: a write may still be under way.
	t.Cleanup(s.Flush)
	return s
}

// persist writes a state file by hand, as a previous agent would have.
func persist(t *testing.T, dir string, live, dormant []xdsnames.Twin) {
	t.Helper()
	if err := pairstate.Write(dir, pairstate.State{Live: live, Dormant: dormant}); err != nil {
		t.Fatal(err)
	}
}

// persisted reads s's state file back as names, once s's writes are done.
func persisted(t *testing.T, s *Set) (live, dormant []string) {
	t.Helper()
	s.Flush()
	st, err := pairstate.Load(s.opts.StateDir, time.Now())
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

// statusOf is twin's status, or nil.
func statusOf(s *Set, twin string) *Status {
	for _, p := range s.Status() {
		if p.Twin == twin {
			return &p
		}
	}
	return nil
}

// fresh sends s a stream's first CDS request: subscribe are its names,
// held its initial_resource_versions.
func fresh(s *Set, id int64, subscribe, held []string) {
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: append([]string{"*"}, subscribe...),
		InitialResourceVersions: map[string]string{}}
	for _, n := range held {
		req.InitialResourceVersions[n] = "1"
	}
	s.Request(StreamID{Stream: id}, req)
}

// TestCarriedOver: an admitted pair is persisted at once; a set made on
// the state dir starts with it, live, persisted, never seen, and counts
// it subscribed until a fresh stream says otherwise.
func TestCarriedOver(t *testing.T) {
	dir := t.TempDir()
	s := newSet(t, dir, Options{})
	s.Admit(tA)
	if live, dormant := persisted(t, s); !slices.Equal(live, []string{twinA}) || len(dormant) != 0 {
		t.Fatalf("persisted live %v dormant %v, want live [%s]", live, dormant, twinA)
	}
	r := newSet(t, dir, Options{})
	if got := statusOf(r, twinA); got == nil || got.State != Live || got.Evidence != EvidencePersisted || got.LastSeen != "" {
		t.Fatalf("carried-over pair = %+v, want live, persisted, never seen", got)
	}
	if !r.Live(tA) || r.Dormant(tA) || !slices.Equal(r.Twins(), []xdsnames.Twin{tA}) {
		t.Fatalf("Live %v, Dormant %v, Twins %v: want %s live", r.Live(tA), r.Dormant(tA), r.Twins(), twinA)
	}
	if n := testutil.ToFloat64(r.metrics.pairs.WithLabelValues(Live)); n != 1 {
		t.Fatalf("aether_agent_pairs{state=live} = %v, want 1", n)
	}
	// Away before any stream: it may be subscribed, so it goes dormant.
	r.Settle(func(xdsnames.Twin) bool { return true })
	if !r.Dormant(tA) {
		t.Fatalf("%s = %+v, want dormant", twinA, statusOf(r, twinA))
	}
}

// TestCorruptPairStateMovedAside: an unusable state file is counted, moved
// aside (kept, not replaced), and the set starts empty.
func TestCorruptPairStateMovedAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, pairstate.File)
	if err := os.WriteFile(path, []byte(`{"quic_pairs": ["quic:svc-a.demo@client.demo"], "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := newSet(t, dir, Options{})
	if n := testutil.ToFloat64(s.metrics.stateCorrupt); n != 1 {
		t.Fatalf("aether_agent_pair_state_corrupt_total = %v, want 1", n)
	}
	if ps := s.Status(); len(ps) != 0 {
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

// TestPairWritesNeverLandOutOfOrder: a write of an older pair set that
// starts after a newer one landed leaves the newer on disk.
func TestPairWritesNeverLandOutOfOrder(t *testing.T) {
	s := newSet(t, t.TempDir(), Options{})
	older := pairstate.State{Live: []xdsnames.Twin{tA}}
	newer := pairstate.State{Dormant: older.Live}
	s.background.Add(2)
	s.write(2, newer)
	s.write(1, older)
	if live, dormant := persisted(t, s); len(live) != 0 || !slices.Equal(dormant, []string{twinA}) {
		t.Fatalf("persisted live %v dormant %v, want the newer set: dormant [%s]", live, dormant, twinA)
	}
}

// TestNoStateDir: without a state dir nothing is read or written, and
// the set works all the same.
func TestNoStateDir(t *testing.T) {
	s := newSet(t, "", Options{})
	s.Admit(tA)
	if !s.Live(tA) || s.Counts().Admitted != 1 || s.gen != 0 {
		t.Fatalf("Live %v, counts %+v, writes %d: want %s live, admitted once, nothing written", s.Live(tA), s.Counts(), s.gen, twinA)
	}
}

// TestLaterRequestLeavesFirstToRequest: LaterRequest does nothing for a
// stream's first CDS request, whose prunes the agent tells under its own
// lock (Request): a dormant pair stays until then. A later request's
// names are recorded as Request would.
func TestLaterRequestLeavesFirstToRequest(t *testing.T) {
	s := newSet(t, t.TempDir(), Options{})
	s.Admit(tA)
	s.Settle(func(xdsnames.Twin) bool { return true })
	first := &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{"*"}}
	if s.LaterRequest(StreamID{Stream: 1}, first) || !s.Dormant(tA) {
		t.Fatalf("LaterRequest took a stream's first request (dormant %s: %v)", twinA, s.Dormant(tA))
	}
	s.Request(StreamID{Stream: 1}, first)
	if s.Dormant(tA) || statusOf(s, twinA) != nil {
		t.Fatalf("%s = %+v after a fresh stream that does not re-subscribe it, want pruned", twinA, statusOf(s, twinA))
	}
	s.Admit(tB)
	later := &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}}
	before := statusOf(s, twinB).LastSeen
	time.Sleep(2 * time.Millisecond)
	if !s.LaterRequest(StreamID{Stream: 1}, later) {
		t.Fatal("LaterRequest refused a stream's second request")
	}
	if got := statusOf(s, twinB); got == nil || got.Evidence != EvidenceSubscribed || got.LastSeen == before {
		t.Fatalf("%s = %+v after a later request naming it, want seen subscribed again (was %s)", twinB, got, before)
	}
}
