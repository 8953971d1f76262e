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

// Want with no names wants none: a live stream unsubscribes what was
// held (never an empty request, which would read as wildcard), and a
// fresh stream sends no request for the type until it wants a name again.
func TestWantNothing(t *testing.T) {
	c := &Client{Target: "unix:///test.sock"}
	if err := c.Subscribe(resource.ClusterType); err != nil {
		t.Fatal(err)
	}
	if err := c.Want(resource.EndpointType, "udp:svc-a.default"); err != nil {
		t.Fatal(err)
	}
	live := &stream{}
	if err := c.start(live); err != nil {
		t.Fatal(err)
	}
	if err := c.Want(resource.EndpointType); err != nil {
		t.Fatal(err)
	}
	if len(live.sent) != 3 {
		t.Fatalf("live stream carried %v, want the 2 initial requests and one unsubscribe", types(live.sent))
	}
	if r := live.sent[2]; len(r.GetResourceNamesSubscribe()) != 0 || !slices.Equal(r.GetResourceNamesUnsubscribe(), []string{"udp:svc-a.default"}) {
		t.Fatalf("wanting nothing sent subscribe %v unsubscribe %v, want unsubscribe [udp:svc-a.default] alone", r.GetResourceNamesSubscribe(), r.GetResourceNamesUnsubscribe())
	}
	if err := c.Want(resource.EndpointType); err != nil {
		t.Fatal(err)
	}
	if len(live.sent) != 3 {
		t.Fatalf("wanting nothing again sent %v", live.sent[3:])
	}
	next := &stream{}
	if err := c.start(next); err != nil {
		t.Fatal(err)
	}
	if got := types(next.sent); !slices.Equal(got, []string{resource.ClusterType}) {
		t.Fatalf("a fresh stream's initial requests are for %v, want CDS alone (no EDS request, which would read as wildcard)", got)
	}
	if next.sent[0].GetNode() == nil && c.Node != nil {
		t.Fatal("the first initial request carries no node")
	}
}
