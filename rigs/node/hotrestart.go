package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"
)

// Hot restart timings the rig passes to a proxy's next epoch: Envoy's
// defaults (10 and 15 minutes) are for fleets, not rigs.
const (
	HotRestartDrainTime          = time.Second
	HotRestartParentShutdownTime = 2 * time.Second
)

// HotRestartProxy hot restarts node n's proxy (ARCHITECTURE.md, "Hot
// restart"): it starts the next restart epoch with the running proxy's
// arguments, which takes the listening sockets and the metrics address
// over, drains the running proxy and has it exit HotRestartParentShutdownTime
// after its own listeners are up. It returns once the old proxy has exited
// and the new one serves every listener of the node; from then on
// n.ProxyPID is the new process's. Its log is proxy~<node>~epoch-<N>.log in
// the run's logs. If the new proxy dies first, the old one, never told to
// exit, serves on and the error says why.
func (c *Cluster) HotRestartProxy(ctx context.Context, n *Node) error {
	parent := n.proxyProc()
	if parent == nil || parent.exited() {
		return fmt.Errorf("node %s has no running proxy to hot restart", n.Name)
	}
	epoch := restartEpoch(parent.cmd.Args) + 1
	argv := withRestartEpoch(parent.cmd.Args, epoch)
	child, err := c.start(n.NS, fmt.Sprintf("proxy~%s~epoch-%d", n.Name, epoch), argv...)
	if err != nil {
		return err
	}
	wait := HotRestartParentShutdownTime + 30*time.Second
	select {
	case <-parent.done:
	case <-child.done:
		c.forget(child)
		return fmt.Errorf("hot restart of node %s's proxy: epoch %d exited before taking over: %v (log %s)\n%s", n.Name, epoch, child.err, child.log, tail(child.log, 15))
	case <-time.After(wait):
		_ = child.stop()
		c.forget(child)
		return fmt.Errorf("hot restart of node %s's proxy: epoch %d did not end epoch %d within %s (log %s)\n%s", n.Name, epoch, epoch-1, wait, child.log, tail(child.log, 15))
	case <-ctx.Done():
		_ = child.stop()
		c.forget(child)
		return ctx.Err()
	}
	c.forget(parent)
	procMu.Lock()
	n.proxy = child
	procMu.Unlock()
	if parent.err != nil {
		return fmt.Errorf("hot restart of node %s's proxy: epoch %d exited with %v (log %s)\n%s", n.Name, epoch-1, parent.err, parent.log, tail(parent.log, 15))
	}
	return c.WaitProxyReady(ctx, n, 30*time.Second)
}

// procMu guards each node's proxy and agent processes, which
// HotRestartProxy and StartAgent replace while a run may be reading them
// (a CPU sampler's ProxyPID, a WaitProxyReady of another goroutine).
var procMu sync.Mutex

func (n *Node) proxyProc() *proc {
	procMu.Lock()
	defer procMu.Unlock()
	return n.proxy
}

func (n *Node) agentProc() *proc {
	procMu.Lock()
	defer procMu.Unlock()
	return n.agent
}

func (n *Node) setAgent(p *proc) {
	procMu.Lock()
	defer procMu.Unlock()
	n.agent = p
}

// forget drops a process that has ended from the ones Check reports.
func (c *Cluster) forget(p *proc) {
	c.mu.Lock()
	c.procs = slices.DeleteFunc(c.procs, func(q *proc) bool { return q == p })
	c.mu.Unlock()
}

// restartEpoch is the --restart-epoch in a proxy's arguments; none is 0.
func restartEpoch(argv []string) uint32 {
	for i, a := range argv {
		if a == "--restart-epoch" && i+1 < len(argv) {
			if e, err := strconv.ParseUint(argv[i+1], 10, 32); err == nil {
				return uint32(e)
			}
		}
	}
	return 0
}

// withRestartEpoch is argv with the hot restart flags of epoch in place of
// any it had.
func withRestartEpoch(argv []string, epoch uint32) []string {
	drop := map[string]bool{"--restart-epoch": true, "--drain-time": true, "--parent-shutdown-time": true}
	var out []string
	for i := 0; i < len(argv); i++ {
		if drop[argv[i]] {
			i++
			continue
		}
		out = append(out, argv[i])
	}
	return append(out,
		"--restart-epoch", strconv.FormatUint(uint64(epoch), 10),
		"--drain-time", HotRestartDrainTime.String(),
		"--parent-shutdown-time", HotRestartParentShutdownTime.String())
}
