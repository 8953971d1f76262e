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

// runFolderSuite is a suite whose tests open a run folder and end rc.
type runFolderSuite struct {
	t   *testing.T
	rc  int
	dir string
}

func (s *runFolderSuite) Run() int {
	_, s.dir, _ = Open("probe", "AETHER_PROVIDER_TEST_BIN")
	if _, err := os.Stat(s.dir); err != nil {
		s.t.Fatalf("Open's run folder %q: %v", s.dir, err)
	}
	return s.rc
}

// TestEmbeddedSuiteSettlesItsRunFolder: the suites on EmbeddedMain
// (lifecycle, mtlspool, multicluster) settle their run folders as Main's
// do; before, every run of theirs, passed or failed, left one in the
// temporary folder and a failure did not name it.
func TestEmbeddedSuiteSettlesItsRunFolder(t *testing.T) {
	t.Setenv("AETHER_REPORT_DIR", "")
	t.Setenv("AETHER_CLUSTER", "netns")
	t.Setenv("AETHER_PROVIDER_TEST_BIN", t.TempDir())
	for _, rc := range []int{0, 1} {
		kept = nil
		s := &runFolderSuite{t: t, rc: rc}
		if got := runEmbedded(s, "probe", "nothing"); got != rc {
			t.Fatalf("runEmbedded returned %d, the tests %d", got, rc)
		}
		_, err := os.Stat(s.dir)
		switch {
		case rc == 0 && !os.IsNotExist(err):
			t.Errorf("a passing embedded suite left its run folder %s (%v)", s.dir, err)
		case rc != 0 && err != nil:
			t.Errorf("a failing embedded suite's run folder %s is gone: %v", s.dir, err)
		}
		os.RemoveAll(s.dir)
	}
}
