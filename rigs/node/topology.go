package node

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"

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
	base := c.underlay.Addr().As4()
	for i, sn := range st.Nodes {
		n := &Node{Name: sn.Name, Index: i,
			Underlay:      netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(i + 1)}),
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
		if err := netns.AddAddr(n.NS, "eth0", netip.PrefixFrom(n.Underlay, c.underlay.Bits())); err != nil {
			return err
		}
		// The node routes between its pods and the other nodes.
		if err := netns.Sysctl(n.NS, "net/ipv4/ip_forward", "1"); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := c.buildGateway(st); err != nil {
		return err
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

// buildGateway gives the scenario's gateway node, if it has one, its
// gateway address on the shared network: a veth (wan0) to the wan bridge,
// the cluster's own or, in a multi-cluster run, the one every cluster's
// gateway joins. Its 18009 listeners bind that address in the node's
// netns. Every other node reaches the shared network through the gateway
// node, and the gateway node reaches each other cluster's underlay through
// that cluster's gateway, so a source proxy's connection to a remote
// gateway and the reply both find their way without NAT.
func (c *Cluster) buildGateway(st *registry.State) error {
	var gw *Node
	var addr netip.Addr
	for _, sn := range st.Nodes {
		if sn.Gateway != nil {
			gw, addr = c.Node(sn.Name), sn.Gateway.Address
		}
	}
	if gw == nil {
		return nil
	}
	w := c.cfg.wan
	if w == nil {
		var err error
		if c.ownWAN, err = newWAN(c.tag("wan")); err != nil {
			return err
		}
		w = c.ownWAN
	}
	if err := w.attach(gw.NS, "wan0", "g"+strconv.Itoa(c.id), netip.PrefixFrom(addr, WANPrefix.Bits())); err != nil {
		return fmt.Errorf("gateway node %s: %w", gw.Name, err)
	}
	c.gateway, c.gatewayAddr = gw, addr
	for _, n := range c.nodes {
		if n == gw {
			continue
		}
		if err := netns.AddRoute(n.NS, netns.Route{Dst: WANPrefix, Gw: gw.Underlay, Dev: "eth0"}); err != nil {
			return err
		}
	}
	for _, r := range c.cfg.peers {
		if err := netns.AddRoute(gw.NS, netns.Route{Dst: r.underlay, Gw: r.gateway, Dev: "wan0"}); err != nil {
			return fmt.Errorf("gateway node %s, to cluster %q: %w", gw.Name, r.cluster, err)
		}
	}
	return nil
}

// peer is another cluster as a gateway node routes to it: its underlay
// through its gateway's address on the shared network.
type peer struct {
	cluster  string
	underlay netip.Prefix
	gateway  netip.Addr
}

// wan is the shared network's bridge namespace.
type wan struct{ ns *netns.NS }

func newWAN(tag string) (*wan, error) {
	ns, err := netns.Create(tag)
	if err != nil {
		return nil, err
	}
	if err := netns.Bridge(ns, "br0"); err != nil {
		return nil, errors.Join(err, ns.Delete())
	}
	return &wan{ns: ns}, nil
}

// attach joins ns to the shared network by a veth (dev in ns, port on the
// bridge) with address addr on dev.
func (w *wan) attach(ns *netns.NS, dev, port string, addr netip.Prefix) error {
	if err := netns.Veth(ns, dev, w.ns, port); err != nil {
		return err
	}
	if err := netns.Enslave(w.ns, port, "br0"); err != nil {
		return err
	}
	return netns.AddAddr(ns, dev, addr)
}

func (w *wan) close() error {
	if w == nil || w.ns == nil {
		return nil
	}
	return w.ns.Delete()
}
