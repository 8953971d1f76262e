package proxy_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/ondemand"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// runAgent serves the two-UDP-services scenario as node-a's agent, its pods
// without netns paths so that no capture listener needs a namespace.
func runAgent(t *testing.T) (target string, reg *prometheus.Registry) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "scenarios", "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := registry.ParseScenario("two-udp-services.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Pods {
		st.Pods[i].NetnsPath = ""
	}
	reg = prometheus.NewRegistry()
	a, err := agent.New(agent.Options{Node: "node-a", Mode: constants.CaptureTProxy, Logger: quietLog(), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "xds.sock")
	lis, err := agent.Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gs := a.NewGRPCServer(ctx)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); cancel() })
	return "unix://" + sock, reg
}

// counter reads one agent counter series from reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetName() == label && m.GetLabel()[0].GetValue() == value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("agent metric %s{%s=%q} not found", name, label, value)
	return 0
}

// TestOnDemandTwinAgainstTheAgent runs the proxy's on-demand CDS against
// the real agent: an admissible twin arrives warm with its own load
// assignment; a refused one fails at once (the agent states it absent);
// a later request for the refused name is skipped by the proxy, never
// reaches the agent, and waits out the timeout.
func TestOnDemandTwinAgainstTheAgent(t *testing.T) {
	target, reg := runAgent(t)
	p := proxy.New(proxy.Options{Node: "node-a", XDS: target, Log: quietLog()})
	p.OnDemand().Timeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	<-p.ListenersRequested()

	twin := xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "client", SANamespace: "demo"})
	if err := p.OnDemand().Await(ctx, twin); err != nil {
		t.Fatalf("Await(%s) = %v", twin, err)
	}
	c := p.Active(twin)
	if c == nil {
		t.Fatalf("%s released before it is active", twin)
	}
	if eps := c.Endpoints(); len(eps) != 1 || eps[0].Addr.String() != "10.244.2.10:18008" {
		t.Fatalf("%s endpoints = %v, want a-0 at 18008", twin, eps)
	}

	refused := xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"})
	if err := p.OnDemand().Await(ctx, refused); !errors.Is(err, ondemand.ErrMissing) {
		t.Fatalf("Await(%s) = %v, want ErrMissing (answered absent, not timed out)", refused, err)
	}
	if err := p.OnDemand().Await(ctx, refused); !errors.Is(err, ondemand.ErrTimeout) {
		t.Fatalf("second Await(%s) = %v, want ErrTimeout: the name is subscribed already, nothing is sent", refused, err)
	}
	if n := counter(t, reg, "aether_agent_odcds_refused_total", "reason", agent.RefusedNoLocalPod); n != 1 {
		t.Fatalf("agent refused %v times, want once: the proxy asks for a name once", n)
	}
	if n := counter(t, reg, "aether_agent_odcds_admitted_total", "", ""); n != 1 {
		t.Fatalf("agent admitted %v, want 1", n)
	}
}

// TestTwinSharingItsBaseEDSNameStalls is #1008 at the proxy: a twin added
// after its base cluster's EDS name was subscribed and answered, and
// naming that same EDS resource, gets no EDS response (the subscription
// did not change), so it never warms and its request fails at the
// on_demand timeout. The subject, a twin with its own EDS name, warms at
// once.
func TestTwinSharingItsBaseEDSNameStalls(t *testing.T) {
	const base = "tcp:svc-a.demo"
	ep := netip.MustParseAddrPort("10.244.2.10:18008")
	for _, c := range []struct {
		name, twin, eds string
		warms           bool
	}{
		{"control: the base's EDS name", "quic:svc-a.demo@c.demo", base, false},
		{"subject: its own EDS name", "quic:svc-a.demo@c.demo", "quic:svc-a.demo@c.demo", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := proxytest.NewServer(t)
			snap := map[resource.Type][]types.Resource{
				resource.ClusterType:  {proxytest.EDSCluster(base)},
				resource.EndpointType: {proxytest.Assignment(base, ep)},
			}
			srv.Set(t, node, snap)
			p := runProxy(t, srv)
			p.OnDemand().Timeout = 300 * time.Millisecond
			if err := p.OnDemand().Await(context.Background(), base); err != nil {
				t.Fatalf("base cluster: %v", err)
			}
			twin := proxytest.EDSCluster(c.twin)
			twin.EdsClusterConfig.ServiceName = c.eds
			snap[resource.ClusterType] = append(snap[resource.ClusterType], twin)
			if c.eds != base {
				snap[resource.EndpointType] = append(snap[resource.EndpointType], proxytest.Assignment(c.eds, ep))
			}
			srv.Set(t, node, snap)
			err := p.OnDemand().Await(context.Background(), c.twin)
			if c.warms && err != nil {
				t.Fatalf("twin with its own EDS name: %v", err)
			}
			if !c.warms && !errors.Is(err, ondemand.ErrTimeout) {
				t.Fatalf("control broken: twin sharing the base's EDS name = %v, want the on_demand timeout", err)
			}
		})
	}
}
