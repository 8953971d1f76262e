package pairs

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/agent/pairstate"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// load reads the state dir's demand set. An unusable file has been moved
// aside by pairstate.Load: the set starts empty and says so, and the
// proxy's fresh stream re-subscribes what it holds.
func (s *Set) load() {
	st, err := pairstate.Load(s.opts.StateDir, time.Now())
	if err != nil {
		var ce *pairstate.CorruptError
		if errors.As(err, &ce) {
			s.metrics.stateCorrupt.Inc()
		}
		s.log.Error("starting with no QUIC pairs: the state file is unusable", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, t := range st.Live {
		s.pairs[t] = &pair{evidence: EvidencePersisted}
	}
	now := time.Now()
	for _, t := range st.Dormant {
		s.pairs[t] = &pair{dormant: true, evidence: EvidencePersisted, dormantAt: now}
	}
	// Until a fresh stream states what the proxy holds, any persisted
	// twin may be subscribed: a pair leaving meanwhile goes dormant, and
	// the stream's first CDS request then decides.
	for t := range s.pairs {
		s.subscribed[xdsnames.TwinCluster(t)] = true
	}
	s.observe()
	s.log.Info("QUIC pairs carried over", "file", pairstate.File, "live", len(st.Live), "dormant", len(st.Dormant))
}

// save writes the demand set; s.mu is held. The write (two fsyncs,
// milliseconds) runs on its own goroutine: an admission is made while
// the ADS stream's loop waits, and its response must not wait on a disk.
// A write lost to a crash costs nothing a restart does not recover: the
// proxy's fresh stream re-subscribes what it holds. A failed write is
// logged; the next change writes the whole set again.
func (s *Set) save() {
	s.observe()
	if s.opts.StateDir == "" {
		return
	}
	var st pairstate.State
	for t, p := range s.pairs {
		if p.dormant {
			st.Dormant = append(st.Dormant, t)
		} else {
			st.Live = append(st.Live, t)
		}
	}
	s.gen++
	gen := s.gen
	s.background.Add(1)
	go s.write(gen, st)
}

// write writes st, the set as of generation gen, unless a later one is
// written already: writes may start out of order, never land so.
func (s *Set) write(gen uint64, st pairstate.State) {
	defer s.background.Done()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if gen <= s.written {
		return
	}
	if err := pairstate.Write(s.opts.StateDir, st); err != nil {
		reason := errnoName(err)
		s.metrics.stateWrite.WithLabelValues(reason).Inc()
		s.log.Error("failed to persist QUIC pairs", "reason", reason, "err", err)
		return
	}
	s.written = gen
}

// Flush waits until every change to the pairs made so far is on disk (or
// failed, and was logged) and every prune is judged: an agent stopping
// calls it last.
func (s *Set) Flush() { s.background.Wait() }

// errnoName is err's errno as a counter's label (ENOSPC, EDQUOT, EIO,
// ...), or "other".
func errnoName(err error) string {
	if errno, ok := errors.AsType[syscall.Errno](err); ok {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
	}
	return "other"
}
