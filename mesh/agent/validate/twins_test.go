package validate_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
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

// eastWest is node-b of the east-west fixture as the agent builds it:
// its pods' QUIC inbounds beside the TCP ones.
func eastWest(t *testing.T) validate.Resources {
	t.Helper()
	st, err := registry.LoadScenarioFile("../../../fixtures/scenarios/eastwest.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	rot, err := identity.NewRotator(ca, store, identity.RotatorConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rot.Keep(agent.LocalAccounts(st, "node-b")); err != nil {
		t.Fatal(err)
	}
	b := agent.NewBuilder("node-b", constants.CaptureTProxy)
	b.HTTP = &agent.HTTPPath{TrustDomain: ca.TrustDomain(), MeshDomain: "mesh.test", AccessLog: "/a.log", Identities: store, EastWest: true}
	out, err := b.Build(st, "v1")
	if err != nil {
		t.Fatal(err)
	}
	r := validate.Resources{}
	for typ, list := range out.Resources {
		for _, res := range list {
			r[typ] = append(r[typ], proto.Clone(res))
		}
	}
	if err := validate.Check(r); err != nil {
		t.Fatalf("control: the east-west snapshot must pass every gate, got %v", err)
	}
	return r
}

func TestQuicR4Gate(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*quicv3.QuicDownstreamTransport)
		want string
	}{
		{"resumption unset", func(q *quicv3.QuicDownstreamTransport) { q.EnableResumption = nil }, "enable_resumption is not stated false"},
		{"early data on", func(q *quicv3.QuicDownstreamTransport) { q.EnableEarlyData = wrapperspb.Bool(true) }, "enable_early_data is not stated false"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := eastWest(t)
			var l *listener.Listener
			for _, res := range r[resource.ListenerType] {
				if res.(*listener.Listener).GetName() == "quic-inbound~demo~api-0" {
					l = res.(*listener.Listener)
				}
			}
			fc := l.GetDefaultFilterChain()
			q := &quicv3.QuicDownstreamTransport{}
			if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(q); err != nil {
				t.Fatal(err)
			}
			c.edit(q)
			a, err := anypb.New(q)
			if err != nil {
				t.Fatal(err)
			}
			fc.TransportSocket.ConfigType = &core.TransportSocket_TypedConfig{TypedConfig: a}
			expectOnly(t, r, validate.GateQuicR4, 1, "quic-inbound~demo~api-0", c.want)
		})
	}
}

// TestCheckAddedClusters: for a snapshot that gained a twin, the check
// that skips the listeners finds what Check finds on the twin (its own
// gates, its load assignment, its secret), and does not look at the
// listeners the snapshot had passed with.
func TestCheckAddedClusters(t *testing.T) {
	gates := func(err error) []string {
		var ve *validate.Error
		if errors.As(err, &ve) {
			return ve.Gates()
		}
		return nil
	}
	if err := validate.CheckAddedClusters(withTwin(t, nil)); err != nil {
		t.Fatalf("a good twin: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(validate.Resources, *cluster.Cluster)
	}{
		{"EDS name of the base", func(r validate.Resources, c *cluster.Cluster) {
			c.EdsClusterConfig.ServiceName = "tcp:a.t"
		}},
		{"no load assignment", func(r validate.Resources, c *cluster.Cluster) { remove(r, resource.EndpointType, twin) }},
		{"per-downstream-connection pooling", func(r validate.Resources, c *cluster.Cluster) {
			c.ConnectionPoolPerDownstreamConnection = true
		}},
		{"secret not in SDS", func(r validate.Resources, c *cluster.Cluster) {
			c.TransportSocket = tlsCluster(t, "spiffe://aether.local/ns/t/sa/nobody").TransportSocket
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var tw *cluster.Cluster
			r := withTwin(t, func(cl *cluster.Cluster) { tw = cl })
			c.edit(r, tw)
			full, added := gates(validate.Check(r)), gates(validate.CheckAddedClusters(r))
			if len(full) == 0 || !slices.Equal(full, added) {
				t.Fatalf("Check fails %v, CheckAddedClusters %v: want the same, and some", full, added)
			}
		})
	}
	t.Run("listeners not walked", func(t *testing.T) {
		r := withTwin(t, nil)
		for _, l := range listeners(r, "") {
			l.Transparent = wrapperspb.Bool(false)
		}
		if validate.Check(r) == nil {
			t.Fatal("control: non-transparent capture listeners passed Check")
		}
		if err := validate.CheckAddedClusters(r); err != nil {
			t.Fatalf("CheckAddedClusters judged the listeners: %v", err)
		}
	})
}
