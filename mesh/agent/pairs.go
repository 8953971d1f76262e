package agent

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aether-mesh/aether/mesh/agent/pairstate"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// A pair's state: live while its source account has a pod on the node (on
// the mTLS path, one with a sandbox) and its destination is in the node's
// dependency set; dormant while either is away and the proxy holds an
// on-demand subscription for its twin (#1036, ARCHITECTURE.md "Pair
// lifecycle").
const (
	PairLive    = "live"
	PairDormant = "dormant"
)

// The last evidence that a pair is used: its twin subscribed by name on a
// stream (an on-demand fetch, or a fresh stream re-subscribing it), held
// (re-stated in a fresh stream's initial_resource_versions, #1073), or
// none yet in this process: only persisted.
const (
	EvidenceSubscribed = "subscribed"
	EvidenceHeld       = "held"
	EvidencePersisted  = "persisted"
)

// Why a pair was pruned: the reason label of aether_agent_pairs_pruned_total.
const (
	PrunedFetchWindow     = "fetch-window"
	PrunedNotResubscribed = "not-resubscribed"
	PrunedOnRemoval       = "dropped-on-removal"
	// PrunedUnfetchedSinceStart is Controls.PruneUnfetchedSinceStart's.
	PrunedUnfetchedSinceStart = "test-only-unfetched-since-start"
)

var prunedReasons = []string{PrunedFetchWindow, PrunedNotResubscribed, PrunedOnRemoval, PrunedUnfetchedSinceStart}

// DefaultPairFetchWindow is how long after start a persisted pair may go
// without evidence of use before it is pruned.
const DefaultPairFetchWindow = time.Hour

// pair is one recorded (source account, destination) pair.
type pair struct {
	dormant  bool
	evidence string
	// lastSeen is when evidence of use last came, in this process; zero
	// for a pair only persisted.
	lastSeen time.Time
	// dormantAt is when the pair went dormant in this process (its start,
	// for one carried over dormant); zero while live. Its twin was
	// withdrawn then: what it served before is no use of it at a prune.
	dormantAt time.Time
	// fetched: subscribed by name on a stream since start, other than
	// re-subscribed in a fresh stream's first request. Only the
	// pre-#1073 control reads it.
	fetched bool
}

func (p *pair) state() string {
	if p.dormant {
		return PairDormant
	}
	return PairLive
}

func (p *pair) seen(evidence string, now time.Time) {
	p.evidence, p.lastSeen = evidence, now
}

// prunedPair is a pair just pruned, kept until it is judged against the
// proxy's traffic once a.mu is released (traffic.go).
type prunedPair struct {
	twin      string
	lastSeen  time.Time
	dormantAt time.Time
	at        time.Time
}

// loadPairs reads the state dir's demand set into a.pairs. An unusable
// file has been moved aside by Load: the agent starts with no pairs and
// says so, and the proxy's fresh stream re-subscribes what it holds.
func (a *Agent) loadPairs() {
	st, err := pairstate.Load(a.opts.StateDir, time.Now())
	if err != nil {
		var ce *pairstate.CorruptError
		if errors.As(err, &ce) {
			a.metrics.pairStateCorrupt.Inc()
		}
		a.log.Error("starting with no QUIC pairs: the state file is unusable", "err", err)
		return
	}
	for _, t := range st.Live {
		a.pairs[t] = &pair{evidence: EvidencePersisted}
	}
	now := time.Now()
	for _, t := range st.Dormant {
		a.pairs[t] = &pair{dormant: true, evidence: EvidencePersisted, dormantAt: now}
	}
	// Until a fresh stream states what the proxy holds, any persisted
	// twin may be subscribed: a pair leaving meanwhile goes dormant, and
	// the stream's first CDS request then decides.
	for t := range a.pairs {
		a.subscribed[xdsnames.TwinCluster(t)] = true
	}
	a.observePairs()
	a.log.Info("QUIC pairs carried over", "file", pairstate.File, "live", len(st.Live), "dormant", len(st.Dormant))
}

// savePairs writes the demand set; a.mu is held. The write (two fsyncs,
// milliseconds) runs on its own goroutine: an admission is made while
// the ADS stream's loop waits, and its response must not wait on a disk.
// A write lost to a crash costs nothing a restart does not recover: the
// proxy's fresh stream re-subscribes what it holds. A failed write is
// logged; the next change writes the whole set again.
func (a *Agent) savePairs() {
	a.observePairs()
	if a.opts.StateDir == "" {
		return
	}
	var st pairstate.State
	for t, p := range a.pairs {
		if p.dormant {
			st.Dormant = append(st.Dormant, t)
		} else {
			st.Live = append(st.Live, t)
		}
	}
	a.pairGen++
	gen := a.pairGen
	a.background.Add(1)
	go a.writePairs(gen, st)
}

// writePairs writes st, the set as of generation gen, unless a later
// one is written already: writes may start out of order, never land so.
func (a *Agent) writePairs(gen uint64, st pairstate.State) {
	defer a.background.Done()
	a.writeMu.Lock()
	defer a.writeMu.Unlock()
	if gen <= a.pairsWritten {
		return
	}
	if err := pairstate.Write(a.opts.StateDir, st); err != nil {
		a.log.Error("failed to persist QUIC pairs", "err", err)
		return
	}
	a.pairsWritten = gen
}

// Flush waits until every change to the QUIC pairs made so far is on
// disk (or failed, and was logged) and every prune is judged: an agent
// stopping calls it last.
func (a *Agent) Flush() { a.background.Wait() }

func (a *Agent) observePairs() {
	n := map[string]int{}
	for _, p := range a.pairs {
		n[p.state()]++
	}
	a.metrics.pairs.WithLabelValues(PairLive).Set(float64(n[PairLive]))
	a.metrics.pairs.WithLabelValues(PairDormant).Set(float64(n[PairDormant]))
}

// prune drops pair t for reason; a.mu is held. Its twin leaves the
// snapshot at the next publish.
func (a *Agent) prune(t xdsnames.Twin, reason string, now time.Time) {
	p := a.pairs[t]
	delete(a.pairs, t)
	a.metrics.pairsPruned.WithLabelValues(reason).Inc()
	a.pruned = append(a.pruned, prunedPair{twin: xdsnames.TwinCluster(t), lastSeen: p.lastSeen, dormantAt: p.dormantAt, at: now})
	a.log.Info("QUIC pair pruned", "cluster", xdsnames.TwinCluster(t), "reason", reason, "state", p.state(), "evidence", p.evidence)
}

// streamID names an ADS stream: go-control-plane numbers streams per server.
type streamID struct{ server, stream int64 }

// cdsRequest records what a CDS request says of the pairs; a.mu is not
// held. A stream's first CDS request states what the proxy holds: the
// names it re-subscribes hold on-demand subscriptions, those in
// initial_resource_versions alone are held, and a dormant pair it does
// not re-subscribe is pruned, since that proxy will ask again if it needs
// it. A later request's names are on-demand fetches.
func (a *Agent) cdsRequest(stream streamID, req *discovery.DeltaDiscoveryRequest) {
	a.mu.Lock()
	first := !a.streams[stream]
	a.streams[stream] = true
	now := time.Now()
	if first {
		a.freshStream(req, now)
	} else {
		for _, name := range req.GetResourceNamesSubscribe() {
			a.subscribed[name] = true
			if t, err := xdsnames.ParseTwin(name); err == nil && a.pairs[t] != nil {
				a.pairs[t].seen(EvidenceSubscribed, now)
				a.pairs[t].fetched = true
			}
		}
	}
	pruned := a.takePruned()
	a.mu.Unlock()
	a.judgeLater(pruned)
}

// freshStream is cdsRequest for a stream's first CDS request; a.mu is held.
func (a *Agent) freshStream(req *discovery.DeltaDiscoveryRequest, now time.Time) {
	a.subscribed = map[string]bool{}
	for _, name := range req.GetResourceNamesSubscribe() {
		a.subscribed[name] = true
	}
	held := req.GetInitialResourceVersions()
	changed := false
	for _, t := range slices.SortedFunc(maps.Keys(a.pairs), compareTwins) {
		p, name := a.pairs[t], xdsnames.TwinCluster(t)
		switch _, isHeld := held[name]; {
		case a.subscribed[name]:
			p.seen(EvidenceSubscribed, now)
		case p.dormant:
			a.prune(t, PrunedNotResubscribed, now)
			changed = true
		case isHeld:
			p.seen(EvidenceHeld, now)
		}
	}
	if changed {
		a.savePairs()
	}
}

// streamClosed forgets a stream; what its proxy subscribed to stays
// known, since a proxy keeps its subscriptions across reconnects.
func (a *Agent) streamClosed(stream streamID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.streams, stream)
}

// settlePairs moves each pair to the state the published registry view
// gives it; a.mu is held. A pair whose source account left the node or
// whose destination left the dependency set goes dormant if the proxy may
// hold and use its twin (inUse), and is dropped otherwise (or always,
// under Controls.DropPairOnRemoval); one whose source and destination are
// back is live, its twin already republished by the build.
func (a *Agent) settlePairs(now time.Time) {
	changed := false
	for _, t := range slices.SortedFunc(maps.Keys(a.pairs), compareTwins) {
		p := a.pairs[t]
		removed := false
		switch twinRefusal(a.state, a.opts.Node, a.opts.HTTP, t) {
		case RefusedNoLocalPod, RefusedNotDependency, RefusedUnknownDestination:
			removed = true
		}
		switch {
		case removed && (a.opts.Controls.DropPairOnRemoval || !a.inUse(t, p)):
			a.prune(t, PrunedOnRemoval, now)
			changed = true
		case removed != p.dormant:
			p.dormant, p.dormantAt = removed, time.Time{}
			if removed {
				p.dormantAt = now
			}
			changed = true
			a.log.Info("QUIC pair "+p.state(), "cluster", xdsnames.TwinCluster(t))
		}
	}
	if changed {
		a.savePairs()
	}
}

// inUse says whether the proxy may hold pair t's twin and use it: it holds
// an on-demand subscription for it, or listed it as held on a fresh
// stream in this process (#1073). A pair with neither, only persisted,
// is dropped when its source or destination leaves: its proxy, holding
// no subscription, asks again if it needs it.
func (a *Agent) inUse(t xdsnames.Twin, p *pair) bool {
	return a.subscribed[xdsnames.TwinCluster(t)] || (p.evidence == EvidenceHeld && !p.lastSeen.IsZero())
}

func compareTwins(x, y xdsnames.Twin) int {
	return cmp.Compare(xdsnames.TwinCluster(x), xdsnames.TwinCluster(y))
}

// endFetchWindow prunes, with its twin, every live pair that showed no
// evidence of use since the agent started: the carry-over of a pair no
// proxy uses any more ends one window after start. A dormant pair is
// never pruned here. Under Controls.PruneUnfetchedSinceStart it is the
// pre-#1073 rule instead: every live pair not fetched by name since
// start, held twins included.
func (a *Agent) endFetchWindow() {
	a.mu.Lock()
	now := time.Now()
	changed := false
	for _, t := range slices.SortedFunc(maps.Keys(a.pairs), compareTwins) {
		p := a.pairs[t]
		switch {
		case p.dormant:
		case a.opts.Controls.PruneUnfetchedSinceStart:
			if !p.fetched {
				a.prune(t, PrunedUnfetchedSinceStart, now)
				changed = true
			}
		case p.lastSeen.IsZero():
			a.prune(t, PrunedFetchWindow, now)
			changed = true
		}
	}
	if changed {
		a.savePairs()
		if a.last != nil {
			// The same registry view again: the build removes the
			// pruned twins, and nothing else moves.
			_ = a.applyLocked(a.last)
		}
	}
	pruned := a.takePruned()
	a.mu.Unlock()
	// On the timer's goroutine, which nothing waits on: the window is
	// over once its prunes are judged.
	a.judgePrunes(pruned)
	a.metrics.fetchWindowOpen.Set(0)
}

func (a *Agent) takePruned() []prunedPair {
	p := a.pruned
	a.pruned = nil
	return p
}

// PairStatus is one pair as /debug/pairs shows it.
type PairStatus struct {
	Twin        string `json:"twin"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Evidence    string `json:"evidence"`
	LastSeen    string `json:"last_seen"`
}

// Pairs lists the recorded pairs, sorted by twin name.
func (a *Agent) Pairs() []PairStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]PairStatus, 0, len(a.pairs))
	for _, t := range slices.SortedFunc(maps.Keys(a.pairs), compareTwins) {
		p := a.pairs[t]
		s := PairStatus{Twin: xdsnames.TwinCluster(t), Source: t.SA + "." + t.SANamespace,
			Destination: t.Service + "." + t.Namespace, State: p.state(), Evidence: p.evidence}
		if !p.lastSeen.IsZero() {
			s.LastSeen = p.lastSeen.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, s)
	}
	return out
}

// PairCounts are /debug/pairs' counters, the same figures as the
// aether_agent_pairs* metrics: pairs by state now, and since start the
// admissions, refusals, prunes by reason and prunes of a twin that served
// a request in the last minute (which must stay 0).
type PairCounts struct {
	Live       int                `json:"live"`
	Dormant    int                `json:"dormant"`
	Admitted   float64            `json:"admitted"`
	Refused    float64            `json:"refused"`
	Pruned     map[string]float64 `json:"pruned"`
	PrunedLive float64            `json:"pruned_live"`
}

// Counts returns the pair counters.
func (a *Agent) Counts() PairCounts {
	c := PairCounts{Admitted: counterValue(a.metrics.pairsAdmitted), Refused: counterValue(a.metrics.pairsRefused),
		PrunedLive: counterValue(a.metrics.pairsPrunedLive), Pruned: map[string]float64{}}
	for _, r := range prunedReasons {
		c.Pruned[r] = counterValue(a.metrics.pairsPruned.WithLabelValues(r))
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range a.pairs {
		if p.dormant {
			c.Dormant++
		} else {
			c.Live++
		}
	}
	return c
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// withoutUnpairedTwins is a restored snapshot's resources less the twins
// of pairs not recorded live: a twin the previous agent served but did
// not persist admits nothing, and a proxy holding it is told it is gone
// (#1033).
func (a *Agent) withoutUnpairedTwins(res map[string][]types.Resource) map[string][]types.Resource {
	out := maps.Clone(res)
	for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
		out[typ] = slices.DeleteFunc(slices.Clone(res[typ]), func(r types.Resource) bool {
			t, err := xdsnames.ParseTwin(cache.GetResourceName(r))
			return err == nil && (a.pairs[t] == nil || a.pairs[t].dormant)
		})
	}
	return out
}
