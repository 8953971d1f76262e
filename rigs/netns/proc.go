package netns

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"syscall"

	vnetns "github.com/vishvananda/netns"
)

// Start starts cmd with the namespace as its network namespace. The child
// is forked from the spawner thread while it is inside the namespace, and
// inherits it. The process is tracked: LeakCheck fails while it is still
// running, and Delete kills it with the namespace.
func (n *NS) Start(cmd *exec.Cmd) error {
	if err := spawn(n, cmd); err != nil {
		return fmt.Errorf("failed to start %s in netns %q: %w", cmd.Path, n.Name, err)
	}
	TrackProcess(cmd.Process.Pid, fmt.Sprintf("%s in %s", cmd.Path, n.Name))
	return nil
}

// The spawner is one OS thread, locked for the life of the process, that
// forks every child a rig starts. The kernel sends a child its parent-death
// signal (SysProcAttr.Pdeathsig, which the rigs set to SIGKILL so nothing
// outlives a crashed run) when the thread that forked it exits, not the
// process. Go ends a thread whenever a goroutine exits while locked to it,
// as a netns reader that never restores its thread does; a child forked on
// a pooled thread was SIGKILLed mid-run when unrelated code later ended
// that thread. The spawner's thread never returns to the pool and never
// exits.
var (
	spawnOnce sync.Once
	spawnReqs = make(chan spawnReq)
)

type spawnReq struct {
	ns   *NS
	cmd  *exec.Cmd
	done chan error
}

func spawn(n *NS, cmd *exec.Cmd) error {
	spawnOnce.Do(func() { go spawner() })
	done := make(chan error, 1)
	spawnReqs <- spawnReq{ns: n, cmd: cmd, done: done}
	return <-done
}

// spawner serves spawnReqs from its own thread, locked and never
// unlocked. Whichever goroutine is the spawner reads the one channel, so
// a caller never waits on a spawner that has stopped reading.
func spawner() {
	runtime.LockOSThread() // never unlocked: see the comment above
	home, err := vnetns.Get()
	if err != nil {
		// Nothing was forked on this thread, so it may end with this
		// goroutine; the next request meets a fresh spawner.
		req := <-spawnReqs
		go spawner()
		req.done <- fmt.Errorf("the spawner thread failed to read its netns: %w", err)
		return
	}
	for req := range spawnReqs {
		stuck, err := forkIn(home, req)
		if stuck {
			// The thread is left in another namespace. It must not exit
			// (its children would die with it) nor fork again: a fresh
			// spawner takes over the channel and this one parks for good.
			go spawner()
			req.done <- err
			select {}
		}
		req.done <- err
	}
}

// setns moves the calling thread; a test makes its way home fail.
var setns = vnetns.Set

// forkIn starts req's command inside req's namespace from the calling
// thread and brings the thread back home. stuck says it could not.
func forkIn(home vnetns.NsHandle, req spawnReq) (stuck bool, err error) {
	target, err := vnetns.GetFromPath(req.ns.Path)
	if err != nil {
		return false, fmt.Errorf("failed to open netns %q: %w", req.ns.Path, err)
	}
	defer target.Close()
	if err := setns(target); err != nil {
		return false, fmt.Errorf("failed to enter netns %q: %w", req.ns.Name, err)
	}
	serr := req.cmd.Start()
	if err := setns(home); err != nil {
		if serr == nil {
			// Its caller is told it failed, so nothing of it may stay:
			// its whole group goes, and it is reaped off this thread
			// (Wait may wait on its output's copying).
			pid := req.cmd.Process.Pid
			if a := req.cmd.SysProcAttr; a != nil && a.Setpgid {
				pid = -pid
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			go func() { _ = req.cmd.Wait() }()
		}
		return true, errors.Join(serr, fmt.Errorf("failed to leave netns %q: %w", req.ns.Name, err))
	}
	return false, serr
}
