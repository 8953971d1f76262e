package netns

import (
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/vishvananda/netlink"
)

func TestOwnerParsesNames(t *testing.T) {
	for name, want := range map[string]int{"aeth-123-pod": 123, "aeth-9-x-y": 9} {
		if pid, ok := Owner(name); !ok || pid != want {
			t.Errorf("Owner(%q) = %d, %v; want %d", name, pid, ok, want)
		}
	}
	for _, name := range []string{"cni-1234", "aeth-x-1", "aeth-123", "aeth--1"} {
		if _, ok := Owner(name); ok {
			t.Errorf("Owner(%q) claims a rig namespace", name)
		}
	}
}

func TestCreateVethAndCleanUp(t *testing.T) {
	privileged.Require(t)
	a, err := Create("t-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Create("t-b")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup() })
	if err := Veth(a, "va", b, "vb"); err != nil {
		t.Fatal(err)
	}
	if err := AddAddr(a, "va", netip.MustParsePrefix("10.244.9.1/24")); err != nil {
		t.Fatal(err)
	}
	if err := AddAddr(b, "vb", netip.MustParsePrefix("10.244.9.2/24")); err != nil {
		t.Fatal(err)
	}
	links, err := Links(b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(links, ",") != "lo,vb" {
		t.Fatalf("links in b: %v, want lo,vb", links)
	}
	// Do really runs inside the namespace: the address is visible there and
	// not in the caller's namespace.
	var seen bool
	if err := a.Do(func() error {
		l, err := netlink.LinkByName("va")
		if err != nil {
			return err
		}
		addrs, err := netlink.AddrList(l, netlink.FAMILY_V4)
		seen = err == nil && len(addrs) == 1
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if !seen {
		t.Fatal("address not visible inside the namespace")
	}
	if _, err := netlink.LinkByName("va"); err == nil {
		t.Fatal("va is visible in the root namespace")
	}
	// Traffic crosses the pair: a ping from a reaches b.
	if _, err := exec.LookPath("ping"); err == nil {
		cmd := exec.Command("ping", "-c1", "-W2", "10.244.9.2")
		if err := a.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("ping across the veth failed: %v", err)
		}
	}
	// A leak is seen while the namespaces exist, and gone after cleanup.
	if err := LeakCheck(); err == nil {
		t.Fatal("LeakCheck passed with two live namespaces")
	}
	if err := Cleanup(); err != nil {
		t.Fatal(err)
	}
	if err := LeakCheck(); err != nil {
		t.Fatal(err)
	}
}

func TestSweepRemovesOnlyDeadOwners(t *testing.T) {
	privileged.Require(t)
	// A namespace owned by a process that is certainly dead: a child that
	// has exited and been reaped.
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	dead := child.Process.Pid
	live, err := Create("t-live")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup() })
	// The dead run's namespace, under its owner's name.
	orphanName := Prefix + strconv.Itoa(dead) + "-t-orphan"
	orphan, err := createNamed(orphanName)
	if err != nil {
		t.Fatal(err)
	}
	untrack(orphan)
	removed, err := Sweep()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(removed, ",") != orphanName {
		t.Fatalf("swept %v, want exactly %s", removed, orphanName)
	}
	if _, err := os.Stat(live.Path); err != nil {
		t.Fatalf("sweep removed this run's namespace: %v", err)
	}
}

// An entry whose mount is gone (`ip netns list` calls it invalid) is a plain
// file; its inode number must not be taken for a namespace's, or Delete
// would kill the processes of whichever namespace shares the number.
func TestInodeRefusesAnUnmountedEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "aeth-1-invalid")
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	ino, err := (&NS{Name: filepath.Base(path), Path: path}).Inode()
	if err == nil || !strings.Contains(err.Error(), "not mounted") {
		t.Fatalf("Inode of a plain file = %d, %v; want an error saying it is not mounted", ino, err)
	}
}
