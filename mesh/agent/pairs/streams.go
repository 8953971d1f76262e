package pairs

import (
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// StreamID names an ADS stream: go-control-plane numbers streams per
// server, so the agent numbers its servers.
type StreamID struct{ Server, Stream int64 }

// Request records what a CDS request says of the pairs. A stream's first
// CDS request states what the proxy holds: the names it re-subscribes hold
// on-demand subscriptions, those in initial_resource_versions alone are
// held, and a dormant pair it does not re-subscribe is pruned, since that
// proxy will ask again if it needs it. A later request's names are
// on-demand fetches.
func (s *Set) Request(stream StreamID, req *discovery.DeltaDiscoveryRequest) {
	s.mu.Lock()
	first := !s.streams[stream]
	s.streams[stream] = true
	now := time.Now()
	var pruned []prunedPair
	if first {
		pruned = s.freshStream(req, now)
	} else {
		s.laterRequest(req, now)
	}
	s.mu.Unlock()
	s.judgeLater(pruned)
}

// LaterRequest is Request for a request that is not its stream's first,
// and reports whether req was one; for a first request it does nothing
// and returns false. A later request states no prunes, so it needs
// nothing of what the agent publishes: the agent passes it without its
// own lock, which an admission or a build may hold for long, and keeps
// that lock for a stream's first request (Request).
func (s *Set) LaterRequest(stream StreamID, req *discovery.DeltaDiscoveryRequest) bool {
	s.mu.Lock()
	if !s.streams[stream] {
		s.mu.Unlock()
		return false
	}
	s.laterRequest(req, time.Now())
	s.mu.Unlock()
	return true
}

// laterRequest records a later request's names as on-demand fetches;
// s.mu is held.
func (s *Set) laterRequest(req *discovery.DeltaDiscoveryRequest, now time.Time) {
	for _, name := range req.GetResourceNamesSubscribe() {
		s.subscribed[name] = true
		if t, err := xdsnames.ParseTwin(name); err == nil && s.pairs[t] != nil {
			s.pairs[t].seen(EvidenceSubscribed, now)
			s.pairs[t].fetched = true
		}
	}
}

// freshStream is Request for a stream's first CDS request; s.mu is held.
func (s *Set) freshStream(req *discovery.DeltaDiscoveryRequest, now time.Time) []prunedPair {
	s.subscribed = map[string]bool{}
	for _, name := range req.GetResourceNamesSubscribe() {
		s.subscribed[name] = true
	}
	held := req.GetInitialResourceVersions()
	var pruned []prunedPair
	for _, t := range s.sorted() {
		p, name := s.pairs[t], xdsnames.TwinCluster(t)
		switch _, isHeld := held[name]; {
		case s.subscribed[name]:
			p.seen(EvidenceSubscribed, now)
		case p.dormant:
			pruned = append(pruned, s.prune(t, PrunedNotResubscribed, now))
		case isHeld:
			p.seen(EvidenceHeld, now)
		}
	}
	if len(pruned) > 0 {
		s.save()
	}
	return pruned
}

// StreamClosed forgets a stream; what its proxy subscribed to stays
// known, since a proxy keeps its subscriptions across reconnects.
func (s *Set) StreamClosed(stream StreamID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.streams, stream)
}

// inUse says whether the proxy may hold pair t's twin and use it: it holds
// an on-demand subscription for it, or listed it as held on a fresh
// stream in this process (#1073). A pair with neither, only persisted,
// is dropped when its source or destination leaves: its proxy, holding
// no subscription, asks again if it needs it. s.mu is held.
func (s *Set) inUse(t xdsnames.Twin, p *pair) bool {
	return s.subscribed[xdsnames.TwinCluster(t)] || (p.evidence == EvidenceHeld && !p.lastSeen.IsZero())
}
