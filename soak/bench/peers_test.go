package bench

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/identity"
)

func testPeerConfig(dir string) PeerConfig {
	return PeerConfig{Listen: netip.MustParseAddrPort("0.0.0.0:19080"), Upstream: netip.MustParseAddrPort("10.243.0.3:19443"),
		ServerName: "api.demo.mesh.test", Cert: filepath.Join(dir, "web.pem"), Key: filepath.Join(dir, "web-key.pem"),
		CertKey: filepath.Join(dir, "web-both.pem"), Bundle: filepath.Join(dir, "bundle.pem"), Threads: 2, Dir: dir}
}

func TestRenderPeerFillsEveryField(t *testing.T) {
	c := testPeerConfig("/run/x")
	for _, p := range []Peer{HAProxy, Nginx} {
		for _, s := range []Side{Out, In} {
			b, err := RenderPeer(p, s, c)
			if err != nil {
				t.Fatalf("%s %s: %v", p, s, err)
			}
			text := string(b)
			if strings.Contains(text, "<no value>") || strings.Contains(text, "{{") {
				t.Errorf("%s %s: unrendered field:\n%s", p, s, text)
			}
			for _, want := range []string{"19080", "10.243.0.3:19443", "/run/x/bundle.pem"} {
				if !strings.Contains(text, want) {
					t.Errorf("%s %s: %q missing:\n%s", p, s, want, text)
				}
			}
			// The source side presents the SVID and checks the
			// destination's name; the destination side requires a client
			// certificate.
			switch {
			case s == Out && !strings.Contains(text, "api.demo.mesh.test"):
				t.Errorf("%s out: the destination's name is not verified:\n%s", p, text)
			case s == In && p == HAProxy && !strings.Contains(text, "verify required"):
				t.Errorf("haproxy in: no client certificate required:\n%s", text)
			case s == In && p == Nginx && !strings.Contains(text, "ssl_verify_client on"):
				t.Errorf("nginx in: no client certificate required:\n%s", text)
			}
		}
	}
}

func TestRenderPeerRefusesWhatIsMissing(t *testing.T) {
	c := testPeerConfig("/run/x")
	c.Bundle, c.Threads = "", 0
	_, err := RenderPeer(HAProxy, Out, c)
	if err == nil || !strings.Contains(err.Error(), "Bundle, Threads unset") {
		t.Errorf("err = %v, want it to name Bundle and Threads", err)
	}
	if _, err := RenderPeer("envoy", Out, testPeerConfig("/x")); err == nil || !strings.Contains(err.Error(), `unknown peer "envoy"`) {
		t.Errorf("unknown peer: err = %v", err)
	}
	if _, err := RenderPeer(Nginx, "middle", testPeerConfig("/x")); err == nil || !strings.Contains(err.Error(), `unknown side "middle"`) {
		t.Errorf("unknown side: err = %v", err)
	}
}

// TestPeersAcceptTheirConfigs has the installed HAProxy and nginx check
// the rendered configurations (haproxy -c, nginx -t), with certificates
// from the mesh's CA. Without the programs it skips: `make bench`
// installs them.
func TestPeersAcceptTheirConfigs(t *testing.T) {
	dir := t.TempDir()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	svid, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "web"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	chain, key, err := svid.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := ca.Bundle().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c := testPeerConfig(dir)
	for path, b := range map[string][]byte{c.Cert: chain, c.Key: key, c.CertKey: append(append([]byte{}, chain...), key...), c.Bundle: bundle} {
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []Peer{HAProxy, Nginx} {
		if _, err := exec.LookPath(string(p)); err != nil {
			t.Logf("%s not installed: not checked", p)
			continue
		}
		for _, s := range []Side{Out, In} {
			pc := c
			pc.Dir = filepath.Join(dir, string(p)+"-"+string(s))
			_, argv, err := WritePeer(p, s, pc)
			if err != nil {
				t.Fatal(err)
			}
			check := append([]string{argv[0], "-c"}, argv[1:]...)
			if p == Nginx {
				check = append([]string{argv[0], "-t"}, argv[1:]...)
			}
			out, err := exec.Command(check[0], check[1:]...).CombinedOutput()
			if err != nil {
				t.Errorf("%s %s: %v refuses its config: %v\n%s", p, s, check, err, out)
			}
		}
	}
}
