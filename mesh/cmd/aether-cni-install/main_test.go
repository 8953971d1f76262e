package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/mesh/cniinstall"
)

// --check is the DaemonSet's readiness probe: it fails until the node
// carries the entry these very flags would install, and never writes.
func TestCheckIsReadyOnlyForTheInstalledMode(t *testing.T) {
	root := t.TempDir()
	bin, conf := filepath.Join(root, "bin"), filepath.Join(root, "net.d")
	for _, d := range []string{bin, conf} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	src := filepath.Join(root, "aether-cni")
	if err := os.WriteFile(src, []byte("#!plugin"), 0o755); err != nil {
		t.Fatal(err)
	}
	conflist := `{"cniVersion":"1.0.0","name":"kindnet","plugins":[{"type":"ptp"}]}`
	if err := os.WriteFile(filepath.Join(conf, "10-kindnet.conflist"), []byte(conflist), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := func(mode string, extra ...string) []string {
		return append([]string{"--binary", src, "--cni-bin-dir", bin, "--cni-conf-dir", conf, "--capture-mode", mode}, extra...)
	}
	if err := run(flags("tproxy", "--check")); err == nil {
		t.Fatal("--check passed before anything was installed")
	}
	if b, _ := os.ReadFile(filepath.Join(conf, "10-kindnet.conflist")); string(b) != conflist {
		t.Fatal("--check wrote the conflist")
	}
	c := cniinstall.Config{Binary: src, BinDir: bin, ConfDir: conf,
		Plugin: map[string]any{"captureMode": "tproxy", "excludeNamespaces": []any{"kube-system"}}}
	if _, err := cniinstall.Install(c); err != nil {
		t.Fatal(err)
	}
	if err := run(flags("tproxy", "--check")); err != nil {
		t.Fatalf("--check after the install with the same flags: %v", err)
	}
	if err := run(flags("redirect", "--check")); err == nil {
		t.Fatal("--check for redirect passed on a node installed in tproxy mode")
	}
	if err := run(flags("ebpf", "--check")); err == nil || !strings.Contains(err.Error(), "--capture-mode") {
		t.Fatalf("an unknown mode: %v", err)
	}
}
