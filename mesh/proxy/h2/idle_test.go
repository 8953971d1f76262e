package h2_test

import (
	"net/http"
	"testing"
	"time"

	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// A pooled connection to the app is closed once it has carried no request
// for the inbound cluster's common_http_protocol_options.idle_timeout.
// The agent's cluster is served with its idle_timeout shortened to 300 ms
// (the agent's own minute is in the goldens); a pool that ignores the
// field keeps the connection for Envoy's default hour, and the app never
// sees it close.
func TestIdleAppConnectionIsClosed(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	mc := agentmtls.Mesh{Domain: meshDomain}
	_, cls, err := agentmtls.InboundListenerFor(mc, agentmtls.Pod{Namespace: ns, Name: "dst-0", ID: id("dst"),
		Serves: []agentmtls.Port{{Service: "dst", Namespace: ns, Port: 8080, TargetPort: m.app.port}}})
	if err != nil || len(cls) != 1 {
		t.Fatalf("inbound clusters: %d, %v; want one", len(cls), err)
	}
	in := cls[0]
	if in.GetName() != xdsnames.InboundCluster(ns, "dst-0", m.app.port) {
		t.Fatalf("inbound cluster %q, not the one the listener routes to", in.GetName())
	}
	var po upstreamhttpv3.HttpProtocolOptions
	if err := in.GetTypedExtensionProtocolOptions()[xdsnames.HTTPProtocolOptions].UnmarshalTo(&po); err != nil {
		t.Fatalf("the agent's inbound cluster carries no HttpProtocolOptions: %v", err)
	}
	if po.GetCommonHttpProtocolOptions().GetIdleTimeout() == nil {
		t.Fatal("the agent's inbound cluster states no idle_timeout: its pool keeps idle connections to the app for Envoy's hour")
	}
	po.CommonHttpProtocolOptions.IdleTimeout = durationpb.New(300 * time.Millisecond)
	a, err := anypb.New(&po)
	if err != nil {
		t.Fatal(err)
	}
	in.TypedExtensionProtocolOptions[xdsnames.HTTPProtocolOptions] = a
	m.addCluster(t, in)

	c := &http.Client{Transport: &http.Transport{}}
	for range 3 {
		if code, _ := m.get(t, c, "sa-a", dstAuthority); code != http.StatusOK {
			t.Fatalf("status %d, want 200", code)
		}
	}
	if n := m.app.closed.Load(); n != 0 {
		t.Fatalf("%d connections to the app closed while requests still used them", n)
	}
	// Many times the 300 ms: only a pool that ignores the field misses it.
	deadline := time.Now().Add(10 * time.Second)
	for m.app.closed.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the proxy's pool still holds its idle connection to the app after 10 s; the cluster's idle_timeout is 300 ms")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
