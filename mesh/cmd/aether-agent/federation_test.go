package main

import (
	"bufio"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/identity"
)

const mtlsScenario = "../../../fixtures/scenarios/mtls.yaml"

// writeBundle writes td's CA in dir (as an agent would make it) and its
// bundle, the certificates alone, to a file beside: what an operator
// hands the peer cluster.
func writeBundle(t *testing.T, dir, td string) (bundleFile string) {
	t.Helper()
	ca, err := identity.LoadOrCreateCA(dir, identity.CAConfig{TrustDomain: td, MeshDomain: "mesh.local"})
	if err != nil {
		t.Fatal(err)
	}
	var data []byte
	for _, c := range ca.Bundle().X509Authorities() {
		data = append(data, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	bundleFile = filepath.Join(t.TempDir(), td+".bundle.pem")
	if err := os.WriteFile(bundleFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return bundleFile
}

// logged scans the agent's log for each pattern's first submatch.
func logged(t *testing.T, stderr io.Reader, patterns ...string) []string {
	t.Helper()
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	found := make(chan []string, 1)
	go func() {
		out := make([]string, len(res))
		left := len(res)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			for i, re := range res {
				if m := re.FindStringSubmatch(sc.Text()); m != nil && out[i] == "" {
					out[i] = m[1]
					if left--; left == 0 {
						found <- out
					}
				}
			}
		}
	}()
	select {
	case out := <-found:
		return out
	case <-time.After(30 * time.Second):
		t.Fatalf("the agent never logged %v", patterns)
	}
	return nil
}

// Two agents of two trust domains, each with its own CA directory: the
// first serves its bundle on --bundle-endpoint, the second federates it
// with --federate and --federate-bundle, fetches it, counts the update and
// publishes a trust bundle with both trust domains.
func TestFederationFlags(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	bundleA := writeBundle(t, dirA, "a.test")
	start := func(args ...string) (metrics string, endpoint string) {
		t.Helper()
		cmd := agentCmd(t, append(args, "--registry-file", mtlsScenario, "--metrics-addr", "127.0.0.1:0",
			"--listen", "unix://"+filepath.Join(t.TempDir(), "xds.sock"))...)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		patterns := []string{`serving /metrics, /debug/config and /debug/pairs" addr=(\S+)`}
		if strings.Contains(strings.Join(args, " "), "--bundle-endpoint") {
			patterns = append(patterns, `serving the SPIFFE bundle endpoint" addr=(\S+)`)
		}
		got := logged(t, stderr, patterns...)
		if len(got) > 1 {
			return got[0], got[1]
		}
		return got[0], ""
	}
	_, endpoint := start("--node", "node-a", "--trust-domain", "a.test", "--ca-dir", dirA, "--bundle-endpoint", "127.0.0.1:0", "--bundle-refresh-hint", "1s")
	metricsB, _ := start("--node", "node-b", "--trust-domain", "b.test", "--ca-dir", dirB,
		"--federate", "a.test=https://"+endpoint+"/", "--federate-bundle", "a.test="+bundleA)

	deadline := time.Now().Add(30 * time.Second)
	for {
		m, cfg := get(metricsB, "/metrics"), get(metricsB, "/debug/config")
		if strings.Contains(m, "\n"+`aether_agent_federation_bundle_updates_total{trust_domain="a.test"} 1`+"\n") &&
			strings.Contains(cfg, `"name": "a.test"`) && strings.Contains(cfg, `"name": "b.test"`) {
			if !strings.Contains(m, "\n"+`aether_agent_federation_fetch_failures_total{reason="connect",trust_domain="a.test"} 0`+"\n") {
				t.Errorf("/metrics has no zero connect failure count for a.test:\n%s", m)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-b never trusted a.test; /metrics:\n%s\n/debug/config:\n%s", m, cfg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// (d) A bad federation flag stops the agent with an error naming the
// value.
func TestFederationFlagsRefused(t *testing.T) {
	dirA := t.TempDir()
	bundleA := writeBundle(t, dirA, "a.test")
	caFile := filepath.Join(dirA, identity.CAFile) // holds the key too
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	mtlsOn := []string{"--trust-domain", "b.test", "--ca-dir", t.TempDir()}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--federate", "a.test=https://127.0.0.1:8443/"}, "need the mTLS path"},
		{append(mtlsOn, "--federate", "a.test"), `--federate "a.test": want <trust-domain>=<https url>`},
		{append(mtlsOn, "--federate", "spiffe://a.test=https://127.0.0.1:8443/"), `--federate "spiffe://a.test=https://127.0.0.1:8443/": invalid trust domain "spiffe://a.test": want a name`},
		{append(mtlsOn, "--federate", "A.test=https://127.0.0.1:8443/"), `--federate "A.test=https://127.0.0.1:8443/": invalid trust domain "A.test"`},
		{append(mtlsOn, "--federate", "a.test=http://127.0.0.1:8443/", "--federate-bundle", "a.test="+bundleA), `--federate "a.test=http://127.0.0.1:8443/": bundle endpoint URL "http://127.0.0.1:8443/": scheme "http", want https`},
		{append(mtlsOn, "--federate", "a.test=https://127.0.0.1:8443/"), `--federate "a.test=https://127.0.0.1:8443/": no --federate-bundle a.test=<PEM file>`},
		{append(mtlsOn, "--federate", "b.test=https://127.0.0.1:8443/"), `--federate "b.test=https://127.0.0.1:8443/": "b.test" is the local trust domain`},
		{append(mtlsOn, "--federate", "a.test=https://127.0.0.1:8443/", "--federate", "a.test=https://127.0.0.1:9443/", "--federate-bundle", "a.test="+bundleA), `--federate "a.test=https://127.0.0.1:9443/": trust domain "a.test" is federated twice`},
		{append(mtlsOn, "--federate", "a.test=https://127.0.0.1:8443/", "--federate-bundle", "a.test="+caFile), `is "EC PRIVATE KEY", want CERTIFICATE blocks alone`},
		{append(mtlsOn, "--federate", "a.test=https://127.0.0.1:8443/", "--federate-bundle", "a.test="+garbage), garbage + ": no PEM CERTIFICATE block"},
		{append(mtlsOn, "--federate", "a.test=https://127.0.0.1:8443/", "--federate-bundle", "a.test=/nonexistent.pem"), `--federate-bundle "a.test=/nonexistent.pem": open /nonexistent.pem: no such file`},
		{append(mtlsOn, "--federate-bundle", "a.test="+bundleA), `--federate-bundle a.test=...: trust domain "a.test" is not federated`},
		{append(mtlsOn, "--bundle-endpoint", "nope"), `--bundle-endpoint "nope": want host:port`},
		{append(mtlsOn, "--bundle-endpoint", "127.0.0.1:0", "--bundle-refresh-hint", "500ms"), "refresh hint 500ms is under a second"},
	} {
		args := append([]string{"--node", "node-b", "--registry-file", mtlsScenario,
			"--listen", "unix://" + filepath.Join(t.TempDir(), "xds.sock"), "--metrics-addr", ""}, c.args...)
		cmd := agentCmd(t, args...)
		// An agent that accepts the flags runs on: it is stopped, and
		// fails the case, rather than hanging the test.
		timer := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
		out, err := cmd.CombinedOutput()
		timer.Stop()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("aether-agent %v = %v, output %s; want a failure saying %q", c.args, err, out, c.want)
		}
	}
}
