package h3

import (
	"net/netip"
	"testing"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// TestAgentQuicResourcesCompile: the QUIC transport sockets the agent
// emits compile here: the inbound's chains with resumption and early data
// off, the twin's upstream with its SNI and the source's SVID.
func TestAgentQuicResourcesCompile(t *testing.T) {
	in, _, err := mtls.InboundListenerFor(mtls.Mesh{Domain: "mesh.test"}, mtls.Pod{Namespace: "demo", Name: "api-0",
		ID: "spiffe://aether.test/ns/demo/sa/api", IP: netip.MustParseAddr("10.244.2.10"), NetnsPath: "/run/netns/api-0",
		Serves: []mtls.Port{{Service: "api", Namespace: "demo", Port: 8080, TargetPort: 7080}}})
	if err != nil {
		t.Fatal(err)
	}
	q, err := eastwest.QuicInbound(in, "demo", "api-0", "/run/netns/api-0")
	if err != nil {
		t.Fatal(err)
	}
	for i, fc := range append(q.GetFilterChains(), q.GetDefaultFilterChain()) {
		d, err := DownstreamFromProto(fc.GetTransportSocket(), "chain")
		if err != nil {
			t.Fatalf("chain %d: %v", i, err)
		}
		if d.EnableResumption || d.EnableEarlyData {
			t.Fatalf("chain %d: resumption %v, early data %v; want both off", i, d.EnableResumption, d.EnableEarlyData)
		}
		if !d.TLS.GetRequireClientCertificate().GetValue() {
			t.Fatalf("chain %d: client certificate not required", i)
		}
	}
	c, err := eastwest.TwinCluster(eastwest.Twin{Twin: xdsnames.Twin{Service: "api", Namespace: "demo", SA: "web", SANamespace: "demo"},
		Port: 8080, Domain: "mesh.test", SourceID: "spiffe://aether.test/ns/demo/sa/web", Accounts: []string{"spiffe://aether.test/ns/demo/sa/api"}})
	if err != nil {
		t.Fatal(err)
	}
	u, err := UpstreamFromProto(c.GetTransportSocket(), "cluster")
	if err != nil {
		t.Fatal(err)
	}
	if u.GetSni() != "8080.api.demo.mesh.test" || u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName() != "spiffe://aether.test/ns/demo/sa/web" {
		t.Fatalf("twin upstream: SNI %q, certificate %v", u.GetSni(), u.GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs())
	}
}
