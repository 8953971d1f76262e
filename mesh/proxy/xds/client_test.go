package xds

import (
	"errors"
	"slices"
	"testing"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
)

// stream records what is sent on it and fails the failAt-th send (from 1;
// 0 never fails), as a stream the server closed at once does.
type stream struct {
	grpc.ClientStream
	sent   []*discoveryv3.DeltaDiscoveryRequest
	failAt int
}

func (s *stream) Send(r *discoveryv3.DeltaDiscoveryRequest) error {
	s.sent = append(s.sent, r)
	if len(s.sent) == s.failAt {
		return errors.New("stream closed by the server")
	}
	return nil
}

func (s *stream) Recv() (*discoveryv3.DeltaDiscoveryResponse, error) {
	return nil, errors.New("stream closed by the server")
}

func types(rs []*discoveryv3.DeltaDiscoveryRequest) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.GetTypeUrl())
	}
	return out
}

// A stream whose initial requests fail is never installed: a subscription
// made after it is recorded, not sent on the dead stream, and the next
// stream states every subscription, the late one included.
func TestFailedStartInstallsNothing(t *testing.T) {
	c := &Client{Target: "unix:///test.sock"}
	for _, sub := range []struct {
		typ   string
		names []string
	}{{resource.ClusterType, nil}, {resource.EndpointType, []string{"udp:svc-a.default"}}} {
		if err := c.Subscribe(sub.typ, sub.names...); err != nil {
			t.Fatalf("subscribe %s with no stream: %v", sub.typ, err)
		}
	}
	dead := &stream{failAt: 2}
	if err := c.start(dead); err == nil {
		t.Fatal("start succeeded on a stream whose second initial request failed")
	}
	if err := c.Subscribe(resource.ListenerType); err != nil {
		t.Fatalf("subscribe after a failed start: %v (sent on the dead stream)", err)
	}
	if len(dead.sent) != 2 {
		t.Fatalf("the dead stream carried %v after its failed start, want only the 2 initial requests", types(dead.sent))
	}
	next := &stream{}
	if err := c.start(next); err != nil {
		t.Fatal(err)
	}
	want := []string{resource.ClusterType, resource.EndpointType, resource.ListenerType}
	if got := types(next.sent); !slices.Equal(got, want) {
		t.Fatalf("the next stream's initial requests are for %v, want %v", got, want)
	}
	if got := next.sent[1].GetResourceNamesSubscribe(); !slices.Equal(got, []string{"udp:svc-a.default"}) {
		t.Errorf("the next stream's EDS request subscribes %v, want [udp:svc-a.default]", got)
	}
}
