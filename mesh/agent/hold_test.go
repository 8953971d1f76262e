package agent

import (
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
)

// TestHoldCacheAnswersAfterRelease: a first wildcard delta request is
// answered at once by the per-type cache even when it is empty (the
// control); behind holdCache it waits for the release, and a watch the
// server cancelled meanwhile is never answered (its channel is closed by
// then).
func TestHoldCacheAnswersAfterRelease(t *testing.T) {
	req := &discovery.DeltaDiscoveryRequest{TypeUrl: resource.ClusterType}
	sub := func() stream.Subscription { return stream.NewDeltaSubscription(nil, nil, nil, true) }

	bare := cache.NewLinearCache(resource.ClusterType)
	ch := make(chan cache.DeltaResponse, 1)
	if _, err := bare.CreateDeltaWatch(req, sub(), ch); err != nil {
		t.Fatal(err)
	}
	if len(ch) != 1 {
		t.Fatal("control: an empty per-type cache does not answer a first wildcard request; holding is not needed")
	}

	lin := cache.NewLinearCache(resource.ClusterType)
	h := newHoldCache(lin)
	waiting, cancelled := make(chan cache.DeltaResponse, 1), make(chan cache.DeltaResponse, 1)
	if _, err := h.CreateDeltaWatch(req, sub(), waiting); err != nil {
		t.Fatal(err)
	}
	cancel, err := h.CreateDeltaWatch(req, sub(), cancelled)
	if err != nil {
		t.Fatal(err)
	}
	if len(waiting) != 0 || len(cancelled) != 0 {
		t.Fatal("a watch was answered before the first publish")
	}
	cancel()
	if err := lin.UpdateResources(map[string]types.Resource{"c": &cluster.Cluster{Name: "c"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := h.release(); err != nil {
		t.Fatal(err)
	}
	if len(waiting) != 1 {
		t.Fatal("the held watch was not answered after the release")
	}
	resp := <-waiting
	if got, err := resp.GetDeltaDiscoveryResponse(); err != nil || len(got.GetResources()) != 1 || got.GetResources()[0].GetName() != "c" {
		t.Fatalf("held watch answered with %v (err %v), want cluster c", got, err)
	}
	if len(cancelled) != 0 {
		t.Fatal("a watch cancelled before the release was answered")
	}
	// After the release, watches go straight through.
	after := make(chan cache.DeltaResponse, 1)
	if _, err := h.CreateDeltaWatch(req, sub(), after); err != nil {
		t.Fatal(err)
	}
	if len(after) != 1 {
		t.Fatal("a watch after the release was not answered at once")
	}
}
