package node

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

const multiFixture = "../../fixtures/scenarios/multicluster.yaml"

// ownNamespaces is what `ip netns list` shows of this process's
// namespaces.
func ownNamespaces(t *testing.T) []string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	var own []string
	prefix := netns.Prefix + strconv.Itoa(os.Getpid()) + "-"
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], prefix) {
			own = append(own, f[0])
		}
	}
	return own
}

// witness listens on addr inside ns and reports the remote address and
// first line of the first connection it accepts.
type witness struct {
	ln  net.Listener
	got chan string
}

func listenIn(t *testing.T, ns *netns.NS, addr netip.AddrPort) *witness {
	t.Helper()
	w := &witness{got: make(chan string, 1)}
	err := ns.Do(func() error {
		var err error
		w.ln, err = net.Listen("tcp4", addr.String())
		return err
	})
	if err != nil {
		t.Fatalf("listen on %s in netns %s: %v", addr, ns.Name, err)
	}
	t.Cleanup(func() { w.ln.Close() })
	go func() {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line, _ := bufio.NewReader(c).ReadString('\n')
		w.got <- c.RemoteAddr().String() + " " + strings.TrimSpace(line)
	}()
	return w
}

// connectThrough dials dst from ns, sends a line, and returns what the
// witness at dst saw: "<remote addr> <line>".
func connectThrough(t *testing.T, from *netns.NS, dst netip.AddrPort, w *witness, line string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := transparent.DialTCP(ctx, from.Path, dst, transparent.Options{})
	if err != nil {
		t.Fatalf("connect from netns %s to %s: %v", from.Name, dst, err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "%s\n", line)
	select {
	case got := <-w.got:
		return got
	case <-time.After(5 * time.Second):
		t.Fatalf("the listener at %s saw no connection from netns %s", dst, from.Name)
	}
	return ""
}

// unreachable asserts that dst cannot be reached from ns for want of a
// route: the kernel refuses the connect at once (ENETUNREACH), so no
// packet leaves ns.
func unreachable(t *testing.T, from *netns.NS, dst netip.AddrPort) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := transparent.DialTCP(ctx, from.Path, dst, transparent.Options{})
	if err == nil {
		conn.Close()
		t.Fatalf("netns %s reached %s, which is another cluster's", from.Name, dst)
	}
	if !errors.Is(err, syscall.ENETUNREACH) {
		t.Fatalf("connect from netns %s to %s: %v, want ENETUNREACH (no route)", from.Name, dst, err)
	}
}

// Two clusters in one process, without the mesh: each on its own underlay,
// joined only by their gateway nodes on the shared network. A node of
// cluster-1 reaches cluster-2's gateway address through its own gateway
// node, and the peer sees it by its own underlay address (no NAT, so the
// reply found its way back); it has no route to cluster-2's pods or
// services, which cluster-2's own node reaches. The exports are written
// and follow an Update. Teardown leaves no namespace.
func TestClustersJoinedByTheirGateways(t *testing.T) {
	privileged.Require(t)
	before := ownNamespaces(t)
	if len(before) > 0 {
		t.Fatalf("namespaces of this process before the run: %v", before)
	}
	ctx := context.Background()
	m, err := UpClusters(ctx, MultiConfig{Clusters: multiFixture, Mode: NoMesh, RunDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			m.Close()
		}
	}()
	c1, c2 := m.Cluster("cluster-1"), m.Cluster("cluster-2")
	if c1 == nil || c2 == nil || len(m.Clusters()) != 2 {
		t.Fatalf("clusters %v, want cluster-1 and cluster-2", m.Clusters())
	}
	if c1.Underlay() != UnderlayPrefix || c2.Underlay() != netip.MustParsePrefix("10.243.1.0/24") {
		t.Fatalf("underlays %s and %s, want %s and 10.243.1.0/24", c1.Underlay(), c2.Underlay(), UnderlayPrefix)
	}
	if c1.TrustDomain != "cluster-1.aether.test" || c2.MeshDomain != "two.mesh.test" {
		t.Fatalf("cluster entries: %q %q", c1.TrustDomain, c2.MeshDomain)
	}
	a, b := c1.Node("c1-a"), c2.Node("c2-b")
	gw1, addr1 := c1.Gateway()
	gw2, addr2 := c2.Gateway()
	if gw1 == nil || gw1.Name != "c1-gw" || addr1 != netip.MustParseAddr("172.30.0.10") ||
		gw2 == nil || gw2.Name != "c2-gw" || addr2 != netip.MustParseAddr("172.30.0.20") {
		t.Fatalf("gateways %v %s and %v %s", gw1, addr1, gw2, addr2)
	}
	if a.Underlay != netip.MustParseAddr("10.243.0.1") || b.Underlay != netip.MustParseAddr("10.243.1.1") {
		t.Fatalf("underlay addresses %s and %s", a.Underlay, b.Underlay)
	}

	// Both directions, each through both gateway nodes.
	dst := netip.AddrPortFrom(addr2, 18009)
	w := listenIn(t, gw2.NS, dst)
	if got, want := connectThrough(t, a.NS, dst, w, "from-c1-a"), "10.243.0.1:"; !strings.HasPrefix(got, want) || !strings.HasSuffix(got, " from-c1-a") {
		t.Fatalf("c2-gw saw %q, want a connection from %s... carrying from-c1-a", got, want)
	}
	back := netip.AddrPortFrom(addr1, 18009)
	w = listenIn(t, gw1.NS, back)
	if got := connectThrough(t, b.NS, back, w, "from-c2-b"); !strings.HasPrefix(got, "10.243.1.1:") || !strings.HasSuffix(got, " from-c2-b") {
		t.Fatalf("c1-gw saw %q, want a connection from 10.243.1.1 carrying from-c2-b", got)
	}

	// The clusters are separate: cluster-2's pod and service addresses
	// are live inside cluster-2 and unrouted from cluster-1.
	pod := c2.Pod("demo", "dst-a-0")
	if conn, err := transparent.DialTCP(ctx, b.NS.Path, netip.AddrPortFrom(pod.IP, 7080), transparent.Options{}); err != nil {
		t.Fatalf("cluster-2's own node cannot reach its pod %s: %v", pod.IP, err)
	} else {
		conn.Close()
	}
	unreachable(t, a.NS, netip.AddrPortFrom(pod.IP, 7080))
	unreachable(t, gw1.NS, netip.AddrPortFrom(pod.IP, 7080))
	unreachable(t, c1.Pod("demo", "web-0").NS, netip.AddrPortFrom(pod.IP, 7080))

	// Each cluster with a gateway has its export, and an Update rewrites it.
	rs, err := registry.LoadExportFile(c2.ExportFile)
	if err != nil {
		t.Fatal(err)
	}
	if names := remoteNames(rs); !slices.Equal(names, []string{"demo/dst-a@172.30.0.20:18009", "demo/dst-b@172.30.0.20:18009"}) {
		t.Fatalf("cluster-2 exports %v", names)
	}
	if rs, err := registry.LoadExportFile(c1.ExportFile); err != nil || !slices.Equal(remoteNames(rs), []string{"demo/back@172.30.0.10:18009"}) {
		t.Fatalf("cluster-1 exports %v, %v", remoteNames(rs), err)
	}
	err = c2.Update(func(sc *registry.Scenario) {
		for i := range sc.Services {
			if sc.Services[i].Name == "dst-b" {
				sc.Services[i].Selector = map[string]string{"app": "nobody"}
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if rs, err := registry.LoadExportFile(c2.ExportFile); err != nil || !slices.Equal(remoteNames(rs), []string{"demo/dst-a@172.30.0.20:18009"}) {
		t.Fatalf("after dst-b lost its endpoints, cluster-2 exports %v, %v", remoteNames(rs), err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}

	closed = true
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if left := ownNamespaces(t); len(left) > 0 {
		t.Fatalf("namespaces left after teardown: %v", left)
	}
}

func remoteNames(rs []registry.RemoteService) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Key().String()+"@"+r.Gateway.String())
	}
	return out
}

// A cluster brought up alone with a gateway node gets its own shared
// network: the gateway address is on the gateway node, and every other
// node reaches it through that node.
func TestGatewayNodeAlone(t *testing.T) {
	privileged.Require(t)
	c, err := Up(context.Background(), Config{Scenario: "../../fixtures/scenarios/gateway.yaml", RunDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	}()
	gw, addr := c.Gateway()
	if gw == nil || gw.Name != "gw" || addr != netip.MustParseAddr("172.30.0.10") || c.WAN() == nil {
		t.Fatalf("gateway %v %s, wan %v", gw, addr, c.WAN())
	}
	if c.Underlay() != UnderlayPrefix {
		t.Fatalf("underlay %s, want %s", c.Underlay(), UnderlayPrefix)
	}
	dst := netip.AddrPortFrom(addr, 18009)
	w := listenIn(t, gw.NS, dst)
	from := c.Node("node-a")
	if got := connectThrough(t, from.NS, dst, w, "hi"); !strings.HasPrefix(got, from.Underlay.String()+":") {
		t.Fatalf("gw saw %q, want a connection from %s", got, from.Underlay)
	}
}

// A clusters file whose clusters share an address, or stray from the
// rig's plan, is refused before anything is built, with the cluster and
// field named; the unedited fixture passes.
func TestOverlappingClustersAreRefused(t *testing.T) {
	orig, err := os.ReadFile(multiFixture)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadClusters(multiFixture); err != nil {
		t.Fatalf("the unedited fixture is refused: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"pod ip in both clusters", "ip: 10.244.12.2", "ip: 10.244.1.10",
			`cluster "cluster-2": pod demo/dst-a-0: field ip: 10.244.1.10 is also cluster "cluster-1"'s pod demo/web-0`},
		{"clusterIP in both clusters", "clusterIP: 10.96.2.60", "clusterIP: 10.96.1.10",
			`cluster "cluster-2": service demo/dst-a: field clusterIP: 10.96.1.10 is also cluster "cluster-1"'s service demo/back`},
		{"a pod ip that is the other cluster's clusterIP", "ip: 10.244.12.3", "ip: 10.96.1.10",
			`cluster "cluster-2"`},
		{"one gateway address for both", "address: 172.30.0.20", "address: 172.30.0.10",
			`cluster "cluster-2": node c2-gw: field gateway.address: 172.30.0.10 is also cluster "cluster-1"'s node c1-gw`},
		{"gateway off the shared network", "address: 172.30.0.20", "address: 172.31.0.20",
			`cluster "cluster-2": node c2-gw: field gateway.address: 172.31.0.20 is outside the rig's shared network 172.30.0.0/24`},
		{"pod outside the pod range", "ip: 10.244.12.4", "ip: 192.168.12.4",
			`cluster "cluster-2": pod demo/internal-0: field ip: 192.168.12.4 is outside the rig's pod range`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(string(orig), tc.from, tc.to, 1)
			if edited == string(orig) {
				t.Fatalf("the fixture holds no %q to edit", tc.from)
			}
			p := filepath.Join(t.TempDir(), "clusters.yaml")
			if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			runDir := filepath.Join(t.TempDir(), "run")
			m, err := UpClusters(context.Background(), MultiConfig{Clusters: p, Mode: NoMesh, RunDir: runDir})
			if err == nil {
				m.Close()
				t.Fatal("UpClusters accepted the file")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("UpClusters = %v, want an error containing %q", err, tc.want)
			}
			if _, serr := os.Stat(runDir); !errors.Is(serr, os.ErrNotExist) {
				t.Fatalf("the refused file left a run dir %s (stat: %v)", runDir, serr)
			}
			if names, _ := netns.List(); slices.ContainsFunc(names, func(n string) bool { o, ok := netns.Owner(n); return ok && o == os.Getpid() }) {
				t.Fatalf("the refused file left namespaces: %v", names)
			}
		})
	}
}

func TestClusterUnderlays(t *testing.T) {
	for k, want := range map[int]string{0: "10.243.0.0/24", 1: "10.243.1.0/24", 7: "10.243.7.0/24"} {
		if got := ClusterUnderlay(k); got.String() != want {
			t.Errorf("ClusterUnderlay(%d) = %s, want %s", k, got, want)
		}
	}
}

// With the mesh, each cluster's agents run in its own trust domain under
// the CA the rig made for it, and each gateway node's proxy listens on its
// gateway address's 18009: a connection from cluster-1's node to
// cluster-2's gateway is accepted there, where nothing else listens.
func TestClustersWithTheMesh(t *testing.T) {
	privileged.Require(t)
	m, err := UpClusters(context.Background(), MultiConfig{Clusters: multiFixture, Mode: constants.CaptureTProxy, RunDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := m.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, c := range m.Clusters() {
		b, err := os.ReadFile(filepath.Join(c.CADir, identity.CAFile))
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		if blk == nil {
			t.Fatalf("cluster %s: no PEM in its CA file", c.Name)
		}
		root, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if len(root.URIs) != 1 || root.URIs[0].String() != "spiffe://"+c.TrustDomain {
			t.Fatalf("cluster %s's CA signs for %v, want spiffe://%s", c.Name, root.URIs, c.TrustDomain)
		}
	}
	c1, c2 := m.Cluster("cluster-1"), m.Cluster("cluster-2")
	_, addr2 := c2.Gateway()
	dst := netip.AddrPortFrom(addr2, constants.EastWestTunnelPort)
	from := c1.Node("c1-a")
	err = poll(context.Background(), 30*time.Second, func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		conn, err := transparent.DialTCP(ctx, from.NS.Path, dst, transparent.Options{})
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	})
	if err != nil {
		t.Fatalf("c2-gw's proxy does not accept on %s from c1-a: %v\n%v", dst, err, m.Check())
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
}

// envCrashingMulti makes the test binary bring up the multi-cluster
// fixture in the given run dir, say so in a file there, and wait to be
// killed: a run that crashes without tearing down.
const envCrashingMulti = "AETHER_NODE_TEST_CRASHING_MULTI"

func crashingMulti(dir string) {
	if _, err := UpClusters(context.Background(), MultiConfig{Clusters: multiFixture, Mode: NoMesh, RunDir: dir}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(filepath.Join(dir, "up"), nil, 0o644); err != nil {
		os.Exit(1)
	}
	select {}
}

// A multi-cluster run killed before its teardown leaves namespaces owned
// by a dead process, the shared network's among them; the next run's
// sweep removes every one.
func TestSweepRemovesACrashedMultiClusterRun(t *testing.T) {
	privileged.Require(t)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), envCrashingMulti+"="+dir)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() { _ = cmd.Process.Kill(); <-done }()
	err := poll(context.Background(), 60*time.Second, func() (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("the crashing run exited before it was up:\n%s", out)
		default:
		}
		_, err := os.Stat(filepath.Join(dir, "up"))
		return err == nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	prefix := netns.Prefix + strconv.Itoa(pid) + "-"
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	var theirs []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			theirs = append(theirs, n)
		}
	}
	// Two bridges, four nodes, six pods and the shared network.
	if len(theirs) != 13 || !slices.ContainsFunc(theirs, func(n string) bool { return strings.HasSuffix(n, "~wan") }) {
		t.Fatalf("the crashed run's namespaces %v, want 13 with the shared network's", theirs)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	swept, err := netns.Sweep()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range theirs {
		if !slices.Contains(swept, n) {
			t.Errorf("the sweep left %s (swept %v)", n, swept)
		}
	}
	if left := ownNamespaces(t); len(left) > 0 {
		t.Fatalf("namespaces of this process: %v", left)
	}
}
