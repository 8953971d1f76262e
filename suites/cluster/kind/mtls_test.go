package kind

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/rigs/kind/manifests"
	"github.com/aether-mesh/aether/suites/cluster"
)

// The proxy's metrics name its listeners <kind>~<namespace>~<pod>: a pod
// with only mTLS-path listeners is served, a pod whose name is another's
// prefix is not taken for it.
func TestServesPodByAnyOfItsListeners(t *testing.T) {
	body := `aether_proxy_http_requests_total{cluster="x",code="200",flags="-",listener="http-inbound~demo~dst-0"} 3
aether_proxy_tcp_connections_total{cluster="y",listener="tcp-capture~demo~src-a-0"} 1
aether_proxy_udp_downstream_rx_datagrams_total{listener="udp-capture~demo~a-0"} 9
`
	for pod, want := range map[string]bool{"dst-0": true, "src-a-0": true, "a-0": true, "src-b-0": false, "dst": false, "st-0": false} {
		if got := servesPod(body, cluster.Pod{Namespace: "demo", Name: pod}); got != want {
			t.Errorf("pod demo/%s: served %v, want %v", pod, got, want)
		}
	}
	if servesPod(body, cluster.Pod{Namespace: "other", Name: "dst-0"}) {
		t.Error("a pod of another namespace was taken as served")
	}
}

// The install reads the suite's own CA file and the echo's PEM files, as
// they are, into the values the Secrets are rendered from; a missing CA
// is named.
func TestMTLSValuesCarryTheSuitesFiles(t *testing.T) {
	if v, err := mtlsValues(nil); v != nil || err != nil {
		t.Fatalf("no mTLS path: %+v, %v", v, err)
	}
	dir := t.TempDir()
	ca, err := identity.LoadOrCreateCA(filepath.Join(dir, "ca"), identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"svid.pem": "svid\n", "key.pem": "key\n", "bundle.pem": "bundle\n"}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	m := &cluster.MTLS{TrustDomain: "aether.test", MeshDomain: "mesh.test", CADir: filepath.Join(dir, "ca"), UpstreamCert: "per-source",
		EchoTLS: &cluster.EchoTLS{Port: 7443, Cert: filepath.Join(dir, "svid.pem"), Key: filepath.Join(dir, "key.pem"), Bundle: filepath.Join(dir, "bundle.pem")}}
	v, err := mtlsValues(m)
	if err != nil {
		t.Fatal(err)
	}
	caFile, err := os.ReadFile(filepath.Join(dir, "ca", identity.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	if v.CA != string(caFile) || v.Echo.Cert != "svid\n" || v.Echo.Key != "key\n" || v.Echo.Bundle != "bundle\n" || v.Echo.Port != 7443 {
		t.Fatalf("values %+v, echo %+v", v, v.Echo)
	}
	// What the agents are handed is the suite's CA: an agent loading the
	// Secret's file signs under the same root the suite's clients use.
	agentDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentDir, identity.CAFile), []byte(v.CA), 0o400); err != nil {
		t.Fatal(err)
	}
	loaded, err := identity.LoadOrCreateCA(agentDir, identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	svid, err := loaded.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "sa-a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := x509svid.Verify(svid.Certificates, ca.Bundle()); err != nil {
		t.Fatalf("an SVID of the agent's CA does not verify under the suite's: %v", err)
	}
	stream, err := manifests.Mesh(withMTLS(values(constants.CaptureTProxy), v))
	if err != nil || !strings.Contains(string(stream), "aether-ca") {
		t.Fatalf("the install with these values: %v", err)
	}
	// The mTLS suites leave the transport unset and get the HTTP/2 floor;
	// the east-west suite asks for auto and its agents get auto, and a
	// control's test-only flags.
	for transport, want := range map[string]string{"": "--mesh-transport=h2", "auto": "--mesh-transport=auto"} {
		m.MeshTransport = transport
		m.ControlArgs = nil
		if transport == "auto" {
			m.ControlArgs = []string{"--test-only-unanswered-refusals"}
		}
		v, err := mtlsValues(m)
		if err != nil {
			t.Fatal(err)
		}
		stream, err := manifests.Mesh(withMTLS(values(constants.CaptureTProxy), v))
		if err != nil || strings.Count(string(stream), "--mesh-transport=") != 1 || !strings.Contains(string(stream), want) {
			t.Fatalf("MeshTransport %q: want %s once in the install: %v", transport, want, err)
		}
		if got := strings.Contains(string(stream), `- "--test-only-unanswered-refusals"`); got != (transport == "auto") {
			t.Fatalf("MeshTransport %q: control flag in the install %v, want %v", transport, got, transport == "auto")
		}
	}
	m.MeshTransport, m.ControlArgs = "", nil

	// A CA directory that cannot be made (its parent is a file) is an
	// error naming the CA; a missing one is made (TestMTLSValuesMakeTheCAAgentsShare).
	file := filepath.Join(dir, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	m.CADir = filepath.Join(file, "ca")
	if _, err := mtlsValues(m); err == nil || !strings.Contains(err.Error(), "CA") {
		t.Fatalf("a CA that cannot be made: %v", err)
	}
}

func withMTLS(v manifests.Values, m *manifests.MTLS) manifests.Values {
	v.MTLS = m
	return v
}

// Exactly one aether-proxy on the node, or no figure.
func TestOneProxyCPU(t *testing.T) {
	line := "77 (aether-proxy) S 1 77 77 0 -1 4194560 900 0 0 0 120 30 0 0 20 0 9 0 12345 0 0"
	if d, err := oneProxyCPU([]byte(line+"\n"), "w1"); err != nil || d != 1500*time.Millisecond {
		t.Fatalf("one proxy: %v, %v", d, err)
	}
	for stats, want := range map[string]string{"": "0 aether-proxy processes on w1", line + "\n" + line + "\n": "2 aether-proxy processes on w1"} {
		if _, err := oneProxyCPU([]byte(stats), "w1"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", stats, err, want)
		}
	}
}

// The node command that reads the access log: nothing before the proxy's
// first request, the file after; the path is the kind node's own.
func TestAccessLogCommand(t *testing.T) {
	if got := accessLogPath("aether-worker2"); got != "/var/log/aether/access-aether-worker2.log" {
		t.Fatalf("path %s", got)
	}
	path := filepath.Join(t.TempDir(), "access-w1.log")
	read := func() string {
		out, err := osexec.Command("sh", "-c", catIfPresent, "sh", path).Output()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return string(out)
	}
	if got := read(); got != "" {
		t.Fatalf("no log yet: %q", got)
	}
	if err := os.WriteFile(path, []byte(`{"protocol":"HTTP/3.0"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := read(); got != `{"protocol":"HTTP/3.0"}`+"\n" {
		t.Fatalf("the log: %q", got)
	}
}

// TestMTLSValuesMakeTheCAAgentsShare: the eastwest suite names a CA
// directory and leaves it to the agents, as the embedded cluster's agents
// make it on first use; on kind the agents get the CA as a Secret, so the
// provider makes it. Its first run on kind failed with "the CA the agents
// sign with: open …/ca/ca.pem: no such file or directory".
func TestMTLSValuesMakeTheCAAgentsShare(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ca")
	m := &cluster.MTLS{TrustDomain: "aether.test", MeshDomain: "mesh.test", CADir: dir, UpstreamCert: "per-source"}
	v, err := mtlsValues(m)
	if err != nil {
		t.Fatal(err)
	}
	again, err := mtlsValues(m)
	if err != nil {
		t.Fatal(err)
	}
	if v.CA == "" || v.CA != again.CA {
		t.Fatalf("the CA handed to the agents is empty or changes between installs (%d then %d bytes)", len(v.CA), len(again.CA))
	}
	ca, err := identity.LoadOrCreateCA(dir, identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil || ca.TrustDomain().String() != "aether.test" {
		t.Fatalf("the CA in %s: %v, %v", dir, ca, err)
	}
}
