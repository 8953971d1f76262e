package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv(envCrashingMulti); dir != "" {
		crashingMulti(dir)
	}
	code := m.Run()
	if err := netns.LeakCheck(); err != nil {
		fmt.Fprintln(os.Stderr, "leak check:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func TestMetricSumsMatchingSamples(t *testing.T) {
	body := `# HELP x help
# TYPE aether_udp_datagrams_total counter
aether_udp_datagrams_total{listener="udp-capture~default~client",cluster="udp:svc-a.default"} 3
aether_udp_datagrams_total{listener="udp-capture~default~client",cluster="udp:svc-b.default"} 4
aether_udp_datagrams_total_extra{listener="udp-capture~default~client"} 100
aether_udp_no_route_total 2
`
	if v, ok := Metric(body, "aether_udp_datagrams_total", map[string]string{"listener": "udp-capture~default~client"}); !ok || v != 7 {
		t.Errorf("sum over a listener = %v, %v; want 7, true", v, ok)
	}
	if v, ok := Metric(body, "aether_udp_datagrams_total", map[string]string{"cluster": "udp:svc-b.default"}); !ok || v != 4 {
		t.Errorf("one cluster = %v, %v; want 4, true", v, ok)
	}
	if v, ok := Metric(body, "aether_udp_no_route_total", nil); !ok || v != 2 {
		t.Errorf("unlabelled = %v, %v; want 2, true", v, ok)
	}
	if _, ok := Metric(body, "aether_udp_datagrams_total", map[string]string{"cluster": "udp:svc-c.default"}); ok {
		t.Error("a label value no sample has matched")
	}
}

func TestReadRecordsSkipsAHalfWrittenLine(t *testing.T) {
	p := t.TempDir() + "/r.jsonl"
	if err := os.WriteFile(p, []byte(`{"event":"ready"}`+"\n"+`{"event":"udp","port":7001,"payload":"x"}`+"\n"+`{"event":"ud`), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadRecords(p)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || recs[1].Port != 7001 || recs[1].Payload != "x" {
		t.Fatalf("records = %+v, want the two complete lines", recs)
	}
	if err := os.WriteFile(p, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecords(p); err == nil || !strings.Contains(err.Error(), "bad line") {
		t.Fatalf("a corrupt record was accepted: %v", err)
	}
}

func TestScenarioChecks(t *testing.T) {
	dir := t.TempDir()
	bad := dir + "/gw.yaml"
	if err := os.WriteFile(bad, []byte("nodes: [{name: n}]\npods: [{name: p, node: n, ip: 10.244.1.1}]\nservices: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadScenario(bad); err == nil || !strings.Contains(err.Error(), "gateway") {
		t.Fatalf("a pod on its node's gateway address was accepted: %v", err)
	}
	if _, _, err := loadScenario(dir + "/missing.yaml"); err == nil {
		t.Fatal("a missing scenario was accepted")
	}
	if _, err := Up(context.Background(), Config{Scenario: "testdata/two-nodes.yaml", Mode: "nat"}); err == nil || !strings.Contains(err.Error(), "capture mode") {
		t.Fatalf("an unknown capture mode was accepted: %v", err)
	}
}

// exchange sends one datagram from the pod's namespace to dst over a
// connected socket and returns the reply.
func exchange(t *testing.T, from *Pod, dst netip.AddrPort, payload string) string {
	t.Helper()
	c, err := transparent.DialUDP(from.NS.Path, netip.AddrPort{}, dst, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(payload)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 256)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no reply from %s to %s: %v", dst, from.Key(), err)
	}
	return string(buf[:n])
}

// Without the mesh, the cluster is a plain routed network: a pod reaches a
// pod on its own node and across the bridge, the backend answers with its
// name, and its record shows the client's own address (no NAT anywhere).
func TestClusterWithoutMesh(t *testing.T) {
	privileged.Require(t)
	ctx := context.Background()
	c, err := Up(ctx, Config{Scenario: "testdata/two-nodes.yaml", RunDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
		if err := c.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}()
	// The programs run from the shared cache, not from a copy in the run dir.
	cache := BinCacheDir()
	if filepath.Dir(c.cfg.Bin.Dir) != cache {
		t.Fatalf("binaries in %s, want a set in the cache %s", c.cfg.Bin.Dir, cache)
	}
	if _, err := os.Stat(filepath.Join(c.RunDir, "bin")); err == nil {
		t.Fatalf("the run dir %s holds its own copy of the binaries", c.RunDir)
	}
	client := c.Pod("default", "client")
	for _, name := range []string{"echo-a", "echo-b"} {
		ip, err := c.Resolve(name)
		if err != nil {
			t.Fatal(err)
		}
		want := c.Pod("default", name).IP
		if ip != want {
			t.Fatalf("Resolve(%s) = %s, want %s", name, ip, want)
		}
		payload := "hello-" + name
		if got := exchange(t, client, netip.AddrPortFrom(ip, 7001), payload); got != name {
			t.Fatalf("reply from %s = %q, want its name", name, got)
		}
		recs, err := c.Records("default", name)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || recs[0].Payload != payload || !strings.HasPrefix(recs[0].Src, client.IP.String()+":") {
			t.Fatalf("%s recorded %+v, want one datagram %q from %s", name, recs, payload, client.IP)
		}
	}
	// The other pod saw nothing of its neighbour's traffic: records are per
	// backend, not shared.
	if recs, _ := c.Records("default", "client"); len(recs) != 0 {
		t.Fatalf("client's own backend recorded %+v", recs)
	}
	if vip, err := c.Resolve("echo.default"); err != nil || vip != netip.MustParseAddr("10.96.0.10") {
		t.Fatalf("Resolve(echo.default) = %v, %v", vip, err)
	}
	if _, err := c.Resolve("nobody"); err == nil {
		t.Fatal("Resolve of an unknown name succeeded")
	}
	// TCP across nodes as well.
	conn, err := transparent.DialTCP(ctx, client.NS.Path, netip.AddrPortFrom(c.Pod("default", "echo-b").IP, 7002), transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "tcp-hello\n")
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	n, _ := conn.Read(buf)
	conn.Close()
	if strings.TrimSpace(string(buf[:n])) != "echo-b" {
		t.Fatalf("tcp reply %q, want echo-b", buf[:n])
	}
	// Update keeps the registry loader's rules and the rig's: pods are fixed.
	if err := c.Update(func(sc *registry.Scenario) { sc.Pods = sc.Pods[:1] }); err == nil {
		t.Fatal("an update removing pods was accepted")
	}
	if err := c.Update(func(sc *registry.Scenario) { sc.Services[0].ClusterIP = "not-an-ip" }); err == nil || !strings.Contains(err.Error(), "clusterIP") {
		t.Fatalf("an invalid update was accepted: %v", err)
	}
	if err := c.Update(func(sc *registry.Scenario) { sc.Services[0].ClusterIP = "10.97.0.11" }); err == nil || !strings.Contains(err.Error(), "outside the rig's service range") {
		t.Fatalf("an update moving a ClusterIP out of the rig's plan was accepted: %v", err)
	}
	if err := c.Update(func(sc *registry.Scenario) { sc.Services[0].ClusterIP = "10.96.0.11" }); err != nil {
		t.Fatal(err)
	}
	if vip, _ := c.ServiceVIP("default", "echo"); vip != netip.MustParseAddr("10.96.0.11") {
		t.Fatalf("VIP after update = %s", vip)
	}
	b, err := os.ReadFile(c.RegistryFile)
	if err != nil || !strings.Contains(string(b), "10.96.0.11") {
		t.Fatalf("registry file lacks the update: %v\n%s", err, b)
	}
	if err := c.Update(func(sc *registry.Scenario) { sc.Pods[0].Netns = client.NS.Path }); err == nil || !strings.Contains(err.Error(), "handoff") {
		t.Fatalf("an update giving a pod a netns path was accepted: %v", err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// A failed bring-up rolls back: the namespaces are built before the CNI
// step, and a context that is already done fails that step; nothing of the
// attempt may survive.
func TestUpRollsBack(t *testing.T) {
	privileged.Require(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c, err := Up(ctx, Config{Scenario: "testdata/two-nodes.yaml", RunDir: t.TempDir()})
	if err == nil {
		c.Close()
		t.Fatal("Up with a cancelled context succeeded")
	}
	if !strings.Contains(err.Error(), "CNI ADD") {
		t.Fatalf("Up failed before the CNI step, so the rollback went untested: %v", err)
	}
	names, lerr := netns.List()
	if lerr != nil {
		t.Fatal(lerr)
	}
	for _, n := range names {
		if o, ok := netns.Owner(n); ok && o == os.Getpid() {
			t.Fatalf("namespace %s survived a failed Up (error was %v)", n, err)
		}
	}
}
