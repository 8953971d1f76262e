// Package pairs is the agent's on-demand pair lifecycle: the (source
// account, destination) pairs whose QUIC twins a node's proxy asked for,
// which of them are live or dormant, the evidence that each is used, the
// fetch window after start, the state file that carries them over a
// restart, and the prunes judged against the proxy's traffic
// (ARCHITECTURE.md, "Pair lifecycle").
//
// The agent owns the registry view and the published snapshot; a Set
// owns the pairs. The agent asks which twins to build (Twins, Live,
// Dormant) and tells the Set what happened: a twin admitted (Admit) or
// refused (CountRefusal), a CDS request (Request), a stream gone
// (StreamClosed), a build published (Settle), the fetch window over
// (EndFetchWindow, FetchWindowEnded).
//
// Lock order: the agent's lock, then a Set's. The agent calls a Set with
// its own lock held wherever what it publishes must agree with the pairs
// (an admission, a build's settle, a fresh stream's prunes); a Set never
// calls the agent, and never holds its lock while it waits on a disk or
// on the proxy's metrics.
package pairs

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// A pair's state: live while its source account has a pod on the node (on
// the mTLS path, one with a sandbox) and its destination is in the node's
// dependency set; dormant while either is away and the proxy holds an
// on-demand subscription for its twin (#1036).
const (
	Live    = "live"
	Dormant = "dormant"
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
	// PrunedUnfetchedSinceStart is Options.PruneUnfetchedSinceStart's.
	PrunedUnfetchedSinceStart = "test-only-unfetched-since-start"
)

// PrunedReasons are every reason a pair is pruned for.
var PrunedReasons = []string{PrunedFetchWindow, PrunedNotResubscribed, PrunedOnRemoval, PrunedUnfetchedSinceStart}

// DefaultFetchWindow is how long after start a persisted pair may go
// without evidence of use before it is pruned.
const DefaultFetchWindow = time.Hour

// DefaultProxyMetricsInterval is how often the proxy's metrics are
// sampled when Options.ProxyMetricsInterval is zero.
const DefaultProxyMetricsInterval = 10 * time.Second

// Options configures a Set.
type Options struct {
	// StateDir, when set, holds the state file (package pairstate): read
	// by New, rewritten on every change.
	StateDir string
	Logger   *slog.Logger
	// Registerer receives the pair metrics.
	Registerer prometheus.Registerer
	// ProxyMetricsURL, when set, is the node proxy's loopback /metrics:
	// sampled every ProxyMetricsInterval (SampleProxy) and at each prune,
	// it tells which twins served requests.
	ProxyMetricsURL      string
	ProxyMetricsInterval time.Duration
	// DropOnRemoval and PruneUnfetchedSinceStart are test-only controls
	// (the agent's Controls.DropPairOnRemoval and
	// Controls.PruneUnfetchedSinceStart).
	DropOnRemoval            bool
	PruneUnfetchedSinceStart bool
}

// pair is one recorded pair.
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
		return Dormant
	}
	return Live
}

func (p *pair) seen(evidence string, now time.Time) {
	p.evidence, p.lastSeen = evidence, now
}

// Set is a node's recorded pairs: each was admitted over on-demand CDS or
// carried over from the state dir. A pair outlives a twin that goes,
// dormant, since the proxy keeps its on-demand subscription for the life
// of its process and never asks again.
type Set struct {
	opts    Options
	log     *slog.Logger
	metrics *metrics
	traffic *proxyTraffic

	mu    sync.Mutex
	pairs map[xdsnames.Twin]*pair
	// subscribed are the twin names the proxy holds an on-demand
	// subscription for, as far as the agent knows; streams, the ADS
	// streams that have sent a CDS request (streams.go).
	subscribed map[string]bool
	streams    map[StreamID]bool
	// pruned are the fetch window's prunes, judged by FetchWindowEnded.
	pruned []prunedPair

	// gen numbers the set's versions; writes of them are ordered by
	// writeMu, under which written is the last one on disk (persist.go).
	// background counts those writes and the judging of prunes against
	// the proxy's traffic (traffic.go) under way.
	gen        uint64
	background sync.WaitGroup
	writeMu    sync.Mutex
	written    uint64
}

// New returns the set, with the pairs the state dir carries over.
func New(opts Options) (*Set, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.ProxyMetricsInterval == 0 {
		opts.ProxyMetricsInterval = DefaultProxyMetricsInterval
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	s := &Set{opts: opts, log: opts.Logger, metrics: m,
		pairs: map[xdsnames.Twin]*pair{}, subscribed: map[string]bool{}, streams: map[StreamID]bool{}}
	if opts.ProxyMetricsURL != "" {
		s.traffic = newProxyTraffic(opts.ProxyMetricsURL)
	}
	if opts.StateDir != "" {
		s.load()
	}
	return s, nil
}

// Twins are the recorded pairs, live and dormant: a build publishes the
// twin of each one its registry view admits.
func (s *Set) Twins() []xdsnames.Twin {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.pairs))
}

// Live reports whether t is a recorded pair, live.
func (s *Set) Live(t xdsnames.Twin) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[t]
	return p != nil && !p.dormant
}

// Dormant reports whether t is a recorded pair, dormant.
func (s *Set) Dormant(t xdsnames.Twin) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pairs[t]
	return p != nil && p.dormant
}

// Status is one pair as /debug/pairs shows it.
type Status struct {
	Twin        string `json:"twin"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Evidence    string `json:"evidence"`
	LastSeen    string `json:"last_seen"`
}

// Status lists the recorded pairs, sorted by twin name.
func (s *Set) Status() []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, 0, len(s.pairs))
	for _, t := range s.sorted() {
		p := s.pairs[t]
		st := Status{Twin: xdsnames.TwinCluster(t), Source: t.SA + "." + t.SANamespace,
			Destination: t.Service + "." + t.Namespace, State: p.state(), Evidence: p.evidence}
		if !p.lastSeen.IsZero() {
			st.LastSeen = p.lastSeen.UTC().Format(time.RFC3339Nano)
		}
		out = append(out, st)
	}
	return out
}

// Counts are /debug/pairs' counters, the same figures as the
// aether_agent_pairs* metrics: pairs by state now, and since start the
// admissions, refusals, prunes by reason and prunes of a twin that served
// a request in the last minute (which must stay 0).
type Counts struct {
	Live       int                `json:"live"`
	Dormant    int                `json:"dormant"`
	Admitted   float64            `json:"admitted"`
	Refused    float64            `json:"refused"`
	Pruned     map[string]float64 `json:"pruned"`
	PrunedLive float64            `json:"pruned_live"`
}

// Counts returns the pair counters.
func (s *Set) Counts() Counts {
	c := s.metrics.counts()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.pairs {
		if p.dormant {
			c.Dormant++
		} else {
			c.Live++
		}
	}
	return c
}

// sorted is the recorded pairs in twin-name order; s.mu is held.
func (s *Set) sorted() []xdsnames.Twin {
	return slices.SortedFunc(maps.Keys(s.pairs), func(x, y xdsnames.Twin) int {
		return cmp.Compare(xdsnames.TwinCluster(x), xdsnames.TwinCluster(y))
	})
}
