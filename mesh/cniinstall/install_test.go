package cniinstall

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// kindnet's conflist as kind writes it on every node.
const kindnet = `{
  "cniVersion": "0.4.0",
  "name": "kindnet",
  "plugins": [
    {"type": "ptp", "ipMasq": false, "ipam": {"type": "host-local", "dataDir": "/run/cni-ipam-state",
      "routes": [{"dst": "0.0.0.0/0"}], "ranges": [[{"subnet": "10.244.1.0/24"}]]}, "mtu": 1500},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}`

func types(t *testing.T, conflist []byte) []string {
	t.Helper()
	var doc struct {
		Plugins []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(conflist, &doc); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range doc.Plugins {
		out = append(out, p["type"].(string))
	}
	return out
}

func TestChainAppendsOnceAndUnchainRestores(t *testing.T) {
	plugin := map[string]any{"captureMode": "tproxy", "excludeNamespaces": []any{"kube-system"}}
	once, changed, err := Chain([]byte(kindnet), plugin)
	if err != nil || !changed {
		t.Fatalf("Chain = changed %v, %v", changed, err)
	}
	if got := strings.Join(types(t, once), ","); got != "ptp,portmap,aether-cni" {
		t.Fatalf("plugins after Chain: %s", got)
	}
	twice, changed, err := Chain(once, plugin)
	if err != nil || changed {
		t.Fatalf("a second Chain with the same entry: changed %v, %v", changed, err)
	}
	if got := strings.Join(types(t, twice), ","); got != "ptp,portmap,aether-cni" {
		t.Fatalf("plugins after a second Chain: %s", got)
	}
	// A new mode replaces the entry rather than adding one.
	redirect, changed, err := Chain(twice, map[string]any{"captureMode": "redirect"})
	if err != nil || !changed || strings.Count(string(redirect), PluginType) != 1 || !strings.Contains(string(redirect), `"redirect"`) {
		t.Fatalf("Chain with a new mode: changed %v, %v:\n%s", changed, err, redirect)
	}
	back, changed, err := Unchain(redirect)
	if err != nil || !changed {
		t.Fatalf("Unchain = changed %v, %v", changed, err)
	}
	if got := strings.Join(types(t, back), ","); got != "ptp,portmap" {
		t.Fatalf("plugins after Unchain: %s", got)
	}
}

func TestChainRefusesWhatItCannotChainOnto(t *testing.T) {
	for name, in := range map[string]string{
		"not JSON":   `{"plugins": [`,
		"no plugins": `{"cniVersion": "1.0.0", "name": "x", "type": "bridge"}`,
	} {
		if _, _, err := Chain([]byte(in), nil); err == nil {
			t.Errorf("%s: chained", name)
		}
	}
	if _, _, err := Chain([]byte(kindnet), map[string]any{"type": "other"}); err == nil || !strings.Contains(err.Error(), `"type"`) {
		t.Errorf("an entry overriding type: %v", err)
	}
}

func TestInstallAndUninstallOnANodesDirs(t *testing.T) {
	root := t.TempDir()
	bin, conf := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	for _, d := range []string{bin, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(root, "aether-cni.src")
	if err := os.WriteFile(src, []byte("#!plugin"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{Binary: src, BinDir: bin, ConfDir: conf, Plugin: map[string]any{"captureMode": "tproxy"}}
	if _, err := Install(c); err == nil || !strings.Contains(err.Error(), "no CNI config") {
		t.Fatalf("Install before the network plugin wrote its config: %v", err)
	}
	active := filepath.Join(conf, "10-kindnet.conflist")
	if err := os.WriteFile(active, []byte(kindnet), 0o644); err != nil {
		t.Fatal(err)
	}
	// A later file is not the active one and stays untouched.
	later := filepath.Join(conf, "99-other.conflist")
	if err := os.WriteFile(later, []byte(kindnet), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Installed(c); err == nil {
		t.Fatal("Installed before Install")
	}
	if changed, err := Install(c); err != nil || !changed {
		t.Fatalf("Install = changed %v, %v", changed, err)
	}
	if err := Installed(c); err != nil {
		t.Fatalf("Installed after Install: %v", err)
	}
	other := c
	other.Plugin = map[string]any{"captureMode": "redirect"}
	if err := Installed(other); err == nil || !strings.Contains(err.Error(), "10-kindnet.conflist") {
		t.Fatalf("Installed for another mode: %v", err)
	}
	if changed, err := Install(c); err != nil || changed {
		t.Fatalf("a second Install = changed %v, %v; want no rewrite", changed, err)
	}
	st, err := os.Stat(filepath.Join(bin, PluginType))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("installed binary: %v, %v; want mode 0755", st, err)
	}
	b, _ := os.ReadFile(active)
	if got := strings.Join(types(t, b), ","); got != "ptp,portmap,aether-cni" {
		t.Fatalf("active conflist plugins: %s", got)
	}
	if b, _ := os.ReadFile(later); string(b) != kindnet {
		t.Fatal("a conflist that is not the active one was rewritten")
	}
	if err := Uninstall(c); err != nil {
		t.Fatal(err)
	}
	b, _ = os.ReadFile(active)
	if got := strings.Join(types(t, b), ","); got != "ptp,portmap" {
		t.Fatalf("plugins after Uninstall: %s", got)
	}
	if _, err := os.Stat(filepath.Join(bin, PluginType)); !os.IsNotExist(err) {
		t.Fatalf("the binary survived Uninstall: %v", err)
	}
}

// A conflist that cannot be chained onto leaves the node untouched: no
// binary, no rewrite.
func TestInstallOntoABadConflistWritesNothing(t *testing.T) {
	root := t.TempDir()
	bin, conf := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	for _, d := range []string{bin, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(root, "aether-cni.src")
	if err := os.WriteFile(src, []byte("#!plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := `{"cniVersion": "1.0.0", "name": "x", "plugins": []}`
	active := filepath.Join(conf, "10-x.conflist")
	if err := os.WriteFile(active, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Install(Config{Binary: src, BinDir: bin, ConfDir: conf}); err == nil || !strings.Contains(err.Error(), active) {
		t.Fatalf("Install onto an empty plugin list: %v", err)
	}
	if entries, _ := os.ReadDir(bin); len(entries) != 0 {
		t.Fatalf("the bin dir got %d entries from a failed install", len(entries))
	}
	if b, _ := os.ReadFile(active); string(b) != bad {
		t.Fatal("the conflist was rewritten by a failed install")
	}
}

func TestActiveConflistRefusesASinglePluginFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "05-bridge.conf"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10-kindnet.conflist"), []byte(kindnet), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ActiveConflist(dir); err == nil || !strings.Contains(err.Error(), "05-bridge.conf") {
		t.Fatalf("ActiveConflist with a .conf first: %v", err)
	}
}
