package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/netns"
)

// AgentStateDir is node n's agent's --state-dir: it outlives the agent's
// restarts, so what the agent persists there (its last good snapshot, its
// observed pairs) is what a restarted agent reads.
func (c *Cluster) AgentStateDir(n *Node) string {
	return filepath.Join(c.RunDir, "nodes", n.Name+".state")
}

// RemovePod takes pod p off its node as Kubernetes does when the pod is
// deleted: its sandbox goes (CNI DEL, which tells the node's agent) and
// the registry the agents watch lists it no more. Its namespace and its
// backend stay, so that ReturnPod can bring it back. It returns the pod's
// registry entry, which ReturnPod takes. While a pod is away, Update
// refuses, since it holds the pod list fixed.
func (c *Cluster) RemovePod(ctx context.Context, p *Pod) (registry.ScenarioPod, error) {
	c.mu.Lock()
	i := slices.IndexFunc(c.scenario.Pods, func(sp registry.ScenarioPod) bool {
		return sp.Name == p.Name && orDefault(sp.Namespace, "default") == p.Namespace
	})
	c.mu.Unlock()
	if i < 0 {
		return registry.ScenarioPod{}, fmt.Errorf("pod %s is not in the registry; it was removed already", p.Key())
	}
	if err := c.DelPod(ctx, p); err != nil {
		return registry.ScenarioPod{}, err
	}
	c.mu.Lock()
	entry := c.scenario.Pods[i]
	c.scenario.Pods = slices.Delete(c.scenario.Pods, i, i+1)
	c.mu.Unlock()
	if err := c.writeRegistry(); err != nil {
		return registry.ScenarioPod{}, fmt.Errorf("pod %s's sandbox is gone but the registry still lists it: %w", p.Key(), err)
	}
	return entry, nil
}

// ReturnPod lists pod p in the registry again as entry and gives it a new
// sandbox (CNI ADD), as Kubernetes does for a pod created anew on the
// same node. entry's IP may differ from the one p had: a re-created pod
// comes back on a new address, and the other nodes route the new one to
// p's node instead of the old. A bad entry changes nothing; a failed ADD
// is undone.
func (c *Cluster) ReturnPod(ctx context.Context, p *Pod, entry registry.ScenarioPod) (err error) {
	ip, err := c.checkReturn(p, entry)
	if err != nil {
		return err
	}
	old := p.IP
	if ip != old {
		if err := c.moveRoutes(p, old, ip); err != nil {
			return err
		}
		p.IP = ip
	}
	c.mu.Lock()
	c.scenario.Pods = append(c.scenario.Pods, entry)
	c.mu.Unlock()
	defer func() {
		if err == nil {
			return
		}
		c.mu.Lock()
		c.scenario.Pods = slices.DeleteFunc(c.scenario.Pods, func(sp registry.ScenarioPod) bool {
			return sp.Name == p.Name && orDefault(sp.Namespace, "default") == p.Namespace
		})
		c.mu.Unlock()
		undo := []error{c.writeRegistry()}
		if ip != old {
			undo = append(undo, c.moveRoutes(p, ip, old))
			p.IP = old
		}
		if uerr := errors.Join(undo...); uerr != nil {
			err = errors.Join(err, fmt.Errorf("and undoing the return failed: %w", uerr))
		}
	}()
	if err := c.writeRegistry(); err != nil {
		return err
	}
	return c.AddPod(ctx, p)
}

// checkReturn refuses, before anything changes, an entry that is not p's
// or that the registry's loader or the rig's address plan would refuse,
// and a p that is attached or listed already. It returns entry's IP.
func (c *Cluster) checkReturn(p *Pod, entry registry.ScenarioPod) (netip.Addr, error) {
	if entry.Name != p.Name || orDefault(entry.Namespace, "default") != p.Namespace || entry.Node != p.Node {
		return netip.Addr{}, fmt.Errorf("return of pod %s: the entry is %s/%s on node %s, want the pod's own name on node %s",
			p.Key(), orDefault(entry.Namespace, "default"), entry.Name, entry.Node, p.Node)
	}
	if entry.Netns != "" {
		return netip.Addr{}, fmt.Errorf("return of pod %s: the entry gives netns %q; the rig's agents take netns paths from the CNI handoff only", p.Key(), entry.Netns)
	}
	if p.cniID != "" {
		return netip.Addr{}, fmt.Errorf("return of pod %s: it is attached already (%s)", p.Key(), p.cniID)
	}
	c.mu.Lock()
	next := cloneScenario(c.scenario)
	c.mu.Unlock()
	for _, sp := range next.Pods {
		if sp.Name == p.Name && orDefault(sp.Namespace, "default") == p.Namespace {
			return netip.Addr{}, fmt.Errorf("return of pod %s: the registry lists it already", p.Key())
		}
	}
	next.Pods = append(next.Pods, entry)
	st, err := next.State(c.RegistryFile)
	if err == nil {
		err = checkPlan(c.RegistryFile, st)
	}
	if err != nil {
		return netip.Addr{}, fmt.Errorf("return of pod %s rejected: %w", p.Key(), err)
	}
	ip, err := netip.ParseAddr(entry.IP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("return of pod %s: field ip: %w", p.Key(), err)
	}
	return ip, nil
}

// moveRoutes points every other node's route for pod p from address from
// to address to (topology.go routes each remote pod by /32 through its
// node). The new route goes in before the old one goes.
func (c *Cluster) moveRoutes(p *Pod, from, to netip.Addr) error {
	via := c.Node(p.Node)
	for _, n := range c.nodes {
		if n == via {
			continue
		}
		if err := netns.AddRoute(n.NS, netns.Route{Dst: netip.PrefixFrom(to, 32), Gw: via.Underlay, Dev: "eth0"}); err != nil {
			return err
		}
		if err := delRoute(n.NS, netip.PrefixFrom(from, 32)); err != nil {
			return err
		}
	}
	return nil
}

// delRoute removes the main table's route to dst in ns.
func delRoute(ns *netns.NS, dst netip.Prefix) error {
	h, err := ns.Handle()
	if err != nil {
		return err
	}
	defer h.Close()
	r := &netlink.Route{Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())}}
	if err := h.RouteDel(r); err != nil {
		return fmt.Errorf("failed to delete the route to %s in netns %q: %w", dst, ns.Name, err)
	}
	return nil
}

// ColdRestartProxy restarts node n's proxy without a hot restart: the
// running one is killed (SIGKILL, as a crash or an OOM kill ends it) and a
// new one starts with its arguments as epoch 0, as a node's proxy
// container does when it restarts. The listeners go with the old process
// and come back only once the new one has its configuration from the
// agent: the gap a hot restart closes. It returns once the new proxy
// serves every listener of the node; its log is
// proxy~<node>~cold-restart.log in the run's logs.
func (c *Cluster) ColdRestartProxy(ctx context.Context, n *Node) error {
	return c.ColdRestartProxyHolding(ctx, n, nil)
}

// ColdRestartProxyHolding is ColdRestartProxy with the gap held open: once
// the old proxy is gone, hold runs before the new one starts, so a caller
// whose witness must see the gap (a prober's lost request) waits for it
// instead of hoping traffic lands in a gap of a few milliseconds. The new
// proxy starts whatever hold returns; hold's error is returned with the
// start's.
func (c *Cluster) ColdRestartProxyHolding(ctx context.Context, n *Node, hold func(context.Context) error) error {
	old := n.proxyProc()
	if old == nil || old.exited() {
		return fmt.Errorf("node %s has no running proxy to restart", n.Name)
	}
	if err := syscall.Kill(-old.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to kill node %s's proxy (pid %d): %w", n.Name, old.cmd.Process.Pid, err)
	}
	<-old.done
	c.forget(old)
	var held error
	if hold != nil {
		if held = hold(ctx); held != nil {
			held = fmt.Errorf("cold restart of node %s's proxy: holding the gap: %w", n.Name, held)
		}
	}
	p, err := c.start(n.NS, "proxy~"+n.Name+"~cold-restart", withRestartEpoch(old.cmd.Args, 0)...)
	if err != nil {
		return errors.Join(held, err)
	}
	procMu.Lock()
	n.proxy = p
	procMu.Unlock()
	return errors.Join(held, c.WaitProxyReady(ctx, n, 30*time.Second))
}
