package node

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/aether-mesh/aether/mesh/registry"
)

// The rig's address plan (rigs/README.md, "The embedded netns cluster"). The ranges
// are the rig's rule, not the mesh's: they exist only inside the rig's
// namespaces, and a scenario that strays from them would put a pod or a
// service where the rig's routes and the suites' expectations do not look.
var (
	PodPrefix     = netip.MustParsePrefix("10.244.0.0/16")
	ServicePrefix = netip.MustParsePrefix("10.96.0.0/16")
	// WANPrefix is the network the clusters share: each cluster's gateway
	// node has its gateway address on it (a veth to the wan bridge).
	WANPrefix = netip.MustParsePrefix("172.30.0.0/24")
)

// checkPlan refuses, before anything is built, a scenario whose addresses
// leave the plan: a pod outside PodPrefix or on its /24's gateway, a
// ClusterIP outside ServicePrefix, a gateway address outside WANPrefix or
// on its network or broadcast address. An address used twice the registry
// already refuses. Every problem is named by its object and field.
func checkPlan(file string, st *registry.State) error {
	return checkPlanAs(fmt.Sprintf("scenario %q", file), st)
}

// checkPlanAs is checkPlan with each error labelled by label (the
// scenario, or a cluster of a clusters file).
func checkPlanAs(label string, st *registry.State) error {
	var errs []error
	for _, p := range st.Pods {
		switch {
		case !p.IP.Is4():
			errs = append(errs, fmt.Errorf("%s: pod %s: field ip: the rig builds IPv4 pods only, got %s", label, p.Key(), p.IP))
		case !PodPrefix.Contains(p.IP):
			errs = append(errs, fmt.Errorf("%s: pod %s: field ip: %s is outside the rig's pod range %s", label, p.Key(), p.IP, PodPrefix))
		case gatewayFor(p.IP) == p.IP:
			errs = append(errs, fmt.Errorf("%s: pod %s: field ip: %s is the node gateway of its /24; use .2 to .254", label, p.Key(), p.IP))
		}
	}
	for _, s := range st.Services {
		if !ServicePrefix.Contains(s.ClusterIP) {
			errs = append(errs, fmt.Errorf("%s: service %s: field clusterIP: %s is outside the rig's service range %s", label, s.Key(), s.ClusterIP, ServicePrefix))
		}
	}
	for _, n := range st.Nodes {
		g := n.Gateway
		if g == nil {
			continue
		}
		switch a := g.Address; {
		case !WANPrefix.Contains(a):
			errs = append(errs, fmt.Errorf("%s: node %s: field gateway.address: %s is outside the rig's shared network %s", label, n.Name, a, WANPrefix))
		case a == WANPrefix.Addr() || a == lastAddr(WANPrefix):
			errs = append(errs, fmt.Errorf("%s: node %s: field gateway.address: %s is the network or broadcast address of %s", label, n.Name, a, WANPrefix))
		}
	}
	return errors.Join(errs...)
}

// lastAddr is p's broadcast address.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// checkClustersPlan is checkPlan for every cluster of a clusters file,
// each error naming its cluster, and it refuses an address two clusters
// both use: a pod IP, a ClusterIP or a gateway address. The clusters are
// separate networks joined only by their gateways, so an address in two
// of them would be a different thing on each side of the shared network.
func checkClustersPlan(file string, names []string, states []*registry.State) error {
	var errs []error
	type owner struct{ cluster, what string }
	seen := map[netip.Addr]owner{}
	claim := func(cluster, what, field string, a netip.Addr) {
		if o, dup := seen[a]; dup && o.cluster != cluster {
			errs = append(errs, fmt.Errorf("clusters file %q: cluster %q: %s: field %s: %s is also cluster %q's %s; the clusters' ranges must not overlap",
				file, cluster, what, field, a, o.cluster, o.what))
			return
		}
		if _, dup := seen[a]; !dup {
			seen[a] = owner{cluster, what}
		}
	}
	if len(states) > 250 {
		errs = append(errs, fmt.Errorf("clusters file %q: field clusters: the rig's underlays hold at most 250 clusters, got %d", file, len(states)))
	}
	for i, st := range states {
		if err := checkPlanAs(fmt.Sprintf("clusters file %q: cluster %q", file, names[i]), st); err != nil {
			errs = append(errs, err)
		}
		for _, p := range st.Pods {
			claim(names[i], "pod "+p.Key().String(), "ip", p.IP)
		}
		for _, s := range st.Services {
			claim(names[i], "service "+s.Key().String(), "clusterIP", s.ClusterIP)
		}
		for _, n := range st.Nodes {
			if n.Gateway != nil {
				claim(names[i], "node "+n.Name, "gateway.address", n.Gateway.Address)
			}
		}
	}
	return errors.Join(errs...)
}
