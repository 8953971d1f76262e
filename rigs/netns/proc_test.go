package netns

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

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
		t.Fatalf("the child died when %d of the process's threads ended: %v", len(ended), ws.Signal())
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}
