package node

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/privileged"
)

// A second cluster in the same run dir starts with empty records and logs:
// a count of deliveries after it is its own. The first run's files are
// kept, moved to previous/.
func TestUpInAUsedRunDirStartsFresh(t *testing.T) {
	privileged.Require(t)
	dir := t.TempDir()
	upDown := func(payload string) {
		t.Helper()
		c, err := Up(context.Background(), Config{Scenario: "testdata/two-nodes.yaml", RunDir: dir, Logf: t.Logf})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}()
		all, err := ReadRecords(c.Pod("default", "echo-a").Record)
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || all[0].Event != "ready" {
			t.Fatalf("a new cluster's record of echo-a holds %+v, want its one ready line", all)
		}
		if payload != "" {
			dst := netip.AddrPortFrom(c.Pod("default", "echo-a").IP, 7001)
			if got := exchange(t, c.Pod("default", "client"), dst, payload); got != "echo-a" {
				t.Fatalf("reply %q, want echo-a", got)
			}
		}
	}
	upDown("first-run")
	upDown("")
	kept, err := os.ReadFile(filepath.Join(dir, "previous", "records", "default~echo-a.jsonl"))
	if err != nil || !strings.Contains(string(kept), "first-run") {
		t.Fatalf("the first run's record is not kept in previous/: %v\n%s", err, kept)
	}
	if _, err := os.Stat(filepath.Join(dir, "previous", "logs", "cni.log")); err != nil {
		t.Fatalf("the first run's CNI log is not kept in previous/: %v", err)
	}
}
