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
)

// checkPlan refuses, before anything is built, a scenario whose addresses
// leave the plan: a pod outside PodPrefix or on its /24's gateway, a
// ClusterIP outside ServicePrefix. An address used twice the registry
// already refuses. Every problem is named by its object and field.
func checkPlan(file string, st *registry.State) error {
	var errs []error
	for _, p := range st.Pods {
		switch {
		case !p.IP.Is4():
			errs = append(errs, fmt.Errorf("scenario %q: pod %s: field ip: the rig builds IPv4 pods only, got %s", file, p.Key(), p.IP))
		case !PodPrefix.Contains(p.IP):
			errs = append(errs, fmt.Errorf("scenario %q: pod %s: field ip: %s is outside the rig's pod range %s", file, p.Key(), p.IP, PodPrefix))
		case gatewayFor(p.IP) == p.IP:
			errs = append(errs, fmt.Errorf("scenario %q: pod %s: field ip: %s is the node gateway of its /24; use .2 to .254", file, p.Key(), p.IP))
		}
	}
	for _, s := range st.Services {
		if !ServicePrefix.Contains(s.ClusterIP) {
			errs = append(errs, fmt.Errorf("scenario %q: service %s: field clusterIP: %s is outside the rig's service range %s", file, s.Key(), s.ClusterIP, ServicePrefix))
		}
	}
	return errors.Join(errs...)
}
