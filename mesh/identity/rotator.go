package identity

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// MinRotatorTTL is the shortest SVID lifetime a Rotator takes. X.509 times
// are whole seconds, so an SVID's lifetime is counted from the second its
// issuance falls in, up to a second early; under two seconds its half-life
// could already have passed at issuance, and the Rotator would re-issue
// without pause.
const MinRotatorTTL = 2 * time.Second

// RotatorConfig is what a Rotator issues.
type RotatorConfig struct {
	// TTL is each SVID's lifetime; the Rotator re-issues at half of it.
	TTL time.Duration
	// OmitDNSSANs issues every SVID without its DNS SANs (Request.OmitDNSSANs).
	OmitDNSSANs bool
}

// Rotator keeps an SVID for each of a set of accounts in a Store, issued by
// the embedded CA, and re-issues each when half its TTL has elapsed. The
// replaced SVID is not revoked: it verifies until its NotAfter, so a proxy
// has half a TTL to pick up the new one before peers refuse the old.
type Rotator struct {
	ca    *CA
	store *Store
	cfg   RotatorConfig
	wake  chan struct{}

	mu   sync.Mutex
	held map[Account]held
}

// held is an account's current SVID identity and its half-life.
type held struct {
	id  spiffeid.ID
	due time.Time
}

// NewRotator returns a Rotator that writes into store, and puts the CA's
// bundle there.
func NewRotator(ca *CA, store *Store, cfg RotatorConfig) (*Rotator, error) {
	if cfg.TTL < MinRotatorTTL {
		return nil, fmt.Errorf("rotator for %q: SVID TTL %s is below the minimum %s", ca.TrustDomain(), cfg.TTL, MinRotatorTTL)
	}
	store.PutBundle(ca.Bundle())
	return &Rotator{
		ca:    ca,
		store: store,
		cfg:   cfg,
		wake:  make(chan struct{}, 1),
		held:  make(map[Account]held),
	}, nil
}

// Add issues an SVID for a at once and keeps it rotated. Adding an account
// already held does nothing. A bad account is refused and leaves nothing
// behind.
func (r *Rotator) Add(a Account) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.held[a]; ok {
		return nil
	}
	if err := r.issueLocked(a); err != nil {
		return err
	}
	r.poke()
	return nil
}

// Remove stops rotating a and drops its SVID from the store.
func (r *Rotator) Remove(a Account) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.held[a]
	if !ok {
		return
	}
	delete(r.held, a)
	r.store.DeleteSVID(h.id)
}

// Run re-issues SVIDs as they reach half-life until ctx is done, when it
// returns nil. One Run per Rotator. A failed issuance ends Run with the
// error; the SVID it was to replace stays in the store, valid until its
// NotAfter.
func (r *Rotator) Run(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		next, err := r.rotateDue(time.Now())
		if err != nil {
			return err
		}
		var fire <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-fire:
		case <-r.wake:
			timer.Stop()
		}
	}
}

// rotateDue re-issues every SVID whose half-life is at or before now and
// returns the earliest half-life still ahead (zero when none is held).
func (r *Rotator) rotateDue(now time.Time) (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	for a, h := range r.held {
		if !h.due.After(now) {
			if err := r.issueLocked(a); err != nil {
				return time.Time{}, fmt.Errorf("rotate: %w", err)
			}
			h = r.held[a]
		}
		if next.IsZero() || h.due.Before(next) {
			next = h.due
		}
	}
	return next, nil
}

// issueLocked issues a's SVID, stores it and schedules its rotation at
// NotAfter - TTL/2, read from the certificate itself.
func (r *Rotator) issueLocked(a Account) error {
	svid, err := r.ca.Issue(Request{Account: a, TTL: r.cfg.TTL, OmitDNSSANs: r.cfg.OmitDNSSANs})
	if err != nil {
		return err
	}
	r.store.PutSVID(svid)
	r.held[a] = held{id: svid.ID, due: svid.Certificates[0].NotAfter.Add(-r.cfg.TTL / 2)}
	return nil
}

// poke wakes Run to reschedule; a pending wake already does that.
func (r *Rotator) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Keep makes the held accounts exactly accounts: it issues for the new
// ones and drops the others. A bad account is refused, naming it, and
// changes nothing.
func (r *Rotator) Keep(accounts []Account) error {
	for _, a := range accounts {
		if err := a.validate(); err != nil {
			return fmt.Errorf("rotator: %w", err)
		}
	}
	want := map[Account]bool{}
	for _, a := range accounts {
		want[a] = true
		if err := r.Add(a); err != nil {
			return err
		}
	}
	r.mu.Lock()
	var gone []Account
	for a := range r.held {
		if !want[a] {
			gone = append(gone, a)
		}
	}
	r.mu.Unlock()
	for _, a := range gone {
		r.Remove(a)
	}
	return nil
}
