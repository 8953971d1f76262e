package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/agent/pairstate"
)

// TestPairFlags: the agent carries a persisted pair over, shows it on
// /debug/pairs, and prunes it one --east-west-quic-pair-fetch-window
// after start when no proxy showed it used.
func TestPairFlags(t *testing.T) {
	dir := t.TempDir()
	const twin = "quic:svc-a.demo@client.demo"
	if err := os.WriteFile(filepath.Join(dir, "observed-upstreams.json"), []byte(`{"quic_pairs":["`+twin+`"],"dormant_quic_pairs":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := agentCmd(t, "--node", "node-a",
		"--registry-file", "../../../fixtures/scenarios/two-udp-services.yaml",
		"--listen", "unix://"+filepath.Join(dir, "xds.sock"),
		"--state-dir", dir,
		"--east-west-quic-pair-fetch-window", "3s",
		"--metrics-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := debugAddr(t, stderr)
	if got := get(addr, "/debug/pairs"); !strings.Contains(got, `"twin": "`+twin+`"`) || !strings.Contains(got, `"evidence": "persisted"`) {
		t.Fatalf("/debug/pairs = %s, want %s persisted", got, twin)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(get(addr, "/metrics"), "\n"+`aether_agent_pairs_pruned_total{reason="fetch-window"} 1`+"\n") {
		if time.Now().After(deadline) {
			t.Fatalf("never pruned; /metrics:\n%s", get(addr, "/metrics"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := get(addr, "/debug/pairs"); !strings.Contains(got, `"pairs": []`) {
		t.Fatalf("/debug/pairs after the window = %s, want no pairs", got)
	}
	// The prune is counted under the agent's lock, but the state file is
	// rewritten on a goroutine of its own (pairstate's write, two fsyncs,
	// runs off the admission path): the metric can show before the file
	// changes. The witness that the write landed is the file itself, read
	// until it holds the pruned set, with a bound.
	var b []byte
	deadline = time.Now().Add(30 * time.Second)
	for {
		b, err = os.ReadFile(filepath.Join(dir, "observed-upstreams.json"))
		if err == nil {
			var st pairstate.State
			if st, err = pairstate.Decode(b); err == nil && len(st.Live) == 0 && len(st.Dormant) == 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("state file after the window = %s (%v), want %s gone and no other pair", b, err, twin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPairFlagsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--east-west-quic-pair-fetch-window", "0s"}, "is not a positive duration"},
		{[]string{"--proxy-metrics-url", "http://10.0.0.1:15091/metrics"}, "10.0.0.1 is not a loopback address"},
		{[]string{"--proxy-metrics-url", "https://127.0.0.1:15091/metrics"}, `scheme "https", want http`},
	} {
		dir := t.TempDir()
		args := append([]string{"--node", "node-a", "--registry-file", "../../../fixtures/scenarios/two-udp-services.yaml",
			"--listen", "unix://" + filepath.Join(dir, "xds.sock"), "--metrics-addr", ""}, c.args...)
		cmd := agentCmd(t, args...)
		// An agent that accepts the flag runs on: it is stopped, and fails
		// the case, rather than hanging the test.
		timer := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		out, err := cmd.CombinedOutput()
		timer.Stop()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("aether-agent %v = %v, output %s; want a failure saying %q", c.args, err, out, c.want)
		}
	}
}
