package listener_test

import (
	"net/netip"
	"strings"
	"testing"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
)

var testMesh = agentmtls.Mesh{Domain: "mesh.test", AccessLog: "/dev/null"}

func inbound(t *testing.T) *listenerv3.Listener {
	t.Helper()
	l, _, err := agentmtls.InboundListenerFor(testMesh, agentmtls.Pod{
		Namespace: "demo", Name: "dst-0", ID: "spiffe://aether.test/ns/demo/sa/dst", IP: netip.MustParseAddr("10.244.1.2"), NetnsPath: "/run/netns/x",
		Serves: []agentmtls.Port{{Service: "dst", Namespace: "demo", Port: 8080, TargetPort: 7080}, {Service: "dst", Namespace: "demo", Port: 9090, TargetPort: 7090}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func outbound(t *testing.T) *listenerv3.Listener {
	t.Helper()
	l, err := agentmtls.OutboundListenerFor(testMesh, agentmtls.Pod{Namespace: "demo", Name: "a-0", ID: "spiffe://aether.test/ns/demo/sa/a", NetnsPath: "/run/netns/a"},
		[]agentmtls.Route{{Service: "dst", Namespace: "demo"}}, agentmtls.HashableString)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// The agent's two HTTP listeners compile to what they say.
func TestHTTPListenersCompile(t *testing.T) {
	in, err := listener.FromProto(inbound(t))
	if err != nil {
		t.Fatal(err)
	}
	c, ok := in.HTTP.Select("9090.dst.demo.mesh.test")
	if !ok || c.TLS == nil || !c.TLS.RequireClientCert || c.HCM.Hosts[0].Cluster != "inbound:demo~dst-0:7090" || !c.HCM.SetXFCC {
		t.Errorf("SNI 9090 selects %+v, want the TLS chain to inbound:demo~dst-0:7090 with XFCC set", c)
	}
	if _, ok := in.HTTP.Select("7777.dst.demo.mesh.test"); ok {
		t.Error("an SNI no chain names selected a chain")
	}
	out, err := listener.FromProto(outbound(t))
	if err != nil {
		t.Fatal(err)
	}
	oc, _ := out.HTTP.Select("")
	if len(oc.FilterState) != 1 || !oc.FilterState[0].Hashable || !oc.FilterState[0].Shared || oc.FilterState[0].Value != "spiffe://aether.test/ns/demo/sa/a" {
		t.Errorf("outbound filter state %+v, want the pod's ID, hashable and shared", oc.FilterState)
	}
	vh, _ := oc.HCM.Route("DST.demo.mesh.test:18081")
	if vh == nil || vh.Cluster != "h2:dst.demo" {
		t.Errorf("authority with port routes to %+v, want h2:dst.demo", vh)
	}
	if vh, _ := oc.HCM.Route("x.demo.mesh.test"); vh == nil || vh.Direct == nil || vh.Direct.Status != 404 {
		t.Errorf("unknown authority routes to %+v, want the 404 direct response", vh)
	}
}

// A field outside the contract is refused, named by its path.
func TestHTTPListenerNACKsUnsupportedFields(t *testing.T) {
	for _, c := range []struct {
		name  string
		mod   func(*listenerv3.Listener)
		field string
	}{
		{"hcm use_remote_address", func(l *listenerv3.Listener) {
			modHCM(t, l, func(h *hcmv3.HttpConnectionManager) { h.UseRemoteAddress = wrapperspb.Bool(true) })
		}, ".typed_config.use_remote_address"},
		{"hcm forward_client_cert_details FORWARD_ONLY", func(l *listenerv3.Listener) {
			modHCM(t, l, func(h *hcmv3.HttpConnectionManager) {
				h.ForwardClientCertDetails = hcmv3.HttpConnectionManager_FORWARD_ONLY
			})
		}, "forward_client_cert_details: FORWARD_ONLY is not supported"},
		{"no tls_inspector", func(l *listenerv3.Listener) { l.ListenerFilters = nil }, "listener_filters: want exactly envoy.filters.listener.tls_inspector"},
		{"duplicate SNI", func(l *listenerv3.Listener) {
			l.FilterChains[1].FilterChainMatch.ServerNames = l.FilterChains[0].FilterChainMatch.ServerNames
		}, "multiple filter chains with the same matching rules"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := inbound(t)
			c.mod(l)
			_, err := listener.FromProto(l)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Errorf("error %v, want one naming %q", err, c.field)
			}
		})
	}
}

func modHCM(t *testing.T, l *listenerv3.Listener, mod func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	f := l.FilterChains[0].Filters[0]
	var h hcmv3.HttpConnectionManager
	if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
		t.Fatal(err)
	}
	h2 := proto.Clone(&h).(*hcmv3.HttpConnectionManager)
	mod(h2)
	a, err := anypb.New(h2)
	if err != nil {
		t.Fatal(err)
	}
	f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
}
