package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// proc is a process the cluster started in one of its namespaces.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (c *Cluster) start(ns *netns.NS, name string, argv ...string) (*proc, error) {
	logPath := filepath.Join(c.RunDir, "logs", name+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open log %q for %s: %w", logPath, name, err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	// Its own process group, and a parent-death signal: if the rig dies,
	// nothing it started keeps running outside a namespace sweep.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := ns.Start(cmd); err != nil {
		lf.Close()
		return nil, fmt.Errorf("failed to start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.done)
	}()
	c.mu.Lock()
	c.procs = append(c.procs, p)
	c.mu.Unlock()
	return p, nil
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to finish (SIGTERM), then kills it after a grace
// period. A process that had already died on its own is reported: a rig
// whose agent crashed mid-run must not look clean.
func (p *proc) stop() error {
	if p.exited() {
		if p.err != nil {
			return fmt.Errorf("%s had exited on its own: %v (log %s)\n%s", p.name, p.err, p.log, tail(p.log, 15))
		}
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(3 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}

// tail returns the last n lines of a log, for error messages, after its
// first line when it had to cut: a process that refuses its command line
// says why on its first line (Go's flag package) and then prints its whole
// usage, whose last lines alone do not name the mistyped flag.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n+1 {
		lines = append([]string{lines[0], "…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// Check reports any cluster process that has exited, with its log's tail.
func (c *Cluster) Check() error {
	c.mu.Lock()
	procs := c.procs
	c.mu.Unlock()
	var errs []error
	for _, p := range procs {
		if p.exited() {
			errs = append(errs, fmt.Errorf("%s exited: %v (log %s)\n%s", p.name, p.err, p.log, tail(p.log, 15)))
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) binaries() error {
	names := []string{"ptp", "static"}
	if c.Mode != NoMesh {
		names = append(names, "aether-cni", "aether-agent", "aether-proxy")
	}
	missing := c.cfg.Bin.need(names...)
	if c.cfg.Bin.Node == "" {
		missing = append(missing, "aether-node")
	}
	if len(missing) == 0 {
		return nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("failed to read the working directory: %w", err)
	}
	root, err := ModuleRoot(wd)
	if err != nil {
		return fmt.Errorf("binaries %v are missing and cannot be built: %w", missing, err)
	}
	// A partial Dir is not mixed with fresh builds: everything comes from
	// one place so CNI_PATH sees one consistent set.
	all := append(names, "aether-node")
	c.cfg.Logf("building %v", all)
	bin, err := BuildShared(root, all...)
	if err != nil {
		return err
	}
	c.cfg.Logf("binaries in %s", bin.Dir)
	c.cfg.Bin = bin
	return nil
}

func (c *Cluster) startBackends(ctx context.Context, st *registry.State) error {
	udp, tcp, http := backendPorts(st)
	join := func(ports []int) string {
		s := make([]string, len(ports))
		for i, p := range ports {
			s[i] = strconv.Itoa(p)
		}
		return strings.Join(s, ",")
	}
	for _, p := range c.pods {
		argv := []string{c.cfg.Bin.Node, "backend", "--name", p.Name, "--record", p.Record,
			"--udp", join(udp), "--tcp", join(tcp), "--http", join(http)}
		if c.cfg.EchoTLS != "" {
			argv = append(argv, "--tls", c.cfg.EchoTLS)
		}
		pr, err := c.start(p.NS, "backend~"+p.Namespace+"~"+p.Name, argv...)
		if err != nil {
			return err
		}
		p.backend = pr
	}
	// Every backend says "ready" in its record once bound.
	for _, p := range c.pods {
		err := poll(ctx, 10*time.Second, func() (bool, error) {
			if p.backend.exited() {
				return false, fmt.Errorf("backend of pod %s exited: %v\n%s", p.Key(), p.backend.err, tail(p.backend.log, 10))
			}
			recs, err := ReadRecords(p.Record)
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil && len(recs) > 0 && recs[0].Event == "ready", err
		})
		if err != nil {
			return fmt.Errorf("backend of pod %s not ready: %w", p.Key(), err)
		}
	}
	return nil
}

// startMesh starts each node's agent and proxy and waits until every agent
// takes the CNI's calls.
func (c *Cluster) startMesh(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := c.StartAgent(ctx, n); err != nil {
			return err
		}
		var err error
		n.proxy, err = c.start(n.NS, "proxy~"+n.Name, filepath.Join(c.cfg.Bin.Dir, "aether-proxy"),
			"--node", n.Name,
			"--xds", n.XDS,
			"--metrics-addr", n.ProxyMetrics.String())
		if err != nil {
			return err
		}
	}
	return nil
}

// StartAgent starts node n's agent and returns once it answers on its
// metrics address, which it binds after its handoff socket: the CNI's calls
// reach it from then on. The agent keeps its state dir across restarts.
func (c *Cluster) StartAgent(ctx context.Context, n *Node) error {
	if a := n.agentProc(); a != nil && !a.exited() {
		return fmt.Errorf("the agent of node %s is already running", n.Name)
	}
	state := c.AgentStateDir(n)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return fmt.Errorf("failed to create state dir %q: %w", state, err)
	}
	argv := append([]string{filepath.Join(c.cfg.Bin.Dir, "aether-agent"),
		"--node", n.Name,
		"--registry-file", c.RegistryFile,
		"--handoff-socket", n.HandoffSocket,
		"--listen", n.XDS,
		"--metrics-addr", n.AgentMetrics.String(),
		"--state-dir", state,
		"--capture-mode", string(c.Mode)}, c.cfg.AgentArgs...)
	p, err := c.start(n.NS, "agent~"+n.Name, argv...)
	if err != nil {
		return err
	}
	n.setAgent(p)
	err = poll(ctx, 30*time.Second, func() (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("agent of node %s exited: %v\n%s", n.Name, p.err, tail(p.log, 10))
		}
		_, err := n.Get(ctx, n.AgentMetrics, "/metrics")
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("agent of node %s not serving: %w", n.Name, err)
	}
	return nil
}

// StopAgent stops node n's agent (SIGTERM), leaving its proxy running on
// the configuration it last received, as a node whose agent restarts does.
func (c *Cluster) StopAgent(n *Node) error {
	agent := n.agentProc()
	if agent == nil {
		return fmt.Errorf("node %s has no agent", n.Name)
	}
	err := agent.stop()
	c.mu.Lock()
	c.procs = slices.DeleteFunc(c.procs, func(p *proc) bool { return p == agent })
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stopping the agent of node %s: %w", n.Name, err)
	}
	return nil
}

// ProxyPID is the process id of node n's proxy, for its CPU time.
func (n *Node) ProxyPID() int { return n.proxyProc().cmd.Process.Pid }

// WaitProxyReady waits until node n's proxy reports, on its metrics
// endpoint, every capture listener the agent's generator emits for the node
// from the current scenario: the proxy is serving the agent's configuration,
// not merely running.
func (c *Cluster) WaitProxyReady(ctx context.Context, n *Node, timeout time.Duration) error {
	want, err := c.expectedListeners(n.Name)
	if err != nil {
		return err
	}
	var last string
	err = poll(ctx, timeout, func() (bool, error) {
		if n.agentProc().exited() || n.proxyProc().exited() {
			return false, c.Check()
		}
		body, err := n.Get(ctx, n.ProxyMetrics, "/metrics")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, w := range want {
			if !strings.Contains(body, `listener="`+w+`"`) {
				last = "no listener " + w + " in the proxy's metrics yet"
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("proxy on node %s not ready (%s): %w", n.Name, last, err)
	}
	return nil
}

// Get fetches http://addr/path from inside the node namespace (the agent's
// and proxy's endpoints listen on the node's own loopback).
func (n *Node) Get(ctx context.Context, addr netip.AddrPort, path string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return transparent.DialTCP(ctx, n.NS.Path, addr, transparent.Options{})
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr.String()+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s%s on node %s: %w", addr, path, n.Name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET %s%s on node %s: %w", addr, path, n.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s%s on node %s: %s", addr, path, n.Name, resp.Status)
	}
	return string(b), nil
}

// Metric sums the samples of a Prometheus text-format metric whose labels
// include every pair in match. found is false when no sample matched.
func Metric(body, name string, match map[string]string) (sum float64, found bool) {
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := ""
		if strings.HasPrefix(rest, "{") {
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			labels, rest = rest[1:end], rest[end+1:]
		} else if !strings.HasPrefix(rest, " ") {
			continue // a longer metric name sharing the prefix
		}
		ok := true
		for k, v := range match {
			if !strings.Contains(","+labels+",", ","+k+`="`+v+`",`) {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}

// poll calls f until it reports done, returns an error, the timeout passes
// or ctx ends.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) expectedListeners(nodeName string) ([]string, error) {
	c.mu.Lock()
	sc := cloneScenario(c.scenario)
	c.mu.Unlock()
	// The agent knows the netns of the pods the CNI handed over, which are
	// those with an attachment now.
	for i := range sc.Pods {
		if p := c.Pod(orDefault(sc.Pods[i].Namespace, "default"), sc.Pods[i].Name); p != nil && p.cniID != "" {
			sc.Pods[i].Netns = p.NS.Path
		}
	}
	// The listeners are computed without the mTLS path (the capture
	// listeners alone), and a gateway rides that path: the builder refuses
	// a gateway node without it. The gateway's 18009 listeners are not
	// among those waited for.
	for i := range sc.Nodes {
		sc.Nodes[i].Gateway = nil
	}
	st, err := sc.State(c.RegistryFile)
	if err != nil {
		return nil, err
	}
	st.DeriveEndpoints()
	st.Sort()
	out, err := agent.NewBuilder(nodeName, c.Mode).Build(st, "rig")
	if err != nil {
		return nil, fmt.Errorf("failed to compute node %s's listeners: %w", nodeName, err)
	}
	var names []string
	for _, l := range out.Resources[resource.ListenerType] {
		names = append(names, cachev3.GetResourceName(l))
	}
	return names, nil
}
