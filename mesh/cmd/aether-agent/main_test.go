package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/handoff"
)

// envRunAsAgent makes the test binary act as aether-agent, so these tests
// drive the real flag handling and wiring.
const envRunAsAgent = "AETHER_AGENT_TEST_RUN_AS_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsAgent) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func agentCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), envRunAsAgent+"=1")
	return cmd
}

// The Kubernetes source gives no netns paths: without the handoff its pods
// would all go without listeners, so with --kubeconfig the handoff is on,
// on the CNI's default socket unless the flag names another. A file source
// without the flag keeps its own netns paths.
func TestKubeconfigAlwaysTakesTheHandoff(t *testing.T) {
	for _, tc := range []struct{ flag, kubeconfig, want string }{
		{"", "/k", handoff.DefaultSocket},
		{"/s/cni.sock", "/k", "/s/cni.sock"},
		{"/s/cni.sock", "", "/s/cni.sock"},
		{"", "", ""},
	} {
		if got := handoffSocket(tc.flag, tc.kubeconfig); got != tc.want {
			t.Errorf("handoffSocket(%q, %q) = %q, want %q", tc.flag, tc.kubeconfig, got, tc.want)
		}
	}
}

// With --handoff-socket the scenario file's netns path is not used: the
// pod has none until the CNI hands it over, and then has the handed-over
// one. The agent's own metrics and /debug/config are the witnesses.
func TestHandoffIsTheOnlySourceOfNetnsPaths(t *testing.T) {
	dir := t.TempDir()
	socket := filepath.Join(dir, "cni.sock")
	cmd := agentCmd(t, "--node", "node-a",
		"--registry-file", "../../../fixtures/scenarios/two-udp-services.yaml",
		"--handoff-socket", socket,
		"--listen", "unix://"+filepath.Join(dir, "xds.sock"),
		"--metrics-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	metrics := debugAddr(t, stderr)

	const fileNetns = "/run/netns/demo~client-0" // what the scenario says
	waitFor(t, metrics, "aether_agent_pods_without_netns 1", fileNetns, false)

	handed := "/run/netns/handed~client-0"
	pod := handoff.Pod{Ref: handoff.Ref{ContainerID: "c1", IfName: "eth0"}, Namespace: "demo", Name: "client-0",
		Netns: handed, IPs: []netip.Addr{netip.MustParseAddr("10.244.1.10")}}
	if err := handoff.NewClient(socket).Add(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	waitFor(t, metrics, "aether_agent_pods_without_netns 0", handed, true)
}

// debugAddr reads the agent's log until it says where /metrics is.
func debugAddr(t *testing.T, stderr io.Reader) string {
	t.Helper()
	re := regexp.MustCompile(`serving /metrics, /debug/config and /debug/pairs" addr=(\S+)`)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case addr := <-found:
		return addr
	case <-time.After(30 * time.Second):
		t.Fatal("the agent never said where it serves /metrics")
	}
	return ""
}

// waitFor waits until /metrics has metricLine and /debug/config holds
// netns (or, when has is false, does not).
func waitFor(t *testing.T, addr, metricLine, netns string, has bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var m, cfg string
	for time.Now().Before(deadline) {
		m, cfg = get(addr, "/metrics"), get(addr, "/debug/config")
		if strings.Contains(m, "\n"+metricLine+"\n") && cfg != "" && strings.Contains(cfg, netns) == has {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the agent never had %q with netns %s in its config = %v; last /debug/config:\n%s", metricLine, netns, has, cfg)
}

func get(addr, path string) string {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ""
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
