package validate_test

import (
	"net/netip"
	"slices"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

const srcID = "spiffe://aether.test/ns/t/sa/src"

// withHTTPPath adds a pod's outbound listener routing to h2:dst.t, and,
// as asked, the h2 cluster and the secrets it and the listener name.
func withHTTPPath(t *testing.T, cluster, secrets bool) validate.Resources {
	t.Helper()
	r := good(t)
	m := mtls.Mesh{Domain: "mesh.test", AccessLog: "/dev/null"}
	l, err := mtls.OutboundListenerFor(m, mtls.Pod{Namespace: "t", Name: "src-0", ID: srcID, IP: netip.MustParseAddr("10.244.0.5"), NetnsPath: "/run/netns/src-0"},
		[]mtls.Route{{Service: "dst", Namespace: "t"}}, mtls.HashableString)
	if err != nil {
		t.Fatal(err)
	}
	r[resource.ListenerType] = append(r[resource.ListenerType], l)
	if cluster {
		c, err := mtls.H2ClusterFor(m, mtls.Service{Name: "dst", Namespace: "t", Port: 8080, Accounts: []string{"spiffe://aether.test/ns/t/sa/dst"}}, mtls.Upstream{})
		if err != nil {
			t.Fatal(err)
		}
		r[resource.ClusterType] = append(r[resource.ClusterType], c)
		r[resource.EndpointType] = append(r[resource.EndpointType], mtls.H2Assignment("dst", "t", []netip.Addr{netip.MustParseAddr("10.244.0.6")}))
	}
	if secrets {
		r[resource.SecretType] = append(r[resource.SecretType], &tlsv3.Secret{Name: srcID}, &tlsv3.Secret{Name: xdsnames.TrustBundleSecret})
	}
	return r
}

func TestRouteClustersResolve(t *testing.T) {
	expectOnly(t, withHTTPPath(t, false, true), validate.GateRouteClusters, 1, "h2:dst.t", "not in CDS")
	if err := validate.Check(withHTTPPath(t, true, true)); err != nil {
		t.Fatalf("with the h2 cluster present the snapshot must pass: %v", err)
	}
}

// A twin selection's on_no_match is the h2 floor: a floor not in CDS is
// red, the arms (twins fetched on demand) are not.
func TestRouteClustersResolveSelectionFloor(t *testing.T) {
	withSelection := func(floor string) validate.Resources {
		r := withHTTPPath(t, true, true)
		ls := r[resource.ListenerType]
		sel := eastwest.Selection{Key: xdsnames.CertMapperFilterStateKey, Twins: map[string]string{srcID: "quic:dst.t@src.t"}, Floor: floor}
		l, err := eastwest.WithTwins(ls[len(ls)-1].(*listenerv3.Listener), map[string]eastwest.Selection{"h2:dst.t": sel})
		if err != nil {
			t.Fatal(err)
		}
		ls[len(ls)-1] = l
		return r
	}
	if err := validate.Check(withSelection("h2:dst.t")); err != nil {
		t.Fatalf("a selection whose floor is in CDS must pass (its arm is fetched on demand): %v", err)
	}
	expectOnly(t, withSelection("h2:gone.t"), validate.GateRouteClusters, 1, "on_no_match", "h2:gone.t", "not in CDS")
}

// The identity an outbound listener stamps for the certificate mapper is
// an SDS name like any other: without its secret the gate is red.
func TestMapperIdentityResolvesInSDS(t *testing.T) {
	r := withHTTPPath(t, true, true)
	r[resource.SecretType] = slices.DeleteFunc(r[resource.SecretType], func(s types.Resource) bool {
		return s.(*tlsv3.Secret).GetName() == srcID
	})
	expectOnly(t, r, validate.GateSDSNames, 1, srcID, "certificate mapper")
}
