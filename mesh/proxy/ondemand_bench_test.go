package proxy_test

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// pairMesh is a mesh of accounts × services for on-demand pairs: every
// account has a pod on node-a, every service a ready backend on node-b.
func pairMesh(accounts, services int) *registry.State {
	st := &registry.State{Nodes: []registry.Node{{Name: "node-a"}, {Name: "node-b"}}}
	for i := range accounts {
		sa := fmt.Sprintf("sa-%d", i)
		st.ServiceAccounts = append(st.ServiceAccounts, registry.ServiceAccount{Name: sa, Namespace: "demo"})
		st.Pods = append(st.Pods, registry.Pod{Name: fmt.Sprintf("c-%d", i), Namespace: "demo", Node: "node-a",
			ServiceAccount: sa, IP: netip.AddrFrom4([4]byte{10, 244, 1, byte(10 + i)}), Ready: true})
	}
	for j := range services {
		name := fmt.Sprintf("s-%d", j)
		st.Services = append(st.Services, registry.Service{Name: name, Namespace: "demo",
			ClusterIP: netip.AddrFrom4([4]byte{10, 96, 0, byte(10 + j)}), Selector: map[string]string{"app": name},
			Ports: []registry.ServicePort{{Name: "http", Port: 80, TargetPort: 8080, Protocol: registry.ProtocolTCP}}})
		st.Pods = append(st.Pods, registry.Pod{Name: name + "-0", Namespace: "demo", Node: "node-b", ServiceAccount: "default",
			IP: netip.AddrFrom4([4]byte{10, 244, 2, byte(10 + j)}), Labels: map[string]string{"app": name}, Ready: true})
	}
	st.DeriveEndpoints()
	st.Sort()
	return st
}

// BenchmarkOnDemandFirstRequest is the first request of a pair, from the
// proxy's side: the time a request paused on a missing twin waits until
// the twin is active (subscribe, the agent's admission, CDS, EDS), against
// the real agent over its unix socket, both in this process. Each
// iteration is a new pair; the agent's admissions are checked to be one
// per pair, and a second request of each pair to pay no round trip.
//
// Reported: p50-ms and max-ms of the first requests (target ≤ 10 ms), and
// again-us, a later request's wait.
func BenchmarkOnDemandFirstRequest(b *testing.B) {
	const accounts, services = 32, 64
	if b.N > accounts*services {
		b.Fatalf("b.N %d exceeds the %d pairs of the mesh; run with -benchtime=Nx, N ≤ %d", b.N, accounts*services, accounts*services)
	}
	reg := prometheus.NewRegistry()
	a, err := agent.New(agent.Options{Node: "node-a", Mode: constants.CaptureTProxy, Logger: quietLog(), Registerer: reg})
	if err != nil {
		b.Fatal(err)
	}
	if err := a.Apply(pairMesh(accounts, services)); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(b.TempDir(), "xds.sock")
	lis, err := agent.Listen("unix://" + sock)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	gs := a.NewGRPCServer(ctx)
	go func() { _ = gs.Serve(lis) }()
	defer gs.Stop()
	p := proxy.New(proxy.Options{Node: "node-a", XDS: "unix://" + sock, Log: quietLog()})
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-p.ListenersRequested()

	first := make([]time.Duration, 0, b.N)
	var again time.Duration
	b.ResetTimer()
	for i := range b.N {
		twin := xdsnames.TwinCluster(xdsnames.Twin{Service: fmt.Sprintf("s-%d", i/accounts), Namespace: "demo",
			SA: fmt.Sprintf("sa-%d", i%accounts), SANamespace: "demo"})
		start := time.Now()
		if err := p.OnDemand().Await(ctx, twin); err != nil {
			b.Fatalf("pair %d: %v", i, err)
		}
		first = append(first, time.Since(start))
		start = time.Now()
		if err := p.OnDemand().Await(ctx, twin); err != nil {
			b.Fatalf("pair %d again: %v", i, err)
		}
		again += time.Since(start)
	}
	b.StopTimer()
	if n := counterB(b, reg, "aether_agent_odcds_admitted_total"); n != float64(b.N) {
		b.Fatalf("agent admitted %v names for %d pairs", n, b.N)
	}
	slices.Sort(first)
	b.ReportMetric(float64(first[len(first)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(first[len(first)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(again.Nanoseconds())/float64(b.N)/1000, "again-us")
}

func counterB(b *testing.B, reg *prometheus.Registry, name string) float64 {
	b.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		b.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	b.Fatalf("agent metric %s not found", name)
	return 0
}
