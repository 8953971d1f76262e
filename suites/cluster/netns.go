package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/procstat"
	"github.com/aether-mesh/aether/rigs/results"
)

// NetnsProvider brings up the embedded netns cluster (rigs/node) from the
// given binaries.
type NetnsProvider struct {
	Bin node.Binaries
}

func (NetnsProvider) Name() string { return Netns }

// Binaries hashes the mesh binaries in p.Bin.Dir, which every cluster of
// this provider runs.
func (p NetnsProvider) Binaries() (map[string]string, error) {
	return results.HashBinaries(p.Bin.Dir, node.MeshBinaries...)
}

func (p NetnsProvider) Up(ctx context.Context, cfg Config) (Cluster, error) {
	nc := node.Config{Scenario: cfg.Scenario, Mode: cfg.Mode, Bin: p.Bin, RunDir: cfg.RunDir, Logf: cfg.Logf}
	if m := cfg.MTLS; m != nil {
		if cfg.RunDir == "" {
			return nil, errors.New("config: the mTLS path needs a RunDir for the proxies' access logs")
		}
		// The proxies append their access logs here; like Envoy they open
		// the file, not its directory.
		access := filepath.Join(cfg.RunDir, "access")
		if err := os.MkdirAll(access, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create the access log dir: %w", err)
		}
		nc.AgentArgs = []string{"--trust-domain", m.TrustDomain, "--mesh-domain", m.MeshDomain,
			"--ca-dir", m.CADir, "--access-log-dir", access, "--upstream-cert", m.UpstreamCert,
			"--mesh-transport", m.Transport()}
		nc.AgentArgs = append(nc.AgentArgs, m.ControlArgs...)
		if t := m.EchoTLS; t != nil {
			nc.EchoTLS = fmt.Sprintf("%d,%s,%s,%s,%s", t.Port, t.Cert, t.Key, t.Bundle, m.TrustDomain)
		}
	}
	c, err := node.Up(ctx, nc)
	if err != nil {
		return nil, err
	}
	return &netnsCluster{c: c, runDir: cfg.RunDir}, nil
}

// netnsCluster adapts rigs/node's cluster: pods are namespaces, a client
// socket is made inside one by setns, records are files.
type netnsCluster struct {
	c      *node.Cluster
	runDir string
}

func (n *netnsCluster) Pods() []Pod {
	var out []Pod
	for _, p := range n.c.Pods() {
		out = append(out, Pod{Namespace: p.Namespace, Name: p.Name, Node: p.Node, IP: p.IP})
	}
	return out
}

func (n *netnsCluster) ServiceVIP(namespace, name string) (netip.Addr, error) {
	return n.c.ServiceVIP(namespace, name)
}

func (n *netnsCluster) pod(p Pod) (*node.Pod, error) {
	np := n.c.Pod(p.Namespace, p.Name)
	if np == nil {
		return nil, fmt.Errorf("no pod %s/%s in the cluster", p.Namespace, p.Name)
	}
	return np, nil
}

func (n *netnsCluster) DialUDP(_ context.Context, p Pod, dst netip.AddrPort) (net.Conn, error) {
	np, err := n.pod(p)
	if err != nil {
		return nil, err
	}
	return transparent.DialUDP(np.NS.Path, netip.AddrPort{}, dst, transparent.Options{})
}

func (n *netnsCluster) DialTCP(ctx context.Context, p Pod, dst netip.AddrPort) (net.Conn, error) {
	np, err := n.pod(p)
	if err != nil {
		return nil, err
	}
	return transparent.DialTCP(ctx, np.NS.Path, dst, transparent.Options{})
}

func (n *netnsCluster) Records(_ context.Context, p Pod) ([]Record, error) {
	return n.c.Records(p.Namespace, p.Name)
}

func (n *netnsCluster) Update(_ context.Context, edit func(*registry.Scenario)) error {
	return n.c.Update(edit)
}

func (n *netnsCluster) Metrics(ctx context.Context, name string, of Component) (string, error) {
	nd := n.c.Node(name)
	if nd == nil {
		return "", fmt.Errorf("no node %s in the cluster", name)
	}
	switch of {
	case Agent:
		return nd.Get(ctx, nd.AgentMetrics, "/metrics")
	case Proxy:
		return nd.Get(ctx, nd.ProxyMetrics, "/metrics")
	}
	return "", fmt.Errorf("no component %q on node %s (want %q or %q)", of, name, Agent, Proxy)
}

// AccessLog reads the file the agents' --access-log-dir names for node's
// proxy (Up puts it under RunDir when the mTLS path is on).
func (n *netnsCluster) AccessLog(_ context.Context, name string) ([]byte, error) {
	if n.c.Node(name) == nil {
		return nil, fmt.Errorf("no node %s in the cluster", name)
	}
	b, err := os.ReadFile(filepath.Join(n.runDir, "access", "access-"+name+".log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("access log of node %s's proxy: %w", name, err)
	}
	return b, nil
}

func (n *netnsCluster) ProxyCPU(_ context.Context, name string) (time.Duration, error) {
	nd := n.c.Node(name)
	if nd == nil {
		return 0, fmt.Errorf("no node %s in the cluster", name)
	}
	pid := nd.ProxyPID()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("CPU time of node %s's proxy: %w", name, err)
	}
	d, err := procstat.ParseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("CPU time of node %s's proxy (pid %d): %w", name, pid, err)
	}
	return d, nil
}

func (n *netnsCluster) Check(context.Context) error { return n.c.Check() }

func (n *netnsCluster) Close() error { return n.c.Close() }

// Embedded is the rigs/node cluster under c when c runs on the netns
// provider, else nil. What the lifecycle suite drives beyond Cluster
// (agent restarts, pods leaving their node, proxy hot restarts) only the
// embedded cluster offers.
func Embedded(c Cluster) *node.Cluster {
	if n, ok := c.(*netnsCluster); ok {
		return n.c
	}
	return nil
}
