package pairs

import (
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// prunedPair is a pair just pruned, kept until it is judged against the
// proxy's traffic once s.mu is released (traffic.go).
type prunedPair struct {
	twin      string
	lastSeen  time.Time
	dormantAt time.Time
	at        time.Time
}

// Admit records pair t, its twin just admitted on a request naming it,
// and counts the admission. A new pair is persisted; the stream that
// asked holds a subscription for it.
func (s *Set) Admit(t xdsnames.Twin) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if p := s.pairs[t]; p != nil {
		p.seen(EvidenceSubscribed, now)
	} else {
		s.pairs[t] = &pair{evidence: EvidenceSubscribed, lastSeen: now, fetched: true}
		s.subscribed[xdsnames.TwinCluster(t)] = true
		s.save()
	}
	s.metrics.admitted.Inc()
}

// CountRefusal counts a name subscribed on demand and answered absent.
func (s *Set) CountRefusal() { s.metrics.refused.Inc() }

// Settle moves each pair to the state a published build gives it: away
// says the build's registry view has its source account off the node or
// its destination out of the dependency set. A pair away goes dormant if
// the proxy may hold and use its twin (inUse), and is dropped otherwise
// (or always, under Options.DropOnRemoval); one whose source and
// destination are back is live, its twin already republished by the
// build. away is called with s.mu held.
func (s *Set) Settle(away func(xdsnames.Twin) bool) {
	s.mu.Lock()
	now := time.Now()
	changed := false
	var pruned []prunedPair
	for _, t := range s.sorted() {
		p, removed := s.pairs[t], away(t)
		switch {
		case removed && (s.opts.DropOnRemoval || !s.inUse(t, p)):
			pruned = append(pruned, s.prune(t, PrunedOnRemoval, now))
			changed = true
		case removed != p.dormant:
			p.dormant, p.dormantAt = removed, time.Time{}
			if removed {
				p.dormantAt = now
			}
			changed = true
			s.log.Info("QUIC pair "+p.state(), "cluster", xdsnames.TwinCluster(t))
		}
	}
	if changed {
		s.save()
	}
	s.mu.Unlock()
	s.judgeLater(pruned)
}

// EndFetchWindow prunes every live pair that showed no evidence of use
// since start: the carry-over of a pair no proxy uses any more ends one
// window after start. A dormant pair is never pruned here. Under
// Options.PruneUnfetchedSinceStart it is the pre-#1073 rule instead:
// every live pair not fetched by name since start, held twins included.
// It reports whether any pair went, so that the agent rebuilds without
// their twins; FetchWindowEnded then judges the prunes.
func (s *Set) EndFetchWindow() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	n := len(s.pruned)
	for _, t := range s.sorted() {
		p := s.pairs[t]
		switch {
		case p.dormant:
		case s.opts.PruneUnfetchedSinceStart:
			if !p.fetched {
				s.pruned = append(s.pruned, s.prune(t, PrunedUnfetchedSinceStart, now))
			}
		case p.lastSeen.IsZero():
			s.pruned = append(s.pruned, s.prune(t, PrunedFetchWindow, now))
		}
	}
	changed := len(s.pruned) > n
	if changed {
		s.save()
	}
	return changed
}

// FetchWindowEnded judges the fetch window's prunes, on the caller's
// goroutine, then says the window is over
// (aether_agent_pairs_fetch_window_open 0).
func (s *Set) FetchWindowEnded() {
	s.mu.Lock()
	pruned := s.pruned
	s.pruned = nil
	s.mu.Unlock()
	s.judge(pruned)
	s.metrics.windowOpen.Set(0)
}

// prune drops pair t for reason; s.mu is held. Its twin leaves the
// snapshot at the agent's next publish.
func (s *Set) prune(t xdsnames.Twin, reason string, now time.Time) prunedPair {
	p := s.pairs[t]
	delete(s.pairs, t)
	s.metrics.pruned.WithLabelValues(reason).Inc()
	name := xdsnames.TwinCluster(t)
	s.log.Info("QUIC pair pruned", "cluster", name, "reason", reason, "state", p.state(), "evidence", p.evidence)
	return prunedPair{twin: name, lastSeen: p.lastSeen, dormantAt: p.dormantAt, at: now}
}
