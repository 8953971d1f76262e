package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/node"
)

// NetnsProvider brings up the embedded netns cluster (rigs/node) from the
// given binaries.
type NetnsProvider struct {
	Bin node.Binaries
}

func (NetnsProvider) Name() string { return Netns }

func (p NetnsProvider) Up(ctx context.Context, cfg Config) (Cluster, error) {
	c, err := node.Up(ctx, node.Config{Scenario: cfg.Scenario, Mode: cfg.Mode, Bin: p.Bin, RunDir: cfg.RunDir, Logf: cfg.Logf})
	if err != nil {
		return nil, err
	}
	return &netnsCluster{c: c}, nil
}

// netnsCluster adapts rigs/node's cluster: pods are namespaces, a client
// socket is made inside one by setns, records are files.
type netnsCluster struct {
	c *node.Cluster
}

func (n *netnsCluster) Pods() []Pod {
	var out []Pod
	for _, p := range n.c.Pods() {
		out = append(out, Pod{Namespace: p.Namespace, Name: p.Name, Node: p.Node})
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

func (n *netnsCluster) Check(context.Context) error { return n.c.Check() }

func (n *netnsCluster) Close() error { return n.c.Close() }
