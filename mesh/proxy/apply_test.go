package proxy

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/proxy/internal/proxytest"
)

// recording is an xDS client whose stream is broken: every subscription
// is recorded, as xds.Client records it for the next stream, and every
// send fails.
type recording struct{ subs map[string][]string }

func (r *recording) Subscribe(typeURL string, names ...string) error {
	r.subs[typeURL] = names
	return errors.New("failed to send request: stream closed")
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
