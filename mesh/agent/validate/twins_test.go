package validate_test

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/agent/validate"
)

const twin = "quic:a.t@default.t"

// withTwin is good(t) plus a twin of service a with its own EDS name.
func withTwin(t *testing.T, edit func(*cluster.Cluster)) validate.Resources {
	t.Helper()
	r := good(t)
	c := &cluster.Cluster{
		Name:                 twin,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig: &cluster.Cluster_EdsClusterConfig{ServiceName: twin, EdsConfig: &core.ConfigSource{
			ResourceApiVersion:    core.ApiVersion_V3,
			ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}},
	}
	r[resource.ClusterType] = append(r[resource.ClusterType], c)
	r[resource.EndpointType] = append(r[resource.EndpointType], &endpoint.ClusterLoadAssignment{ClusterName: twin})
	if edit == nil {
		if err := validate.Check(r); err != nil {
			t.Fatalf("control: a twin with its own EDS name and shared pooling must pass, got %v", err)
		}
		return r
	}
	edit(c)
	return r
}

func TestTwinGates(t *testing.T) {
	withTwin(t, nil)
	t.Run("EDS name of the base", func(t *testing.T) {
		r := withTwin(t, func(c *cluster.Cluster) { c.EdsClusterConfig.ServiceName = "tcp:a.t" })
		remove(r, resource.EndpointType, twin)
		expectOnly(t, r, validate.GateTwinEDSName, 2, twin, `"tcp:a.t"`)
	})
	t.Run("per-downstream-connection pooling", func(t *testing.T) {
		r := withTwin(t, func(c *cluster.Cluster) { c.ConnectionPoolPerDownstreamConnection = true })
		expectOnly(t, r, validate.GateTwinPooling, 1, twin, "connection_pool_per_downstream_connection")
	})
}
