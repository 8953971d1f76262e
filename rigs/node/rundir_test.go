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

// The proxies' access logs are a run's own record too: a new cluster in a
// used run dir starts with none, and the previous run's are kept aside.
func TestPrepareRunDirMovesAccessLogsAside(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "access", "access-node-a.log")
	if err := os.MkdirAll(filepath.Dir(old), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(old, []byte("{\"status\":200}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := prepareRunDir(dir); err != nil {
		t.Fatal(err)
	}
	left, err := os.ReadDir(filepath.Join(dir, "access"))
	if err != nil || len(left) != 0 {
		t.Fatalf("access/ after prepareRunDir holds %v (%v), want an empty folder", left, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "previous", "access", "access-node-a.log")); err != nil || !strings.Contains(string(b), "200") {
		t.Fatalf("the previous run's access log is not kept in previous/: %v", err)
	}
}
