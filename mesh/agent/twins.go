package agent

import (
	"maps"
	"slices"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Why an on-demand cluster name was refused: the reason label of
// aether_agent_odcds_refused_total.
const (
	RefusedUnknownName        = "unknown-name"
	RefusedUnknownDestination = "unknown-destination"
	RefusedNotDependency      = "not-in-dependency-set"
	RefusedNoReadyEndpoint    = "no-ready-endpoint"
	RefusedNoLocalPod         = "no-local-pod-for-sa"
	RefusedTransportH2        = "mesh-transport-h2"
	RefusedNotHTTP            = "not-http"
	RefusedNotIdentityReady   = "not-identity-ready"
	RefusedWaypointed         = "waypointed-endpoint"
	RefusedPublish            = "publish-failed"
	// RefusedGate: the snapshot with the twin fails a config gate
	// (mesh/agent/validate); the failing gates are counted under
	// aether_agent_snapshot_refused_total, as a refused build's are.
	RefusedGate = "config-gate"
	// RefusedTestOnly is Controls.RefuseTwin's refusal.
	RefusedTestOnly = "test-only-refused"
)

var refusedReasons = []string{RefusedUnknownName, RefusedUnknownDestination, RefusedNotDependency,
	RefusedNoReadyEndpoint, RefusedNoLocalPod, RefusedTransportH2, RefusedNotHTTP, RefusedNotIdentityReady, RefusedWaypointed, RefusedPublish, RefusedGate, RefusedTestOnly}

// twinRefusal says why st gives node no twin for t, or "" when it does. A
// twin is demand-scoped: it exists only for a pair that dialled, and only
// while its source account has a pod on the node and its destination is
// one the node's proxies may reach. On the mTLS path (http set) a pod
// counts once it has a sandbox (a netns path): only such a pod gets
// listeners, and with them its account's SVID secret, which the twin
// presents. A pod whose sandbox is gone (CNI DEL) before it leaves the
// registry leaves with it, so its twin is withdrawn in the same build as
// the secret; kept any longer, it would name a secret the build no longer
// serves (sds_names_resolve).
func twinRefusal(st *registry.State, node string, http *HTTPPath, t xdsnames.Twin) string {
	dst := registry.Key{Namespace: t.Namespace, Name: t.Service}
	if _, ok := st.Service(dst); !ok {
		// A remote service is exported only with a ready endpoint, and
		// its waypoints are its own cluster's business.
		if _, remote := st.RemoteService(dst); !remote || http == nil {
			return RefusedUnknownDestination
		}
		if !st.Dependencies(node).Has(dst) {
			return RefusedNotDependency
		}
	} else {
		if !st.Dependencies(node).Has(dst) {
			return RefusedNotDependency
		}
		if len(st.ReadyEndpoints(dst)) == 0 {
			return RefusedNoReadyEndpoint
		}
		if st.Waypointed(dst) {
			return RefusedWaypointed
		}
	}
	local := slices.ContainsFunc(st.Pods, func(p registry.Pod) bool {
		return p.Node == node && (http == nil || p.NetnsPath != "") && p.Namespace == t.SANamespace && p.ServiceAccount == t.SA
	})
	if !local {
		return RefusedNoLocalPod
	}
	return ""
}

// twinFor is t's cluster and its own load assignment, or why st gives
// node no twin for t. The load assignment holds every ready endpoint of
// the destination at the per-pod inbound, UDP 18008, where the
// destination's proxy serves QUIC (R3); its name is the twin's own, never
// the base cluster's (#1008). On the mTLS path (http set) the cluster
// carries the QUIC upstream transport and HTTP/3; without it, it is a
// bare EDS cluster, which is all the on-demand machinery needs.
func twinFor(st *registry.State, node string, http *HTTPPath, ctl Controls, t xdsnames.Twin) (servedTwin, string, error) {
	if name := xdsnames.TwinCluster(t); ctl.RefuseTwin != "" && name == ctl.RefuseTwin {
		return servedTwin{}, RefusedTestOnly, nil
	}
	if reason := twinRefusal(st, node, http, t); reason != "" {
		return servedTwin{}, reason, nil
	}
	name := xdsnames.TwinCluster(t)
	var c *cluster.Cluster
	if http != nil {
		var reason string
		var err error
		if c, reason, err = http.twin(st, t); err != nil || reason != "" {
			return servedTwin{}, reason, err
		}
	} else {
		c = &cluster.Cluster{
			Name:                 name,
			ClusterDiscoveryType: edsType,
			ConnectTimeout:       edsTimeout,
			EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{ServiceName: name, EdsConfig: edsAdsSource},
		}
	}
	if ctl.TwinSharesBaseEDS {
		c = proto.Clone(c).(*cluster.Cluster)
		c.EdsClusterConfig.ServiceName = xdsnames.H2Cluster(t.Service, t.Namespace)
	}
	if ctl.TwinPoolPerDownstream {
		c = proto.Clone(c).(*cluster.Cluster)
		c.ConnectionPoolPerDownstreamConnection = true
	}
	if ctl.TwinSharedCert != "" && http != nil {
		var err error
		if c, err = eastwest.WithCertificate(c, ctl.TwinSharedCert); err != nil {
			return servedTwin{}, "", err
		}
	}
	loc := &endpoint.LocalityLbEndpoints{}
	if r, ok := st.RemoteService(registry.Key{Namespace: t.Namespace, Name: t.Service}); ok {
		// A remote service's one endpoint is its cluster's gateway, on
		// UDP 18009: it forwards the QUIC connection by the SNI of its
		// Initials, undecrypted, to a destination pod's 18008.
		loc.LbEndpoints = append(loc.LbEndpoints, &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: &core.Address{
				Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Protocol:      core.SocketAddress_UDP,
					Address:       r.Gateway.Addr().String(),
					PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(r.Gateway.Port())},
				}},
			}}},
			LoadBalancingWeight: lbWeight(1),
		})
	}
	for _, ep := range st.ReadyEndpoints(registry.Key{Namespace: t.Namespace, Name: t.Service}) {
		loc.LbEndpoints = append(loc.LbEndpoints, &endpoint.LbEndpoint{
			HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: &endpoint.Endpoint{Address: &core.Address{
				Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
					Protocol:      core.SocketAddress_UDP,
					Address:       ep.IP.String(),
					PortSpecifier: &core.SocketAddress_PortValue{PortValue: uint32(constants.InboundPort)},
				}},
			}}},
			LoadBalancingWeight: lbWeight(max(ep.Weight, 1)),
		})
	}
	return servedTwin{c, &endpoint.ClusterLoadAssignment{ClusterName: name, Endpoints: []*endpoint.LocalityLbEndpoints{loc}}}, "", nil
}

// servedTwin is a twin as published: its cluster and load assignment.
type servedTwin [2]types.Resource

// overlay adds the twin of every recorded pair (package pairs) st admits
// to out, and to its changes against served (what the cache holds for
// twins now): a twin whose messages moved is updated, one no longer
// admissible removed. It returns the twins out serves. out's lists and
// maps belong to the builder, so they are copied, never appended to in
// place.
func overlay(recorded []xdsnames.Twin, out *Output, st *registry.State, node string, http *HTTPPath, ctl Controls, served map[string]servedTwin) (map[string]servedTwin, error) {
	if len(recorded) == 0 && len(served) == 0 {
		return served, nil
	}
	next := make(map[string]servedTwin, len(recorded))
	for _, t := range recorded {
		tw, reason, err := twinFor(st, node, http, ctl, t)
		if err != nil {
			return nil, err
		}
		if reason == "" {
			next[xdsnames.TwinCluster(t)] = tw
		}
	}
	names := slices.Sorted(maps.Keys(next))
	out.Resources = maps.Clone(out.Resources)
	if !out.Full {
		out.Changes = maps.Clone(out.Changes)
	}
	for i, typ := range []resource.Type{resource.ClusterType, resource.EndpointType} {
		list := slices.Clip(out.Resources[typ])
		var c Changes
		if !out.Full {
			c = out.Changes[typ]
			c.Updated = maps.Clone(c.Updated)
			if c.Updated == nil {
				c.Updated = map[string]types.Resource{}
			}
			c.Removed = slices.Clip(c.Removed)
		}
		for _, name := range names {
			r := next[name][i]
			list = append(list, r)
			if old, ok := served[name]; !out.Full && (!ok || !proto.Equal(old[i], r)) {
				c.Updated[name] = r
			}
		}
		for name := range served {
			if _, ok := next[name]; !ok && !out.Full {
				c.Removed = append(c.Removed, name)
			}
		}
		out.Resources[typ] = list
		if !out.Full {
			out.Changes[typ] = c
		}
	}
	return next, nil
}
