package h2_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// TestAccessLogOnAFullDiskLosesLinesWhole fills a real (tmpfs) disk with
// the access log: the write that meets the full disk is cut short, so
// its part-line is cut back off, the loss reported as ENOSPC, and the log
// stays one whole JSON line per line written. Once the disk has room the
// log goes on. Without the cut the log would hold a torn line and the
// next line glued to it.
func TestAccessLogOnAFullDiskLosesLinesWhole(t *testing.T) {
	privileged.Require(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=16k"); err != nil {
		t.Fatalf("mount a 16 KiB tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	path := filepath.Join(dir, "access.log")

	al := inboundAccessLog(t, path)
	var lost []*h2.LogError
	lf := &h2.LogFiles{Err: func(err error) {
		le, ok := errors.AsType[*h2.LogError](err)
		if !ok {
			t.Fatalf("a log failure that is not a *LogError: %v", err)
		}
		lost = append(lost, le)
	}}
	t.Cleanup(func() { lf.Close() })
	r := hcm.Record{PeerURI: id("src"), Cluster: "inbound|8080||", Authority: dstAuthority, Protocol: "HTTP/3.0",
		Status: http.StatusOK, Duration: time.Millisecond, BytesReceived: 100, BytesSent: 2}

	written := 0
	for i := 0; i < 1000 && len(lost) == 0; i++ {
		lf.Write(al, r)
		if len(lost) == 0 {
			written++
		}
	}
	if len(lost) == 0 {
		t.Fatal("broken rig: 1000 lines fit a 16 KiB disk")
	}
	le := lost[0]
	if le.Reason() != "ENOSPC" || le.Path != path {
		t.Errorf("the loss: %v (reason %s, path %s), want ENOSPC on %s", le, le.Reason(), le.Path, path)
	}
	if le.Torn == 0 {
		t.Errorf("broken rig: the disk refused a whole line (%v), so no torn write was cut back; the witness needs a short write", le)
	}
	// More lines while the disk is full: each lost whole.
	for range 5 {
		lf.Write(al, r)
	}
	if len(lost) != 6 {
		t.Errorf("%d losses reported for 6 lines on a full disk", len(lost))
	}
	checkWholeLines(t, path, written)

	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT, "size=64k"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	lf.Write(al, r)
	if len(lost) != 6 {
		t.Errorf("a write after the disk had room again was lost: %v", lost[len(lost)-1])
	}
	checkWholeLines(t, path, written+1)
}

// checkWholeLines requires the log at path to be exactly want lines, each
// a JSON object, the last ended by its newline.
func checkWholeLines(t *testing.T, path string, want int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Errorf("the log ends in a torn line: %q", b[max(0, len(b)-80):])
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		n++
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Errorf("line %d is not one JSON object: %v: %q", n, err, sc.Text())
		}
	}
	if n != want {
		t.Errorf("the log holds %d lines, want the %d written whole", n, want)
	}
}

// A request that finishes after the proxy closed its logs (a shutdown,
// a test's cleanup) loses its line, reported as "closed": the file is
// not opened again. Reopened, it appeared under a directory its owner
// was already removing.
func TestWriteAfterCloseOpensNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	var reasons []string
	lf := &h2.LogFiles{Err: func(err error) {
		le, ok := errors.AsType[*h2.LogError](err)
		if !ok {
			t.Fatalf("a log failure that is not a *LogError: %v", err)
		}
		reasons = append(reasons, le.Reason())
	}}
	r := hcm.Record{PeerURI: id("src"), Authority: dstAuthority, Protocol: "HTTP/1.1", Status: http.StatusOK}
	lf.Write(inboundAccessLog(t, path), r)
	if err := lf.Close(); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.log")
	lf.Write(inboundAccessLog(t, path), r)
	lf.Write(inboundAccessLog(t, other), r)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte("\n")); n != 1 {
		t.Fatalf("%s holds %d lines, want the one written before Close", path, n)
	}
	if _, err := os.Stat(other); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a write after Close created %s (stat: %v)", other, err)
	}
	if len(reasons) != 2 || reasons[0] != "closed" || reasons[1] != "closed" {
		t.Fatalf("losses reported %v, want two \"closed\"", reasons)
	}
}
