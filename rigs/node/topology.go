package node

import (
	"fmt"
	"net/netip"
	"path/filepath"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/netns"
)

// Loopback ports inside each node namespace. Every node has its own
// loopback, so the numbers repeat across nodes without clashing.
const (
	agentMetricsPort = 15090
	proxyMetricsPort = 15091
)

func (c *Cluster) buildTopology(st *registry.State) error {
	if len(st.Nodes) == 0 {
		return fmt.Errorf("scenario %q: field nodes: at least one node is needed", c.cfg.Scenario)
	}
	if len(st.Nodes) > 250 {
		return fmt.Errorf("scenario %q: field nodes: the underlay holds at most 250 nodes, got %d", c.cfg.Scenario, len(st.Nodes))
	}
	var err error
	if c.bridge, err = netns.Create(c.tag("bridge")); err != nil {
		return err
	}
	if err := netns.Bridge(c.bridge, "br0"); err != nil {
		return err
	}
	for i, sn := range st.Nodes {
		n := &Node{Name: sn.Name, Index: i,
			Underlay:      netip.AddrFrom4([4]byte{10, 243, 0, byte(i + 1)}),
			AgentMetrics:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), agentMetricsPort),
			ProxyMetrics:  netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), proxyMetricsPort),
			XDS:           "unix://" + filepath.Join(c.RunDir, "nodes", sn.Name+".xds.sock"),
			HandoffSocket: filepath.Join(c.RunDir, "nodes", sn.Name, "cni.sock"),
		}
		if n.NS, err = netns.Create(c.tag(sn.Name)); err != nil {
			return err
		}
		c.nodes = append(c.nodes, n)
		port := fmt.Sprintf("n%d", i)
		if err := netns.Veth(n.NS, "eth0", c.bridge, port); err != nil {
			return err
		}
		if err := netns.Enslave(c.bridge, port, "br0"); err != nil {
			return err
		}
		if err := netns.AddAddr(n.NS, "eth0", netip.PrefixFrom(n.Underlay, UnderlayPrefix.Bits())); err != nil {
			return err
		}
		// The node routes between its pods and the other nodes.
		if err := netns.Sysctl(n.NS, "net/ipv4/ip_forward", "1"); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	for _, sp := range st.Pods {
		p := &Pod{Name: sp.Name, Namespace: sp.Namespace, Node: sp.Node, IP: sp.IP,
			Record: filepath.Join(c.RunDir, "records", sp.Namespace+"~"+sp.Name+".jsonl")}
		if p.NS, err = netns.Create(c.tag(sp.Node, sp.Namespace, sp.Name)); err != nil {
			return err
		}
		c.pods = append(c.pods, p)
	}
	// Each node reaches a remote pod through that pod's node, by /32: the
	// scenario, not a per-node CIDR, decides where a pod lives.
	for _, n := range c.nodes {
		for _, p := range c.pods {
			if p.Node == n.Name {
				continue
			}
			via := c.Node(p.Node)
			if err := netns.AddRoute(n.NS, netns.Route{Dst: netip.PrefixFrom(p.IP, 32), Gw: via.Underlay, Dev: "eth0"}); err != nil {
				return err
			}
		}
	}
	return nil
}
