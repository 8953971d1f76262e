package provider

import (
	"os"
	"strings"
	"testing"
)

// TestRunFolderIsKeptWhenTheSuiteFails: outside a report folder, Open's
// run folder goes when the suite passes and stays, named, when it fails,
// so the agents' and proxies' logs of a failure can be read after it.
func TestRunFolderIsKeptWhenTheSuiteFails(t *testing.T) {
	t.Setenv("AETHER_REPORT_DIR", "")
	t.Setenv("AETHER_CLUSTER", "netns")
	// A binaries folder of its own: nothing is built.
	t.Setenv("AETHER_PROVIDER_TEST_BIN", t.TempDir())
	for _, rc := range []int{0, 1} {
		kept = nil
		_, dir, _ := Open("probe", "AETHER_PROVIDER_TEST_BIN")
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("Open's run folder %q: %v", dir, err)
		}
		var out strings.Builder
		settleRunFolders(rc, "probe", &out)
		_, err := os.Stat(dir)
		switch {
		case rc == 0 && !os.IsNotExist(err):
			t.Errorf("a passing suite left its run folder %s (%v)", dir, err)
		case rc != 0 && (err != nil || !strings.Contains(out.String(), dir)):
			t.Errorf("a failing suite's run folder %s: %v, named %q", dir, err, out.String())
		}
		os.RemoveAll(dir)
	}
}
