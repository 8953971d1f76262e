package registry

import (
	"net/netip"
	"strings"
	"testing"
)

const gatewayBase = `
nodes:
  - name: n1
  - name: gw
    gateway: {address: 172.30.0.10, exposes: [web.ns, api.ns]}
pods:
  - {name: w-0, namespace: ns, node: n1, ip: 10.244.0.1, labels: {app: w}}
services:
  - {name: web, namespace: ns, clusterIP: 10.96.0.1, selector: {app: w}, ports: [{port: 8080, appProtocol: http}]}
  - {name: api, namespace: ns, clusterIP: 10.96.0.2, selector: {app: w}, ports: [{port: 9090, appProtocol: http}]}
  - {name: dns, namespace: ns, clusterIP: 10.96.0.3, selector: {app: w}, ports: [{port: 53, protocol: UDP}]}
`

// TestScenarioGateway: a node marked as the cluster's east-west gateway
// carries its address and its exposed services (in key order); every other
// node, and every scenario without the field, has none.
func TestScenarioGateway(t *testing.T) {
	st, err := ParseScenario("gw.yaml", []byte(gatewayBase))
	if err != nil {
		t.Fatal(err)
	}
	if st.Gateway("n1") != nil {
		t.Error("n1 is not a gateway, but has one")
	}
	g := st.Gateway("gw")
	if g == nil {
		t.Fatal("gw has no gateway")
	}
	if g.Address != netip.MustParseAddr("172.30.0.10") {
		t.Errorf("address %s", g.Address)
	}
	want := []Key{{"ns", "api"}, {"ns", "web"}}
	if len(g.Exposes) != 2 || g.Exposes[0] != want[0] || g.Exposes[1] != want[1] {
		t.Errorf("exposes %v, want %v (key order)", g.Exposes, want)
	}
	if g.NetnsPath != "" {
		t.Errorf("netns %q, want none: a node's proxy binds in its own netns", g.NetnsPath)
	}
	st, err = ParseScenario("gw.yaml", []byte(strings.Replace(gatewayBase, "exposes: [web.ns, api.ns]}", "exposes: [web.ns, api.ns], netns: /run/netns/gw}", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Gateway("gw"); g == nil || g.NetnsPath != "/run/netns/gw" {
		t.Errorf("gateway %+v, want netns /run/netns/gw", g)
	}
}

func TestScenarioGatewayErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		wants      []string
	}{
		{"bad address", strings.Replace(gatewayBase, "172.30.0.10", "172.30.0", 1), []string{`node "gw"`, "field gateway.address"}},
		{"loopback address", strings.Replace(gatewayBase, "172.30.0.10", "127.0.0.1", 1), []string{"field gateway.address", "not a unicast address a peer cluster can reach"}},
		{"unknown service", strings.Replace(gatewayBase, "api.ns", "nope.ns", 1), []string{"field gateway.exposes[1]", "unknown service ns/nope"}},
		{"not a service key", strings.Replace(gatewayBase, "api.ns", "api", 1), []string{"field gateway.exposes[1]", "want <service>.<namespace>"}},
		{"no HTTP port", strings.Replace(gatewayBase, "api.ns", "dns.ns", 1), []string{"field gateway.exposes[1]", "has no port with appProtocol"}},
		{"listed twice", strings.Replace(gatewayBase, "api.ns", "web.ns", 1), []string{"field gateway.exposes[1]", "listed twice"}},
		{"exposes nothing", strings.Replace(gatewayBase, "exposes: [web.ns, api.ns]", "exposes: []", 1), []string{"field gateway.exposes", "at least one service"}},
		{"two gateways", strings.Replace(gatewayBase, "  - name: n1\n", "  - name: n1\n    gateway: {address: 172.30.0.11, exposes: [web.ns]}\n", 1), []string{`node "gw"`, "a second east-west gateway"}},
		{"unknown field", strings.Replace(gatewayBase, "exposes:", "expose:", 1), []string{`node "gw"`, "gateway.expose", "unknown field"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseScenario("gw.yaml", []byte(c.yaml))
			if err == nil {
				t.Fatal("broken gateway accepted")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
