package proxy

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// recording is an xDS client whose stream is broken: every subscription
// is recorded, as xds.Client records it for the next stream, and every
// send fails.
type recording struct{ subs map[string][]string }

func (r *recording) Subscribe(typeURL string, names ...string) error {
	r.subs[typeURL] = names
	return errors.New("failed to send request: stream closed")
}

func (r *recording) Want(typeURL string, names ...string) error {
	return r.Subscribe(typeURL, names...)
}

func offline(t *testing.T) (*Proxy, *recording) {
	t.Helper()
	p := New(Options{Node: "node-1", XDS: "unix:///nonexistent", Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	r := &recording{subs: map[string][]string{}}
	p.sub = r
	return p, r
}

func clusterResources(t *testing.T, cs ...*clusterv3.Cluster) []*discoveryv3.Resource {
	t.Helper()
	var out []*discoveryv3.Resource
	for _, c := range cs {
		a, err := anypb.New(c)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &discoveryv3.Resource{Name: c.GetName(), Version: "v1", Resource: a})
	}
	return out
}

// A valid CDS response is applied and ACKed even when the EDS subscription
// it causes cannot be sent: the failed send ended the stream, the names
// are recorded for the next one, and NACKing a response already applied
// would leave the proxy running what it told the server it refused.
func TestCDSAppliedWholeWhenEDSSubscribeFails(t *testing.T) {
	p, r := offline(t)
	err := p.OnUpdate(resource.ClusterType, clusterResources(t, proxytest.EDSCluster("udp:svc-a.default"), proxytest.Blackhole()), nil)
	if err != nil {
		t.Fatalf("a valid CDS response was rejected: %v", err)
	}
	if p.Active("blackhole") == nil {
		t.Error("the STATIC cluster of the applied response is not active")
	}
	p.mu.Lock()
	warming := p.warming["udp:svc-a.default"] != nil
	p.mu.Unlock()
	if !warming {
		t.Error("the EDS cluster of the applied response is not warming")
	}
	if got := r.subs[resource.EndpointType]; !slices.Equal(got, []string{"udp:svc-a.default"}) {
		t.Errorf("EDS subscription recorded for the next stream: %v, want [udp:svc-a.default]", got)
	}
}

// When the last EDS cluster goes, its load assignment's name is no longer
// wanted: keeping it subscribed with nothing to hold it meant that a
// cluster of the same name returning later sent no request (the name
// counted as subscribed already) and, its assignment having come before
// it and been dropped, warmed for ever.
func TestLastEDSClusterUnsubscribes(t *testing.T) {
	p, r := offline(t)
	if err := p.OnUpdate(resource.ClusterType, clusterResources(t, proxytest.EDSCluster("udp:svc-a.default"), proxytest.Blackhole()), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.OnUpdate(resource.ClusterType, nil, []string{"udp:svc-a.default"}); err != nil {
		t.Fatal(err)
	}
	if got, ok := r.subs[resource.EndpointType]; !ok || len(got) != 0 {
		t.Fatalf("EDS names wanted after the last EDS cluster went: %v (recorded: %v), want none", got, ok)
	}
}

// A CDS response with one bad cluster is refused whole: the error names
// the resource and field, and the good clusters beside it are neither
// active nor warming, nor subscribed.
func TestCDSRefusedWhole(t *testing.T) {
	p, r := offline(t)
	bad := proxytest.EDSCluster("udp:bad.default")
	bad.RespectDnsTtl = true
	err := p.OnUpdate(resource.ClusterType, clusterResources(t, proxytest.Blackhole(), proxytest.EDSCluster("udp:svc-a.default"), bad), nil)
	if want := `Cluster "udp:bad.default".respect_dns_ttl`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one naming %s", err, want)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.active) != 0 || len(p.warming) != 0 || len(r.subs) != 0 {
		t.Fatalf("a refused response left active %v, warming %v, subscriptions %v", p.active, p.warming, r.subs)
	}
}

func listenerResources(t *testing.T, ls ...*listenerv3.Listener) []*discoveryv3.Resource {
	t.Helper()
	var out []*discoveryv3.Resource
	for _, l := range ls {
		a, err := anypb.New(l)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, &discoveryv3.Resource{Name: l.GetName(), Version: "v1", Resource: a})
	}
	return out
}

// When a listener takes over the address of one the same response
// removes, the departing one has to close first; if the new one then fails
// to bind, the departing one is bound again and nothing of the response is
// applied: its address answers again, under its old name.
func TestFailedHandoverRestoresTheHolder(t *testing.T) {
	p, _ := offline(t)
	t.Cleanup(p.Close)
	free, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	port := uint32(free.Addr().(*net.TCPAddr).Port)
	_ = free.Close()
	if err := p.OnUpdate(resource.ListenerType, listenerResources(t, proxytest.LoopbackTCPListener("tcp-a", port)), nil); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("injected bind failure")
	p.listen = func(s *listener.Spec) (running, error) {
		if s.Name == "tcp-b" {
			return running{}, refused
		}
		return p.open(s)
	}
	err = p.OnUpdate(resource.ListenerType, listenerResources(t, proxytest.LoopbackTCPListener("tcp-b", port)), []string{"tcp-a"})
	if !errors.Is(err, refused) || !strings.Contains(err.Error(), `Listener "tcp-b".address`) {
		t.Fatalf("error %v, want the injected failure naming tcp-b", err)
	}
	if got := p.Listeners(); !slices.Equal(got, []string{"tcp-a"}) {
		t.Fatalf("listeners after the failed response: %v, want [tcp-a]", got)
	}
	c, err := net.Dial("tcp4", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("tcp-a's address does not answer after the failed handover: %v", err)
	}
	_ = c.Close()
}
