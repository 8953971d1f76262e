package pairstate

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// TestWriteOnAFullDiskKeepsTheOldFile writes the state on a real (tmpfs)
// disk too small for it: Write fails naming ENOSPC and the file it was
// writing, the state file on disk is still the last one written whole,
// and no temporary file is left to fill the disk further. Once there is
// room, the next Write lands.
func TestWriteOnAFullDiskKeepsTheOldFile(t *testing.T) {
	privileged.Require(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=8k"); err != nil {
		t.Fatalf("mount an 8 KiB tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })

	old := State{Live: []xdsnames.Twin{webToAPI}}
	if err := Write(dir, old); err != nil {
		t.Fatal(err)
	}
	// A demand set larger than the disk: about 300 pairs of ~40 bytes.
	var big State
	for i := range 300 {
		big.Live = append(big.Live, xdsnames.Twin{Service: fmt.Sprintf("svc-%03d", i), Namespace: "shop", SA: "web", SANamespace: "shop"})
	}
	err := Write(dir, big)
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Write on a full disk = %v, want ENOSPC", err)
	}
	t.Logf("the refusal: %v", err)
	entries, rerr := os.ReadDir(dir)
	if rerr != nil || len(entries) != 1 || entries[0].Name() != File {
		t.Errorf("state dir holds %v (%v) after the failed write, want %s alone", entries, rerr, File)
	}
	got, lerr := Load(dir, time.Now())
	if lerr != nil || !reflect.DeepEqual(got, old) {
		t.Errorf("Load after the failed write = %+v, %v; want the old state %+v", got, lerr, old)
	}

	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_REMOUNT, "size=256k"); err != nil {
		t.Fatalf("grow the tmpfs: %v", err)
	}
	if err := Write(dir, big); err != nil {
		t.Fatalf("Write once the disk has room: %v", err)
	}
	if got, err := Load(dir, time.Now()); err != nil || len(got.Live) != len(big.Live) {
		t.Errorf("Load = %d pairs, %v; want %d", len(got.Live), err, len(big.Live))
	}
}
