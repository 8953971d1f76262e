package identity

import (
	"fmt"
	"sync"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Store is a Source held in memory: the current SVID per identity and the
// bundle per trust domain. Writers replace whole values and never change one
// in place, so a reader may keep what it got.
type Store struct {
	mu      sync.RWMutex
	svids   map[spiffeid.ID]*x509svid.SVID
	bundles *x509bundle.Set
	subs    map[chan struct{}]struct{}
}

var _ Source = (*Store)(nil)

// NewStore returns an empty Store.
func NewStore() *Store {
	return &Store{
		svids:   make(map[spiffeid.ID]*x509svid.SVID),
		bundles: x509bundle.NewSet(),
		subs:    make(map[chan struct{}]struct{}),
	}
}

// PutSVID makes svid the current SVID of its identity and notifies.
func (s *Store) PutSVID(svid *x509svid.SVID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.svids[svid.ID] = svid
	s.notifyLocked()
}

// DeleteSVID drops the SVID of id, if any, and notifies.
func (s *Store) DeleteSVID(id spiffeid.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.svids[id]; !ok {
		return
	}
	delete(s.svids, id)
	s.notifyLocked()
}

// PutBundle makes a copy of b the bundle of its trust domain and notifies.
// The copy keeps a later change to b from reaching readers unannounced.
func (s *Store) PutBundle(b *x509bundle.Bundle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bundles.Add(b.Clone())
	s.notifyLocked()
}

// GetX509SVIDFor implements SVIDSource.
func (s *Store) GetX509SVIDFor(id spiffeid.ID) (*x509svid.SVID, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	svid, ok := s.svids[id]
	if !ok {
		return nil, fmt.Errorf("identity store: %w for %s", ErrNoSVID, id)
	}
	return svid, nil
}

// GetX509BundleForTrustDomain implements x509bundle.Source.
func (s *Store) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, ok := s.bundles.Get(td)
	if !ok {
		return nil, fmt.Errorf("identity store: %w for trust domain %q", ErrNoBundle, td)
	}
	return b, nil
}

// Subscribe implements Source.
func (s *Store) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			s.mu.Lock()
			delete(s.subs, ch)
			s.mu.Unlock()
		})
	}
}

// notifyLocked signals every subscriber without blocking: a full channel
// already says "changed", which is all a signal carries.
func (s *Store) notifyLocked() {
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
