package agent

import (
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// MeshTransport is how a node's proxies reach eligible destinations.
type MeshTransport string

const (
	// TransportAuto is HTTP/3 over a per-source twin wherever eligible.
	TransportAuto MeshTransport = "auto"
	// TransportH2 forces the HTTP/2 floor: no twin is ever admitted.
	TransportH2 MeshTransport = "h2"
)

// onDemandCDS is the cache the ADS server serves: the agent's, with the
// agent's side of on-demand CDS in front (ARCHITECTURE.md, "On-demand
// twins"). A proxy's CDS stream is wildcard; its on_demand filter later
// adds a name by resource_names_subscribe, and the stream stays wildcard.
// Each such name is admitted or refused here, after the server has
// cancelled the stream's previous watch and before it makes the next one:
// an admitted twin is then in the cache when the new watch computes its
// answer, so it goes out once (made any earlier, in the request callback,
// the old watch would fire with it and the new one again).
type onDemandCDS struct {
	cache.Cache
	a *Agent
}

func (o *onDemandCDS) CreateDeltaWatch(req *cache.DeltaRequest, sub cache.Subscription, value chan cache.DeltaResponse) (func(), error) {
	typ := req.GetTypeUrl()
	if typ != resource.ClusterType && typ != resource.EndpointType {
		return o.Cache.CreateDeltaWatch(req, sub, value)
	}
	a := o.a
	names := typ == resource.ClusterType && len(req.GetResourceNamesSubscribe()) > 0
	a.mu.Lock()
	if a.state == nil && (names || a.withdrawsLiveTwin(typ, sub)) {
		// Before the first build there is nothing to judge the names
		// against, and what is served may lack a live pair's twin: the
		// whole watch waits for the build (judgeUnjudged).
		create := func() (func(), error) { return o.Cache.CreateDeltaWatch(req, sub, value) }
		if names {
			create = func() (func(), error) { return o.answer(req, sub, value, a.admitLocked) }
		}
		w := &unjudgedWatch{create: create}
		a.unjudged = append(a.unjudged, w)
		a.mu.Unlock()
		return w.cancelWatch, nil
	}
	a.mu.Unlock()
	if !names {
		return o.Cache.CreateDeltaWatch(req, sub, value)
	}
	return o.answer(req, sub, value, a.admit)
}

// withdrawsLiveTwin reports whether a watch on sub, of CDS or EDS, would
// tell the proxy a twin it holds is gone while the persisted pairs say
// that twin's pair is live. Before the first build the agent serves its
// restored last-good.json, written at the last build: a twin admitted
// after it is not there, though its pair was persisted at admission, and
// answered now the proxy would drop it until the build brings it back
// (503 UH meanwhile). a.mu is held.
func (a *Agent) withdrawsLiveTwin(typ string, sub cache.Subscription) bool {
	idx := clusterIdx
	if typ == resource.EndpointType {
		idx = endpointIdx
	}
	var held map[string]types.Resource
	for name := range sub.ReturnedResources() {
		t, err := xdsnames.ParseTwin(name)
		if err != nil || !a.pairs.Live(t) {
			continue
		}
		if held == nil {
			held = a.caches[idx].GetResources()
		}
		if _, ok := held[name]; !ok {
			return true
		}
	}
	return false
}

// answer admits or refuses the names req subscribes to, then makes the
// stream's watch.
func (o *onDemandCDS) answer(req *cache.DeltaRequest, sub cache.Subscription, value chan cache.DeltaResponse, admit func([]string) []string) (func(), error) {
	if refused := admit(req.GetResourceNamesSubscribe()); len(refused) > 0 && !o.a.opts.Controls.UnansweredRefusals {
		// The cache never answers a name it never held, and the
		// proxy's on_demand filter would wait out its timeout: a
		// refused name is stated absent at once. The stream's
		// record of what it returned is unchanged. The server has
		// drained the channel before making the watch, and it holds
		// one response per type, so this send does not block.
		value <- &cache.DeltaPassthroughResponse{
			DeltaRequest:   req,
			NextVersionMap: maps.Clone(sub.ReturnedResources()),
			DeltaDiscoveryResponse: &discovery.DeltaDiscoveryResponse{
				TypeUrl:           resource.ClusterType,
				SystemVersionInfo: "odcds-refused",
				RemovedResources:  refused,
			},
		}
	}
	return o.Cache.CreateDeltaWatch(req, sub, value)
}

// unjudgedWatch is a CDS or EDS watch made before the first build. Its mutex
// orders its answer against its cancellation, as heldWatch's does: the
// server never updates the stream's subscription without cancelling the
// watch first, so the answer reads a subscription no one writes.
type unjudgedWatch struct {
	mu        sync.Mutex
	create    func() (func(), error)
	cancel    func()
	cancelled bool
}

func (w *unjudgedWatch) cancelWatch() {
	w.mu.Lock()
	w.cancelled = true
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// judgeUnjudged answers every watch made before the first build, now
// that there is a build to judge its names against. a.mu is held.
func (a *Agent) judgeUnjudged() {
	ws := a.unjudged
	a.unjudged = nil
	for _, w := range ws {
		w.mu.Lock()
		if !w.cancelled {
			cancel, err := w.create()
			if err != nil {
				a.log.Error("a CDS watch made before the first build failed", "err", err)
			}
			w.cancel = cancel
		}
		w.mu.Unlock()
	}
}

// admit answers the cluster names a CDS request subscribes to by name:
// a name the agent serves already passes; a twin st admits is recorded
// and published, cluster and load assignment together; anything else is
// refused, counted by reason, and returned.
func (a *Agent) admit(names []string) (refused []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.admitLocked(names)
}

// admitLocked is admit with a.mu held and a build to judge against.
func (a *Agent) admitLocked(names []string) (refused []string) {
	for _, name := range names {
		if name == "*" || a.serves(name) {
			continue
		}
		if t, err := xdsnames.ParseTwin(name); err == nil && a.pairs.Dormant(t) {
			// Re-subscribed while dormant: its twin is not served until
			// the pair is live again, then without a request. Stated
			// absent, as it is, but not refused: the pair stays.
			refused = append(refused, name)
			continue
		}
		start := time.Now()
		reason := a.admitTwin(name)
		if reason != "" {
			a.metrics.odcdsRefused.WithLabelValues(reason).Inc()
			a.pairs.CountRefusal()
			a.log.Info("on-demand cluster refused", "cluster", name, "reason", reason)
			refused = append(refused, name)
			continue
		}
		a.metrics.odcdsAdmitted.Inc()
		a.metrics.twins.Set(float64(len(a.twins)))
		a.log.Info("on-demand twin admitted", "cluster", name, "took", time.Since(start))
	}
	return refused
}

// serves reports whether the published configuration has cluster name.
func (a *Agent) serves(name string) bool {
	if _, ok := a.twins[name]; ok {
		return true
	}
	_, ok := a.builder.idx[clusterIdx].items[name]
	return ok
}

// admitTwin records and publishes twin name, or says why not.
func (a *Agent) admitTwin(name string) string {
	t, err := xdsnames.ParseTwin(name)
	if err != nil {
		return RefusedUnknownName
	}
	if a.opts.Transport == TransportH2 {
		return RefusedTransportH2
	}
	tw, reason, err := twinFor(a.state, a.opts.Node, a.opts.HTTP, a.opts.Controls, t)
	if err != nil {
		a.log.Error("failed to build a twin", "cluster", name, "err", err)
		return RefusedPublish
	}
	if reason != "" {
		return reason
	}
	c, cla := tw[0], tw[1]
	// A twin admitted on demand is published at once, outside any build:
	// the snapshot it joins must pass the same gates a build's does.
	next := withTwin(a.current, c, cla)
	if err := validate.Check(next.Resources); err != nil {
		if gates, ok := a.opts.Controls.passes(err); ok {
			a.log.Warn("TEST ONLY: a test-only control publishes a twin the config gates refuse", "cluster", name, "gates", gates, "err", err)
		} else {
			var ve *validate.Error
			if errors.As(err, &ve) {
				for _, g := range ve.Gates() {
					a.metrics.refused.WithLabelValues(g).Inc()
				}
			}
			a.log.Error("on-demand twin fails the config gates", "cluster", name, "err", err)
			return RefusedGate
		}
	}
	// The load assignment first: a proxy given the cluster asks for it
	// by name at once.
	if err := a.caches[endpointIdx].UpdateResource(name, cla); err != nil {
		a.log.Error("failed to publish a twin's load assignment", "cluster", name, "err", err)
		return RefusedPublish
	}
	if err := a.caches[clusterIdx].UpdateResource(name, c); err != nil {
		a.log.Error("failed to publish a twin", "cluster", name, "err", err)
		return RefusedPublish
	}
	a.pairs.Admit(t)
	a.twins[name] = tw
	a.current = next
	return ""
}

// withTwin is out with one more twin, leaving out itself (which the
// builder may share) as it was.
func withTwin(out *Output, c, cla types.Resource) *Output {
	next := *out
	next.Resources = maps.Clone(out.Resources)
	next.Resources[resource.ClusterType] = append(slices.Clip(out.Resources[resource.ClusterType]), c)
	next.Resources[resource.EndpointType] = append(slices.Clip(out.Resources[resource.EndpointType]), cla)
	return &next
}
