package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// cdsStream is a proxy's CDS stream as Envoy opens it for on-demand CDS:
// wildcard first, names added later by resource_names_subscribe.
type cdsStream struct {
	t      *testing.T
	stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesClient
}

func openCDS(t *testing.T, a *Agent, initial ...string) *cdsStream {
	t.Helper()
	return openCDSWith(t, a, &discovery.DeltaDiscoveryRequest{ResourceNamesSubscribe: initial})
}

// openCDSWith opens a stream whose first CDS request is first, with the
// node and type set.
func openCDSWith(t *testing.T, a *Agent, first *discovery.DeltaDiscoveryRequest) *cdsStream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	lis, err := Listen("unix://" + filepath.Join(t.TempDir(), "xds.sock"))
	if err != nil {
		t.Fatal(err)
	}
	gs := a.NewGRPCServer(ctx)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("unix://"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	stream, err := discovery.NewAggregatedDiscoveryServiceClient(conn).DeltaAggregatedResources(ctx)
	if err != nil {
		t.Fatalf("failed to open delta ADS stream: %v", err)
	}
	s := &cdsStream{t: t, stream: stream}
	first.Node, first.TypeUrl = &core.Node{Id: "node-a"}, resource.ClusterType
	s.send(first)
	return s
}

func (s *cdsStream) send(req *discovery.DeltaDiscoveryRequest) {
	s.t.Helper()
	if err := s.stream.Send(req); err != nil {
		s.t.Fatalf("delta ADS send: %v", err)
	}
}

// recv takes the next CDS response and ACKs it.
func (s *cdsStream) recv() *discovery.DeltaDiscoveryResponse {
	s.t.Helper()
	resp, err := s.stream.Recv()
	if err != nil {
		s.t.Fatalf("delta ADS receive: %v", err)
	}
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: resp.GetNonce()})
	return resp
}

func (s *cdsStream) subscribe(names ...string) *discovery.DeltaDiscoveryResponse {
	s.t.Helper()
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: names})
	return s.recv()
}

func resourceNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var out []string
	for _, r := range resp.GetResources() {
		out = append(out, r.GetName())
	}
	slices.Sort(out)
	return out
}

func twinAgent(t *testing.T, transport MeshTransport) (*Agent, *registry.State) {
	t.Helper()
	st, err := registry.ParseScenario("two-udp-services.yaml", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, Transport: transport,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	return a, st
}

var (
	twinA   = xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "client", SANamespace: "demo"})
	twinB   = xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-b", Namespace: "demo", SA: "client", SANamespace: "demo"})
	noPodSA = xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"})
)

// TestOnDemandTwinAdmittedOnce: a twin subscribed by name on a wildcard
// CDS stream arrives in one response holding it alone, with its own EDS
// name and its load assignment published beside it; it is not sent again
// (the next response on the stream is the answer to the next request),
// and the pair is counted once.
func TestOnDemandTwinAdmittedOnce(t *testing.T) {
	a, _ := twinAgent(t, TransportAuto)
	s := openCDS(t, a)
	if first := s.recv(); !slices.Contains(resourceNames(first), xdsnames.UDPCluster("svc-a", "demo")) || slices.Contains(resourceNames(first), twinA) {
		t.Fatalf("wildcard CDS = %v, want the base clusters and no twin", resourceNames(first))
	}

	resp := s.subscribe(twinA)
	if got := resourceNames(resp); !slices.Equal(got, []string{twinA}) || len(resp.GetRemovedResources()) != 0 {
		t.Fatalf("response to subscribing %s = %v removed %v, want the twin alone", twinA, got, resp.GetRemovedResources())
	}
	c := &cluster.Cluster{}
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(c); err != nil {
		t.Fatal(err)
	}
	if eds := c.GetEdsClusterConfig().GetServiceName(); eds != twinA || eds == xdsnames.UDPCluster("svc-a", "demo") {
		t.Fatalf("twin EDS name = %q, want its own name %q", eds, twinA)
	}
	cla, ok := a.caches[endpointIdx].GetResources()[twinA].(*endpoint.ClusterLoadAssignment)
	if !ok {
		t.Fatalf("twin %s published without its load assignment", twinA)
	}
	sa := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	if sa.GetAddress() != "10.244.2.10" || sa.GetPortValue() != uint32(constants.InboundPort) || sa.GetProtocol() != core.SocketAddress_UDP {
		t.Fatalf("twin endpoint = %v, want a-0 at UDP %d", sa, constants.InboundPort)
	}

	// Had the twin gone out twice, the duplicate would be the next
	// response; it must be the refusal of the next name.
	if resp := s.subscribe(noPodSA); len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{noPodSA}) {
		t.Fatalf("after the twin, next response = %v removed %v, want only %s removed", resourceNames(resp), resp.GetRemovedResources(), noPodSA)
	}
	if n := testutil.ToFloat64(a.metrics.odcdsAdmitted); n != 1 {
		t.Fatalf("admitted = %v, want 1", n)
	}
	if n := testutil.ToFloat64(a.metrics.twins); n != 1 {
		t.Fatalf("twins = %v, want 1", n)
	}
}

// TestOnDemandRefusalsAnsweredAbsent: every refused name is answered in
// removed_resources at once (the cache alone would never answer it) and
// counted with its reason; no twin is recorded.
func TestOnDemandRefusalsAnsweredAbsent(t *testing.T) {
	for _, c := range []struct {
		name, cluster, reason string
		transport             MeshTransport
	}{
		{"source account without a local pod", noPodSA, RefusedNoLocalPod, TransportAuto},
		{"unknown destination", xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-z", Namespace: "demo", SA: "client", SANamespace: "demo"}), RefusedUnknownDestination, TransportAuto},
		{"not a twin", "tcp:nope.demo", RefusedUnknownName, TransportAuto},
		{"h2 floor", twinA, RefusedTransportH2, TransportH2},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, _ := twinAgent(t, c.transport)
			s := openCDS(t, a)
			s.recv()
			resp := s.subscribe(c.cluster)
			if len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{c.cluster}) {
				t.Fatalf("response = %v removed %v, want %s removed", resourceNames(resp), resp.GetRemovedResources(), c.cluster)
			}
			if n := testutil.ToFloat64(a.metrics.odcdsRefused.WithLabelValues(c.reason)); n != 1 {
				t.Fatalf("refused{%s} = %v, want 1", c.reason, n)
			}
			if len(a.Pairs()) != 0 || testutil.ToFloat64(a.metrics.odcdsAdmitted) != 0 {
				t.Fatalf("a refused name recorded pairs %v", a.Pairs())
			}
		})
	}
}

// TestOnDemandFreshStreamNamesTwins: a fresh stream (a reconnecting
// proxy) subscribes to the wildcard and its on-demand names in its first
// request; the agent admits them there too.
func TestOnDemandFreshStreamNamesTwins(t *testing.T) {
	a, _ := twinAgent(t, TransportAuto)
	s := openCDS(t, a, "*", twinA)
	if got := resourceNames(s.recv()); !slices.Contains(got, twinA) || !slices.Contains(got, xdsnames.UDPCluster("svc-b", "demo")) {
		t.Fatalf("first response = %v, want the base clusters and %s", got, twinA)
	}
}

// TestTwinsSurviveRebuilds: a recorded pair's twin follows the registry:
// kept across an incremental and a full build, its load assignment
// updated when its destination's endpoints move, removed while its
// source account has no pod on the node, back when one returns.
func TestTwinsSurviveRebuilds(t *testing.T) {
	a, st := twinAgent(t, TransportAuto)
	if refused := a.admit([]string{twinA, twinB}); len(refused) != 0 {
		t.Fatalf("refused %v", refused)
	}
	has := func(name string) bool {
		_, c := a.caches[clusterIdx].GetResources()[name]
		_, e := a.caches[endpointIdx].GetResources()[name]
		if c != e {
			t.Fatalf("%s: cluster served %v, load assignment served %v", name, c, e)
		}
		return c
	}
	edit := func(f func(*registry.State)) {
		t.Helper()
		next := cloneState(st)
		f(next)
		if err := a.Apply(next); err != nil {
			t.Fatal(err)
		}
		st = next
	}
	// Incremental: a-0 moves address.
	edit(func(s *registry.State) {
		s.Endpoints[registry.Key{Namespace: "demo", Name: "svc-a"}][0].IP = mustAddr("10.244.2.20")
	})
	cla := a.caches[endpointIdx].GetResources()[twinA].(*endpoint.ClusterLoadAssignment)
	if got := cla.GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress().GetAddress(); got != "10.244.2.20" {
		t.Fatalf("twin endpoint after the move = %s, want 10.244.2.20", got)
	}
	// Full (the dependency set changes): still served.
	edit(func(s *registry.State) {
		i := slices.IndexFunc(s.Pods, func(p registry.Pod) bool { return p.Name == "client-0" })
		s.Pods[i].DependsOn = []registry.Key{{Namespace: "demo", Name: "svc-a"}}
	})
	if !has(twinA) {
		t.Fatalf("%s dropped by a full build", twinA)
	}
	if has(twinB) {
		t.Fatalf("%s served though svc-b left the dependency set", twinB)
	}
	// The client pod leaves: no twin; it returns: the twin is back.
	pods := st.Pods
	edit(func(s *registry.State) {
		s.Pods = slices.DeleteFunc(slices.Clone(s.Pods), func(p registry.Pod) bool { return p.Name == "client-0" })
	})
	if has(twinA) {
		t.Fatalf("%s served with no pod of its account on the node", twinA)
	}
	edit(func(s *registry.State) { s.Pods = pods })
	if !has(twinA) {
		t.Fatalf("%s not served again once its account has a pod", twinA)
	}
	if n := testutil.ToFloat64(a.metrics.twins); n != 1 {
		t.Fatalf("twins gauge = %v, want 1", n)
	}
}

// cloneState copies what the tests edit: pods and endpoint lists.
func cloneState(st *registry.State) *registry.State {
	next := *st
	next.Pods = slices.Clone(st.Pods)
	next.Endpoints = map[registry.Key][]registry.Endpoint{}
	for k, eps := range st.Endpoints {
		next.Endpoints[k] = slices.Clone(eps)
	}
	return &next
}

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

func TestNewRefusesUnknownTransport(t *testing.T) {
	_, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, Transport: "h3"})
	if err == nil || !strings.Contains(err.Error(), `invalid mesh transport "h3"`) {
		t.Fatalf("New with transport h3 = %v, want an error naming it", err)
	}
}

// formatCount counts how often it is formatted.
type formatCount struct{ n *int }

func (f formatCount) String() string { *f.n++; return "x" }

// TestCacheLoggerFormatsOnlyEnabledLevels: the cache's debug messages,
// which carry whole subscription maps, are not formatted when debug is
// off (they were 60% of the agent's CPU on an on-demand twin).
func TestCacheLoggerFormatsOnlyEnabledLevels(t *testing.T) {
	n := 0
	l := cacheLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo})))
	l.Debugf("watch %v", formatCount{&n})
	l.Infof("watch %v", formatCount{&n})
	if n != 0 {
		t.Fatalf("disabled levels formatted their arguments %d times", n)
	}
	l.Warnf("watch %v", formatCount{&n})
	if n != 1 {
		t.Fatalf("an enabled level formatted its arguments %d times, want 1", n)
	}
}

// TestOnDemandNamesBeforeFirstBuild: names a CDS stream subscribes to
// before the agent's first build are judged when it lands: the refused
// one is answered absent, the admissible twin comes with the wildcard
// answer.
func TestOnDemandNamesBeforeFirstBuild(t *testing.T) {
	st, err := registry.ParseScenario("two-udp-services.yaml", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := New(Options{Node: "node-a", Mode: constants.CaptureTProxy, Transport: TransportAuto,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s := openCDS(t, a, "*", twinA, noPodSA)
	// The request must have reached the agent before the build.
	for waited := time.Duration(0); ; waited += time.Millisecond {
		a.mu.Lock()
		a.served.mu.Lock()
		n := len(a.unjudged) + len(a.served.held)
		a.served.mu.Unlock()
		a.mu.Unlock()
		if n > 0 {
			break
		}
		if waited > 10*time.Second {
			t.Fatal("the CDS request never reached the agent")
		}
		time.Sleep(time.Millisecond)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	if resp := s.recv(); len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{noPodSA}) {
		t.Fatalf("first response = %v removed %v, want %s refused", resourceNames(resp), resp.GetRemovedResources(), noPodSA)
	}
	if got := resourceNames(s.recv()); !slices.Contains(got, twinA) || !slices.Contains(got, xdsnames.UDPCluster("svc-b", "demo")) {
		t.Fatalf("wildcard answer = %v, want the base clusters and %s", got, twinA)
	}
	if n := testutil.ToFloat64(a.metrics.odcdsRefused.WithLabelValues(RefusedNoLocalPod)); n != 1 {
		t.Fatalf("refused{%s} = %v, want 1", RefusedNoLocalPod, n)
	}
}
