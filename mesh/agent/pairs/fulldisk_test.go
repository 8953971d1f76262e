package pairs

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// TestFullStateDiskIsCountedAndServed: with the state dir on a full disk
// (a real tmpfs filled to the last byte), an admitted pair is still live
// and served from memory, the failed rewrite is counted as ENOSPC, and
// the state file on disk is still the last one written whole. Once the
// disk has room, the next change lands on disk.
func TestFullStateDiskIsCountedAndServed(t *testing.T) {
	privileged.Require(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8k"); err != nil {
		t.Fatalf("mount an 8 KiB tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	persist(t, dir, []xdsnames.Twin{tA}, nil)
	// The rest of the disk, filled: a file grown until the disk refuses.
	fill(t, dir)

	reg := prometheus.NewRegistry()
	s := newSet(t, dir, Options{Registerer: reg})
	s.Admit(tB)
	s.Flush()
	if !s.Live(tA) || !s.Live(tB) {
		t.Fatalf("Live %s %v, %s %v: want both served from memory", twinA, s.Live(tA), twinB, s.Live(tB))
	}
	if n := testutil.ToFloat64(s.metrics.stateWrite.WithLabelValues("ENOSPC")); n != 1 {
		t.Errorf("aether_agent_pair_state_write_errors_total{reason=ENOSPC} = %v, want 1", n)
	}
	if live, _ := persisted(t, s); len(live) != 1 || live[0] != twinA {
		t.Errorf("state file after the failed rewrite holds %v, want the last whole one, [%s]", live, twinA)
	}

	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT, "size=256k"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	tC := xdsnames.Twin{Service: "svc-c", Namespace: "demo", SA: "client", SANamespace: "demo"}
	s.Admit(tC)
	if live, _ := persisted(t, s); len(live) != 3 {
		t.Errorf("state file once the disk has room holds %v, want the three pairs", live)
	}
}

// fill writes a file in dir until the disk is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	f, err := unixCreate(dir + "/fill")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(f)
	buf := make([]byte, 512)
	for {
		if _, err := unix.Write(f, buf); err != nil {
			if err != unix.ENOSPC {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

func unixCreate(path string) (int, error) {
	return unix.Open(path, unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, 0o644)
}
