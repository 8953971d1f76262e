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

	"github.com/aether-mesh/aether/mesh/agent/pairs"
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
// cancelled the stream's previous watch and before the cache's next one
// is made: an admitted twin is then in the cache when the new watch
// computes its answer, so it goes out once (made any earlier, in the
// request callback, the old watch would fire with it and the new one
// again). The judgment runs off the stream's loop (judgedWatch): the
// server gets a watch back at once and goes on serving the stream's
// other types, and the cache's watch is made once the names are judged.
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
	var j judgeOrder
	if typ == resource.ClusterType {
		j = a.judging.watch(req)
	}
	// After the first build a.mu is not taken here: an admission or a
	// build holds it, and the stream's loop must not wait on either.
	if !a.built.Load() {
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
	}
	if typ != resource.ClusterType {
		return o.Cache.CreateDeltaWatch(req, sub, value)
	}
	return o.judged(req, sub, value, j)
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
		value <- refusal(req, sub, refused)
	}
	return o.Cache.CreateDeltaWatch(req, sub, value)
}

// refusal states the refused names absent, in answer to req. The
// stream's record of what it returned is unchanged: the record itself
// is passed, not a copy, so that a refusal the server takes after the
// stream's next request (judged off its loop) keeps what that request
// changed in it.
func refusal(req *cache.DeltaRequest, sub cache.Subscription, refused []string) cache.DeltaResponse {
	return &cache.DeltaPassthroughResponse{
		DeltaRequest:   req,
		NextVersionMap: sub.ReturnedResources(),
		DeltaDiscoveryResponse: &discovery.DeltaDiscoveryResponse{
			TypeUrl:           resource.ClusterType,
			SystemVersionInfo: "odcds-refused",
			RemovedResources:  refused,
		},
	}
}

// slowJudgment is how long names may wait for the agent's lock before
// the wait is logged.
const slowJudgment = 100 * time.Millisecond

// judging holds, per stream, the last CDS watch made while names were
// being judged (judgedWatch). A watch learns its stream from the request
// it answers: the server tells the request callback of each request,
// with the stream's number, and then makes the watch for it on the same
// goroutine (request, watch).
type judging struct {
	// running counts the judgments under way.
	running  sync.WaitGroup
	mu       sync.Mutex
	streamOf map[*cache.DeltaRequest]pairs.StreamID
	tail     map[pairs.StreamID]*judgedWatch
}

// request notes that CDS request req, about to be watched, is stream's.
func (j *judging) request(stream pairs.StreamID, req *cache.DeltaRequest) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.streamOf == nil {
		j.streamOf = map[*cache.DeltaRequest]pairs.StreamID{}
		j.tail = map[pairs.StreamID]*judgedWatch{}
	}
	j.streamOf[req] = stream
}

// closed forgets stream, whose watches the server has cancelled.
func (j *judging) closed(stream pairs.StreamID) { j.forget(stream) }

// forget drops stream's last judged watch: its next watch is made in
// the cache at once.
func (j *judging) forget(stream pairs.StreamID) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.tail, stream)
}

// judgeOrder is where a CDS watch stands on its stream: the stream, and
// the stream's last judged watch, which the server has just cancelled,
// unless a watch made in the cache at once came after it. known is
// false for a request the callback was not told of.
type judgeOrder struct {
	stream pairs.StreamID
	prev   *judgedWatch
	known  bool
}

// watch is the order of req's watch, which the server is making.
func (j *judging) watch(req *cache.DeltaRequest) judgeOrder {
	j.mu.Lock()
	defer j.mu.Unlock()
	stream, known := j.streamOf[req]
	delete(j.streamOf, req)
	return judgeOrder{stream: stream, prev: j.tail[stream], known: known}
}

// judgedWatch is a CDS watch, made after the first build, whose request
// subscribed to names, or that was made while the stream's previous
// one was still being judged. The server makes it on the stream's loop,
// which then serves the stream's other types while the names are judged
// on a goroutine of the watch's own (an admission may take long on a
// loaded node, and the proxy's EDS request for the twin it got just
// before must not wait behind it). Judged after the stream's previous
// judged watch is done, the names are admitted or refused, the refusals
// stated, and the cache's watch made, unless the server has cancelled
// this one meanwhile: then the stream's next watch, made right after,
// states them and the admitted twins go out with it. As with the
// synchronous judgment before, no CDS watch of the stream is open while
// an admission publishes its twin, so the twin goes out once.
//
// Its mutex orders the answer against the cancellation, as
// unjudgedWatch's does: the server updates the stream's subscription
// only after the cancellation has returned, so the answer reads a
// subscription no one writes, and it never sends once cancelled (the
// server closes the channel when the stream ends).
type judgedWatch struct {
	req   *cache.DeltaRequest
	sub   cache.Subscription
	value chan cache.DeltaResponse
	// behind: made after another of the stream's judged watches, which
	// its judgment waits for. Only its goroutine holds that one, so a
	// stream's judged watches go as each is done, not as a chain.
	behind bool
	made   time.Time
	// done is closed once the names are judged and the watch made or
	// given up; unsent are then the refusals the next watch states.
	done   chan struct{}
	unsent []string
	// stop is closed by cancelWatch before it takes mu: a refusal
	// waiting for room on the channel gives way.
	stop     chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	cancel func()
	// sent are the names, and versions, the cache's answer added to
	// what the stream was sent.
	sent map[string]string
}

func (w *judgedWatch) cancelWatch() {
	w.stopOnce.Do(func() { close(w.stop) })
	w.mu.Lock()
	cancel := w.cancel
	w.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

func (w *judgedWatch) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// judged makes req's CDS watch: at once in the cache when there is
// nothing to judge or wait for, a judgedWatch otherwise. A request the
// server's callback was not told of (a cache served by another server)
// is judged on the caller's goroutine, as before the first build.
func (o *onDemandCDS) judged(req *cache.DeltaRequest, sub cache.Subscription, value chan cache.DeltaResponse, j judgeOrder) (func(), error) {
	a := o.a
	names := len(req.GetResourceNamesSubscribe()) > 0
	if !j.known {
		if names {
			return o.answer(req, sub, value, a.admit)
		}
		return o.Cache.CreateDeltaWatch(req, sub, value)
	}
	wait := names
	if p := j.prev; p != nil {
		// The server has just cancelled p. What p answered may still be
		// on the channel, behind this request: the subscription records
		// it now, or this watch would send it again.
		p.mu.Lock()
		sent := p.sent
		p.mu.Unlock()
		noteSent(sub, sent)
		select {
		case <-p.done:
			wait = wait || len(p.unsent) > 0
		default:
			wait = true
		}
	}
	if !wait {
		a.judging.forget(j.stream)
		return o.Cache.CreateDeltaWatch(req, sub, value)
	}
	w := &judgedWatch{req: req, sub: sub, value: value, behind: j.prev != nil, made: time.Now(),
		done: make(chan struct{}), stop: make(chan struct{})}
	a.judging.mu.Lock()
	a.judging.tail[j.stream] = w
	a.judging.mu.Unlock()
	a.judging.running.Add(1)
	go o.judge(w, j.prev)
	return w.cancelWatch, nil
}

// judge judges w's names, after prev (the stream's previous judged
// watch, if any), then states the refusals and makes the cache's watch
// unless w is cancelled.
func (o *onDemandCDS) judge(w, prev *judgedWatch) {
	a := o.a
	defer a.judging.running.Done()
	var refused []string
	if prev != nil {
		<-prev.done
		refused = prev.unsent
	}
	if names := w.req.GetResourceNamesSubscribe(); len(names) > 0 {
		start := time.Now()
		a.mu.Lock()
		waited := time.Since(start)
		for _, name := range a.admitLocked(names) {
			if !slices.Contains(refused, name) {
				refused = append(refused, name)
			}
		}
		a.mu.Unlock()
		if waited > slowJudgment {
			// An admission's own time is logged with it ("took"); this
			// is the time it waited for a build or another stream's.
			a.log.Info("on-demand names waited for the agent's lock", "clusters", names, "waited", waited,
				"since_request", time.Since(w.made))
		}
	}
	if a.opts.Controls.UnansweredRefusals {
		refused = nil
	}
	w.mu.Lock()
	if len(refused) > 0 && !w.stopped() {
		select {
		case w.value <- refusal(w.req, w.sub, refused):
			refused = nil
		case <-w.stop:
		}
	}
	if !w.stopped() {
		if err := w.watch(o.Cache); err != nil {
			// The server would end the stream on it; off its loop, the
			// stream's CDS goes unanswered until its next request.
			a.log.Error("a CDS watch made after its names were judged failed", "err", err)
		}
	}
	w.unsent = refused
	w.mu.Unlock()
	close(w.done)
}

// watch makes w's watch in c; w.mu is held. The cache answers at once
// when it has something the stream was not sent (a twin just admitted):
// that answer is passed on and what it sent noted, for the stream's next
// watch (judged). Otherwise the watch is made on the stream's channel.
func (w *judgedWatch) watch(c cache.Cache) error {
	mine := make(chan cache.DeltaResponse, 1)
	cancel, err := c.CreateDeltaWatch(w.req, w.sub, mine)
	if err != nil {
		return err
	}
	select {
	case resp := <-mine:
		// A watch that answered is spent: the cache keeps no other.
		if cancel != nil {
			cancel()
		}
		select {
		case w.value <- resp:
			w.sent = sentBy(resp.GetNextVersionMap(), w.sub.ReturnedResources())
		case <-w.stop:
		}
		return nil
	default:
	}
	cancel()
	// Anything published since the first watch is in this one's answer.
	w.cancel, err = c.CreateDeltaWatch(w.req, w.sub, w.value)
	return err
}

// sentBy is what a response whose next version map is next sent to a
// stream whose record was known: the names it added or moved.
func sentBy(next, known map[string]string) map[string]string {
	sent := map[string]string{}
	for name, v := range next {
		if old, ok := known[name]; !ok || old != v {
			sent[name] = v
		}
	}
	return sent
}

// noteSent records in sub, the stream's own subscription, the versions
// sent that it lacks, for the names it still watches. It is called on
// the stream's loop, which owns the record; a name the request just
// unsubscribed is not put back, nor one it asked to be sent again.
func noteSent(sub cache.Subscription, sent map[string]string) {
	returned := sub.ReturnedResources()
	if returned == nil {
		return
	}
	for name, v := range sent {
		if _, ok := returned[name]; ok {
			continue
		}
		if _, ok := sub.SubscribedResources()[name]; !ok && !sub.IsWildcard() {
			continue
		}
		returned[name] = v
	}
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
		if a.admitting != nil {
			a.admitting(name)
		}
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
	// the snapshot it joins must pass the same gates a build's does. The
	// snapshot passed them before the twin, so its listeners and routes
	// are not walked again (validate.CheckAddedClusters).
	next := withTwin(a.current, c, cla)
	if err := validate.CheckAddedClusters(next.Resources); err != nil {
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
