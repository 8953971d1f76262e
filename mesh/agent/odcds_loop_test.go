package agent

import (
	"slices"
	"sync"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
)

// loopDeadline bounds every wait below: an answer the agent gives at
// once takes milliseconds, so reaching it means the answer never came.
const loopDeadline = 10 * time.Second

// recvAny takes the next response of any type within loopDeadline and
// ACKs it by its type.
func (s *cdsStream) recvAny(what string) *discovery.DeltaDiscoveryResponse {
	s.t.Helper()
	type result struct {
		resp *discovery.DeltaDiscoveryResponse
		err  error
	}
	got := make(chan result, 1)
	go func() {
		resp, err := s.stream.Recv()
		got <- result{resp, err}
	}()
	select {
	case r := <-got:
		if r.err != nil {
			s.t.Fatalf("delta ADS receive, waiting for %s: %v", what, r.err)
		}
		s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: r.resp.GetTypeUrl(), ResponseNonce: r.resp.GetNonce()})
		return r.resp
	case <-time.After(loopDeadline):
		s.t.Fatalf("no response within %v, waiting for %s", loopDeadline, what)
		return nil
	}
}

// heldAdmissions makes the admission of each name in held wait, a.mu
// held, until release; entered receives every name as its admission
// starts.
type heldAdmissions struct {
	entered chan string
	release chan struct{}
	once    sync.Once
}

func holdAdmissions(t *testing.T, a *Agent, held ...string) *heldAdmissions {
	h := &heldAdmissions{entered: make(chan string, 16), release: make(chan struct{})}
	a.admitting = func(name string) {
		h.entered <- name
		if slices.Contains(held, name) {
			<-h.release
		}
	}
	t.Cleanup(h.releaseAll)
	return h
}

func (h *heldAdmissions) releaseAll() { h.once.Do(func() { close(h.release) }) }

// await waits until name's admission has started.
func (h *heldAdmissions) await(t *testing.T, name string) {
	t.Helper()
	deadline := time.After(loopDeadline)
	for {
		select {
		case n := <-h.entered:
			if n == name {
				return
			}
		case <-deadline:
			t.Fatalf("the admission of %s never started", name)
		}
	}
}

// TestOnDemandAdmissionLeavesStreamFree: while one twin's admission
// runs (held here; in a loaded soak each took up to 1.1 s), the stream
// still answers the proxy's EDS request for the twin it got just before.
// Judged on the stream's loop, the second admission held that EDS
// answer until it was done, and the first twin could not warm within
// the proxy's on-demand timeout (503 NC). The held twin then goes out
// once.
func TestOnDemandAdmissionLeavesStreamFree(t *testing.T) {
	a, _ := twinAgent(t, TransportAuto)
	h := holdAdmissions(t, a, twinB)
	s := openCDS(t, a)
	s.recvAny("the wildcard CDS answer")

	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinA}})
	if resp := s.recvAny(twinA); resp.GetTypeUrl() != resource.ClusterType || !slices.Equal(resourceNames(resp), []string{twinA}) {
		t.Fatalf("response to subscribing %s = %s %v, want the twin alone", twinA, resp.GetTypeUrl(), resourceNames(resp))
	}
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}})
	h.await(t, twinB)
	// Another name subscribed meanwhile, as the proxy's on_demand filter
	// does for each destination its first requests name.
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{noPodSA}})

	// The proxy, given twinA, asks for its load assignment.
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.EndpointType, ResourceNamesSubscribe: []string{twinA}})
	resp := s.recvAny("the EDS answer for " + twinA + " while " + twinB + " is being admitted")
	if resp.GetTypeUrl() != resource.EndpointType || !slices.Equal(resourceNames(resp), []string{twinA}) {
		t.Fatalf("response to the EDS request = %s %v, want %s's load assignment", resp.GetTypeUrl(), resourceNames(resp), twinA)
	}
	cla := &endpoint.ClusterLoadAssignment{}
	if err := resp.GetResources()[0].GetResource().UnmarshalTo(cla); err != nil || len(cla.GetEndpoints()) == 0 {
		t.Fatalf("%s's load assignment = %v (%v), want its endpoints", twinA, cla, err)
	}

	h.releaseAll()
	// Then the held twin, alone, and the refusal of the name subscribed
	// meanwhile, in either order.
	var gotTwin, gotRefusal bool
	for range 2 {
		resp := s.recvAny(twinB + " and the refusal of " + noPodSA)
		switch {
		case resp.GetTypeUrl() == resource.ClusterType && slices.Equal(resourceNames(resp), []string{twinB}) && len(resp.GetRemovedResources()) == 0 && !gotTwin:
			gotTwin = true
		case resp.GetTypeUrl() == resource.ClusterType && len(resp.GetResources()) == 0 && slices.Equal(resp.GetRemovedResources(), []string{noPodSA}) && !gotRefusal:
			gotRefusal = true
		default:
			t.Fatalf("after the admission, response = %s %v removed %v, want %s alone or %s removed, once each", resp.GetTypeUrl(), resourceNames(resp), resp.GetRemovedResources(), twinB, noPodSA)
		}
	}
	// Sent twice, the duplicate would come before this refusal.
	const unknown = "tcp:nope.demo"
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{unknown}})
	if resp := s.recvAny(unknown); len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{unknown}) {
		t.Fatalf("next response = %s %v removed %v, want only %s removed", resp.GetTypeUrl(), resourceNames(resp), resp.GetRemovedResources(), unknown)
	}
}

// TestOnDemandRefusalOfCancelledWatchStated: a request that comes while
// a name is judged cancels the watch judging it; the refusal goes out
// all the same, with the next watch, and once.
func TestOnDemandRefusalOfCancelledWatchStated(t *testing.T) {
	a, _ := twinAgent(t, TransportAuto)
	h := holdAdmissions(t, a, noPodSA)
	s := openCDS(t, a)
	first := s.recvAny("the wildcard CDS answer")

	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{noPodSA}})
	h.await(t, noPodSA)
	// A request naming nothing (an ACK of the wildcard answer again):
	// the server cancels the judging watch and makes the next one.
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResponseNonce: first.GetNonce()})
	for waited := time.Duration(0); !chained(a); waited += time.Millisecond {
		if waited > loopDeadline {
			t.Fatal("the server never made the watch after the judging one")
		}
		time.Sleep(time.Millisecond)
	}
	h.releaseAll()
	if resp := s.recvAny("the refusal of " + noPodSA); len(resp.GetResources()) != 0 || !slices.Equal(resp.GetRemovedResources(), []string{noPodSA}) {
		t.Fatalf("response = %s %v removed %v, want %s removed", resp.GetTypeUrl(), resourceNames(resp), resp.GetRemovedResources(), noPodSA)
	}
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinA}})
	if resp := s.recvAny(twinA); !slices.Equal(resourceNames(resp), []string{twinA}) || len(resp.GetRemovedResources()) != 0 {
		t.Fatalf("next response = %s %v removed %v, want %s alone (the refusal stated once)", resp.GetTypeUrl(), resourceNames(resp), resp.GetRemovedResources(), twinA)
	}
}

// TestOnDemandJudgmentOutlivesItsStream: a stream that ends while one of
// its names is judged gets no watch afterwards (the server has closed
// the channel a watch answers on: a send would panic). The twin is
// admitted all the same: its pair was asked for.
func TestOnDemandJudgmentOutlivesItsStream(t *testing.T) {
	a, _ := twinAgent(t, TransportAuto)
	h := holdAdmissions(t, a, twinB)
	s := openCDS(t, a)
	s.recvAny("the wildcard CDS answer")
	s.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType, ResourceNamesSubscribe: []string{twinB}})
	h.await(t, twinB)
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	// The server ends the stream: its last watch cancelled, it forgets it.
	for waited := time.Duration(0); ; waited += time.Millisecond {
		a.judging.mu.Lock()
		n := len(a.judging.tail)
		a.judging.mu.Unlock()
		if n == 0 {
			break
		}
		if waited > loopDeadline {
			t.Fatal("the server never closed the stream")
		}
		time.Sleep(time.Millisecond)
	}
	h.releaseAll()
	a.judging.running.Wait()
	if n := a.caches[clusterIdx].NumWildcardWatches(); n != 0 {
		t.Fatalf("%d CDS watches open after the stream ended, want none", n)
	}
	if !twinServed(a, twinB) {
		t.Fatalf("%s not admitted", twinB)
	}
}

// chained reports whether a stream's CDS watch waits behind the one
// judging its names.
func chained(a *Agent) bool {
	a.judging.mu.Lock()
	defer a.judging.mu.Unlock()
	for _, w := range a.judging.tail {
		if w.behind {
			return true
		}
	}
	return false
}
