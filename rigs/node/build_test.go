package node

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The agent the rigs build carries the test-only controls every suite and
// soak runs (the default build of aether-agent has none).
func TestBuiltAgentCarriesTheControls(t *testing.T) {
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := Build(root, dir, "aether-agent"); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(filepath.Join(dir, "aether-agent"), "-h").CombinedOutput()
	for _, f := range []string{"-test-only-quic-resumption", "-test-only-prune-unfetched-since-start", "-test-only-refuse-twin"} {
		if !strings.Contains(string(out), "  "+f+" ") && !strings.Contains(string(out), "  "+f+"\n") {
			t.Errorf("the rig's aether-agent -h lists no %s:\n%s", f, out)
		}
	}
}
