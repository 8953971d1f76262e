package netns

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/rigs/privileged"
)

// A child started with a parent-death signal outlives the threads its
// starter's process ends. The kernel signals a child when the thread that
// forked it exits, and Go ends a thread whenever a goroutine exits locked
// to it; a child forked on a pooled thread was SIGKILLed mid-suite when a
// netns reader later ended that thread.
func TestStartedChildOutlivesEndedThreads(t *testing.T) {
	privileged.Require(t)
	ns, err := Create("t-pdeath")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup() })
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := ns.Start(cmd); err != nil {
		t.Fatal(err)
	}

	// End many threads, while this goroutine waits and so frees its own
	// thread (which may be the one Start ran on) to run one of them.
	// In rounds, with pauses in which idle threads are woken and parked
	// again, so that the one Start ran on, wherever it is, runs one.
	const rounds, perRound = 4, 250
	ended := map[int]bool{}
	for range rounds {
		tids := make(chan int, perRound)
		var wg sync.WaitGroup
		for range perRound {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runtime.LockOSThread() // never unlocked: the thread ends
				tids <- unix.Gettid()
			}()
		}
		wg.Wait()
		close(tids)
		for tid := range tids {
			ended[tid] = true
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The witness that threads did end: each locked goroutine's thread
	// died with it, so no two of them shared one.
	if n := rounds * perRound; len(ended) != n {
		t.Fatalf("%d locked goroutines ran on %d threads: threads did not end", n, len(ended))
	}
	// Polled, not waited on: a thread blocked in wait4 would be one no
	// locked goroutine could end.
	time.Sleep(200 * time.Millisecond)
	var ws unix.WaitStatus
	pid, err := unix.Wait4(cmd.Process.Pid, &ws, unix.WNOHANG, nil)
	if err != nil {
		t.Fatalf("wait4: %v", err)
	}
	if pid == cmd.Process.Pid {
		t.Fatalf("the child died when %d of the process's threads ended: %s", len(ended), waitStatus(ws))
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

func waitStatus(ws unix.WaitStatus) string {
	if ws.Signaled() {
		return "killed by " + unix.SignalName(ws.Signal())
	}
	return "exited " + strconv.Itoa(ws.ExitStatus())
}

// A spawner that cannot bring its thread home refuses that start, leaves
// nothing of it running, keeps the children it forked before alive (its
// thread parks rather than ends) and hands over: the next start is served,
// inside its namespace.
func TestStuckSpawnerHandsOver(t *testing.T) {
	privileged.Require(t)
	ns, err := Create("t-stuck")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = Cleanup() })
	sleep := func() *exec.Cmd {
		c := exec.Command("sleep", "60")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return c
	}
	before := sleep()
	if err := ns.Start(before); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-before.Process.Pid, syscall.SIGKILL); _ = before.Wait() })

	// The way in works, the way home fails once: the thread stays inside.
	calls := 0
	setns = func(h vnetns.NsHandle) error {
		calls++
		if calls == 2 {
			return errors.New("injected: setns home failed")
		}
		return vnetns.Set(h)
	}
	stuck := sleep()
	err = ns.Start(stuck)
	setns = vnetns.Set
	if err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("a start whose thread could not come home returned %v", err)
	}
	if stuck.Process == nil {
		t.Fatal("the injected failure came before the fork: the way home was not what failed")
	}
	gone := false
	for range 100 {
		if unix.Kill(stuck.Process.Pid, 0) != nil {
			gone = true
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !gone {
		t.Errorf("the refused start's child %d is still running", stuck.Process.Pid)
	}

	after := sleep()
	started := make(chan error, 1)
	go func() { started <- ns.Start(after) }()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("the start after a stuck spawner: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the start after a stuck spawner had no answer in 10 s: no spawner took over")
	}
	t.Cleanup(func() { _ = syscall.Kill(-after.Process.Pid, syscall.SIGKILL); _ = after.Wait() })
	want, err := ns.Inode()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d/ns/net", after.Process.Pid), &st); err != nil {
		t.Fatal(err)
	}
	if st.Ino != want {
		t.Errorf("the fresh spawner's child is in netns inode %d, want the namespace's %d", st.Ino, want)
	}
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(before.Process.Pid, &ws, unix.WNOHANG, nil); err != nil || pid != 0 {
		t.Errorf("the child forked before the stuck start died (%v, %s)", err, waitStatus(ws))
	}
}
