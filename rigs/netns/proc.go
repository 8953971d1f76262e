package netns

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"sync"

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
	spawnMu   sync.Mutex
	spawnReqs chan spawnReq
)

type spawnReq struct {
	ns   *NS
	cmd  *exec.Cmd
	done chan error
}

func spawn(n *NS, cmd *exec.Cmd) error {
	spawnMu.Lock()
	if spawnReqs == nil {
		spawnReqs = make(chan spawnReq)
		go spawner(spawnReqs)
	}
	reqs := spawnReqs
	spawnMu.Unlock()
	done := make(chan error, 1)
	reqs <- spawnReq{ns: n, cmd: cmd, done: done}
	return <-done
}

func spawner(reqs chan spawnReq) {
	runtime.LockOSThread() // never unlocked: see the comment above
	home, herr := vnetns.Get()
	for req := range reqs {
		if herr != nil {
			req.done <- fmt.Errorf("the spawner thread failed to read its netns: %w", herr)
			continue
		}
		stuck, err := forkIn(home, req)
		req.done <- err
		if stuck {
			// The thread is left in another namespace. It must not exit
			// (its children would die with it), nor fork again: a fresh
			// spawner takes over and this one parks for good.
			spawnMu.Lock()
			spawnReqs = nil
			spawnMu.Unlock()
			select {}
		}
	}
}

// forkIn starts req's command inside req's namespace from the calling
// thread and brings the thread back home. stuck says it could not.
func forkIn(home vnetns.NsHandle, req spawnReq) (stuck bool, err error) {
	target, err := vnetns.GetFromPath(req.ns.Path)
	if err != nil {
		return false, fmt.Errorf("failed to open netns %q: %w", req.ns.Path, err)
	}
	defer target.Close()
	if err := vnetns.Set(target); err != nil {
		return false, fmt.Errorf("failed to enter netns %q: %w", req.ns.Name, err)
	}
	serr := req.cmd.Start()
	if err := vnetns.Set(home); err != nil {
		if serr == nil {
			// Its caller is told it failed, so nothing of it is left.
			_ = req.cmd.Process.Kill()
			_ = req.cmd.Wait()
		}
		return true, errors.Join(serr, fmt.Errorf("failed to leave netns %q: %w", req.ns.Name, err))
	}
	return false, serr
}
