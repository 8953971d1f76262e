package netns

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/aether-mesh/aether/rigs/privileged"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// envIsolated carries, to the child isolated starts, the test it must run.
const envIsolated = "AETHER_NETNS_ISOLATED_TEST"

// isolated runs the calling test again in a child process with a private
// mount namespace and an empty tmpfs on /run, so that what the test does to
// /run/netns (a tool re-mounting it included) never reaches the /run/netns
// that every other rig on the machine shares. It returns true in the child,
// where the test body runs, and false in the parent once the child has run
// the test and passed.
func isolated(t *testing.T) bool {
	t.Helper()
	privileged.Require(t)
	if os.Getenv(envIsolated) == t.Name() {
		if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
			t.Fatalf("failed to mount a private tmpfs on /run: %v", err)
		}
		return true
	}
	var pattern []string
	for _, part := range strings.Split(t.Name(), "/") {
		pattern = append(pattern, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(pattern, "/"), "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envIsolated+"="+t.Name())
	// Go makes / private (MS_REC) after unsharing the mount namespace, so
	// nothing mounted in the child propagates back.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())) {
		t.Fatalf("isolated run of %s failed (%v):\n%s", t.Name(), err, out)
	}
	if testing.Verbose() {
		t.Logf("isolated run:\n%s", out)
	}
	return false
}

// mountForeign mounts a fresh network namespace at BindDir/name the way a
// rig without prepareBindDir did: onto a plain file in whatever BindDir is.
func mountForeign(t *testing.T, name string) string {
	t.Helper()
	if err := os.MkdirAll(BindDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(BindDir, name)
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	h, err := vnetns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
	merr := unix.Mount(self, path, "none", unix.MS_BIND, "")
	if err := vnetns.Set(orig); err != nil {
		t.Fatalf("failed to return to the original netns: %v", err)
	}
	if merr != nil {
		t.Fatal(merr)
	}
	return path
}

// deadPID returns the id of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	child := exec.Command("true")
	if err := child.Run(); err != nil {
		t.Fatal(err)
	}
	return child.Process.Pid
}

func ipNetns(t *testing.T, args ...string) string {
	t.Helper()
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Fatalf("iproute2's ip is not on PATH; this test runs `ip netns` as a foreign tool: %v", err)
	}
	out, err := exec.Command(ip, append([]string{"netns"}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// nsfsMountsOf lists the nsfs mounts whose mount point is path, hidden ones
// included.
func nsfsMountsOf(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[4] == path && strings.Contains(line, " - nsfs ") {
			out = append(out, line)
		}
	}
	return out
}

// assertGone checks that nothing of the namespace at path is left: no entry,
// no mount (visible or hidden).
func assertGone(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); err == nil {
		t.Errorf("%s still exists", path)
	}
	if m := nsfsMountsOf(t, path); len(m) > 0 {
		t.Errorf("%s is still mounted:\n%s", path, strings.Join(m, "\n"))
	}
}

// The reproduction: a rig holds namespaces (one with a process in
// it), then another tool re-mounts /run/netns; teardown must still remove
// everything. `ip netns add` on a fresh /run is the real-world trigger.
func TestTeardownAfterForeignRemount(t *testing.T) {
	remounts := map[string]func(t *testing.T){
		"ip netns add": func(t *testing.T) { ipNetns(t, "add", Name("ip")) },
		"recursive bind over itself": func(t *testing.T) {
			if err := unix.Mount(BindDir, BindDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
				t.Fatal(err)
			}
		},
		"plain bind over itself": func(t *testing.T) {
			if err := unix.Mount(BindDir, BindDir, "none", unix.MS_BIND, ""); err != nil {
				t.Fatal(err)
			}
		},
		"lazy unmount": func(t *testing.T) {
			if err := unix.Unmount(BindDir, unix.MNT_DETACH); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, remount := range remounts {
		t.Run(name, func(t *testing.T) {
			if !isolated(t) {
				return
			}
			a, err := Create("t-a")
			if err != nil {
				t.Fatal(err)
			}
			b, err := Create("t-b")
			if err != nil {
				t.Fatal(err)
			}
			sleeper := exec.Command("sleep", "60")
			if err := a.Start(sleeper); err != nil {
				t.Fatal(err)
			}
			go func() { _ = sleeper.Wait() }()
			remount(t)
			if err := Cleanup(); err != nil {
				t.Fatalf("teardown after the re-mount: %v", err)
			}
			assertGone(t, a.Path)
			assertGone(t, b.Path)
			if _, err := os.Stat(filepath.Join(BindDir, Name("ip"))); err == nil {
				ipNetns(t, "del", Name("ip"))
			}
			if err := LeakCheck(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A crashed run's namespace is swept after `ip netns add` and a re-mount.
func TestSweepAfterForeignRemount(t *testing.T) {
	if !isolated(t) {
		return
	}
	orphan, err := createNamed(Prefix + strconv.Itoa(deadPID(t)) + "-t-orphan")
	if err != nil {
		t.Fatal(err)
	}
	// The crashed owner's descriptor died with it.
	orphan.mnt.Close()
	orphan.mnt = nil
	untrack(orphan)
	ipNetns(t, "add", Name("ip"))
	if err := unix.Mount(BindDir, BindDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		t.Fatal(err)
	}
	removed, err := Sweep()
	if err != nil {
		t.Fatalf("sweep after the re-mount: %v", err)
	}
	if strings.Join(removed, ",") != orphan.Name {
		t.Fatalf("swept %v, want exactly %s", removed, orphan.Name)
	}
	assertGone(t, orphan.Path)
	if out := ipNetns(t, "list"); strings.Contains(out, "invalid") || !strings.Contains(out, Name("ip")) {
		t.Fatalf("ip netns list after the sweep:\n%s", out)
	}
	ipNetns(t, "del", Name("ip"))
}

// A namespace some other program mounted while /run/netns was a plain
// directory stays removable by that program (as `ip netns del` removes it)
// after a rig turns /run/netns into a mount point.
func TestPrepareLeavesForeignNamespacesRemovable(t *testing.T) {
	if !isolated(t) {
		return
	}
	foreign := mountForeign(t, Prefix+strconv.Itoa(deadPID(t))+"-t-foreign")
	if _, err := Create("t-rig"); err != nil {
		t.Fatal(err)
	}
	defer Cleanup()
	if out := ipNetns(t, "list"); strings.Contains(out, "invalid") {
		t.Fatalf("ip netns list after the rig's first namespace:\n%s", out)
	}
	if err := unix.Unmount(foreign, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(foreign); err != nil {
		t.Fatalf("the foreign namespace cannot be removed as `ip netns del` removes it: %v", err)
	}
	assertGone(t, foreign)
}

// The state no path reaches: a namespace mounted in a plain /run/netns,
// then covered by `ip netns add`. The sweep's error names the mount and the
// way out, and the way out works.
func TestHiddenMountErrorNamesTheWayOut(t *testing.T) {
	if !isolated(t) {
		return
	}
	hidden := mountForeign(t, Prefix+strconv.Itoa(deadPID(t))+"-t-hidden")
	ipNetns(t, "add", Name("ip"))
	_, err := Sweep()
	if err == nil {
		t.Fatal("sweep removed a namespace mounted beneath the cover; the test no longer builds the hidden state")
	}
	for _, want := range []string{hidden, "findmnt -R " + BindDir, "umount --lazy " + BindDir} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("sweep error does not say %q:\n%v", want, err)
		}
	}
	if err := unix.Unmount(BindDir, unix.MNT_DETACH); err != nil {
		t.Fatal(err)
	}
	removed, err := Sweep()
	if err != nil {
		t.Fatalf("sweep after the way out: %v", err)
	}
	if !strings.Contains(strings.Join(removed, ","), filepath.Base(hidden)) {
		t.Fatalf("swept %v, want %s among them", removed, filepath.Base(hidden))
	}
	assertGone(t, hidden)
	// ip's entry lost its mount with the cover; remove the empty file.
	_ = os.Remove(filepath.Join(BindDir, Name("ip")))
}
