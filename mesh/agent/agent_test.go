package agent

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(scenarioDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDeltaADSPublishRefuseRecover runs the agent as the binary does (file
// source, unix socket) against a delta ADS client: the first snapshot
// arrives, a broken scenario is refused and counted while the client keeps
// the last one, and a fixed scenario is pushed as a delta.
func TestDeltaADSPublishRefuseRecover(t *testing.T) {
	dir := t.TempDir()
	scen := filepath.Join(dir, "mesh.yaml")
	good := readFixture(t, "two-udp-services.yaml")
	if err := os.WriteFile(scen, good, 0o644); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, StateDir: filepath.Join(dir, "state"),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	sock := filepath.Join(dir, "xds.sock")
	lis, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	gs := a.NewGRPCServer(ctx)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	go func() { _ = a.Run(ctx, &registry.FileSource{Path: scen, Interval: 10 * time.Millisecond}) }()

	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("failed to open delta ADS stream: %v", err)
	}
	if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: &core.Node{Id: "node-a"}, TypeUrl: resource.ListenerType}); err != nil {
		t.Fatal(err)
	}
	recv := func() *discovery.DeltaDiscoveryResponse {
		t.Helper()
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("delta ADS receive: %v", err)
		}
		if err := stream.Send(&discovery.DeltaDiscoveryRequest{Node: &core.Node{Id: "node-a"}, TypeUrl: resource.ListenerType, ResponseNonce: resp.GetNonce()}); err != nil {
			t.Fatal(err)
		}
		return resp
	}
	names := func(resp *discovery.DeltaDiscoveryResponse) []string {
		var out []string
		for _, r := range resp.GetResources() {
			out = append(out, r.GetName())
		}
		sort.Strings(out)
		return out
	}

	first := recv()
	if got := strings.Join(names(first), ","); got != "tcp-capture~demo~client-0,udp-capture~demo~client-0" {
		t.Fatalf("first delta = %s, want the client pod's two capture listeners", got)
	}
	l := &listener.Listener{}
	for _, r := range first.GetResources() {
		if err := r.GetResource().UnmarshalTo(l); err != nil || !l.GetTransparent().GetValue() {
			t.Fatalf("capture listener %s not transparent (err %v)", r.GetName(), err)
		}
	}
	_, v1 := a.Current()

	// Broken: refused, counted, nothing pushed, the last snapshot stays.
	broken := strings.Replace(string(good), "protocol: UDP}", "protocol: UPD}", 1)
	writeAtomic(t, scen, broken)
	waitFor(t, func() bool { return testutil.ToFloat64(a.metrics.refused.WithLabelValues("registry")) == 1 })
	if err := a.LastError(); err == nil || !strings.Contains(err.Error(), scen) || !strings.Contains(err.Error(), `service "demo/svc-a"`) ||
		!strings.Contains(err.Error(), "ports[0].protocol") {
		t.Fatalf("refusal %v does not name file, object and field", err)
	}
	if _, v := a.Current(); v != v1 {
		t.Fatalf("published version moved from %s to %s on a broken file", v1, v)
	}
	srv := httptest.NewServer(a.DebugHandler(reg))
	defer srv.Close()
	if body := get(t, srv.URL+"/metrics"); !strings.Contains(body, `aether_agent_snapshot_refused_total{gate="registry"} 1`) {
		t.Fatalf("/metrics does not show the refusal:\n%s", body)
	}

	// Fixed with a change: a second TCP service adds a filter chain, pushed
	// as an update of the TCP listener only.
	fixed := strings.Replace(string(good), "services:\n",
		"services:\n  - {name: svc-c, namespace: demo, clusterIP: 10.96.0.12, ports: [{name: stream, port: 80, targetPort: 8080}]}\n", 1)
	if _, err := registry.ParseScenario("fixed", []byte(fixed)); err != nil {
		t.Fatalf("test scenario edit is itself broken: %v", err)
	}
	writeAtomic(t, scen, fixed)
	second := recv()
	if got := strings.Join(names(second), ","); got != "tcp-capture~demo~client-0" {
		t.Fatalf("delta after the fix = %s, want only the changed TCP listener", got)
	}
	if err := second.GetResources()[0].GetResource().UnmarshalTo(l); err != nil || len(l.GetFilterChains()) != 2 {
		t.Fatalf("TCP listener has %d filter chains, want 2 (err %v)", len(l.GetFilterChains()), err)
	}
	if body := get(t, srv.URL+"/debug/config"); !strings.Contains(body, "tcp:svc-c.demo") {
		t.Fatal("/debug/config does not show the new cluster")
	}
	state, err := os.ReadFile(filepath.Join(dir, "state", "last-good.json"))
	if err != nil || !strings.Contains(string(state), "tcp:svc-c.demo") {
		t.Fatalf("state dir not updated (err %v)", err)
	}
	if n := testutil.ToFloat64(a.metrics.published); n != 2 {
		t.Fatalf("published = %v, want 2", n)
	}
}

// TestGateRefusalKeepsLastSnapshot: a State the builder turns into an
// invalid resource (an endpoint weight of 0, below Envoy's minimum of 1) is
// refused by validate_all; the cache keeps the previous version.
func TestGateRefusalKeepsLastSnapshot(t *testing.T) {
	a, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st, err := registry.ParseScenario("two", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatalf("control: the fixture must publish: %v", err)
	}
	k := registry.Key{Namespace: "demo", Name: "svc-b"}
	st.Endpoints[k][0].Weight = 0
	err = a.Apply(st)
	if err == nil || !strings.Contains(err.Error(), "validate_all") || !strings.Contains(err.Error(), "udp:svc-b.demo") {
		t.Fatalf("Apply = %v, want a validate_all refusal naming udp:svc-b.demo", err)
	}
	if n := testutil.ToFloat64(a.metrics.refused.WithLabelValues("validate_all")); n != 1 {
		t.Fatalf("refusals counted = %v, want 1", n)
	}
	good, version := a.Current()
	if version != "v1" {
		t.Fatalf("agent reports %s, want the last good v1", version)
	}
	if err := sameResources(served(a), good.Resources); err != nil {
		t.Fatalf("cache does not hold the last good v1: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}
