package identity

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// pending reports whether ch holds a change signal, and consumes it.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func TestStoreServesWhatWasPutAndNamesWhatIsMissing(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	s := NewStore()
	svid := issue(t, ca, Request{Account: cart, TTL: time.Hour})

	if _, err := s.GetX509SVIDFor(svid.ID); !errors.Is(err, ErrNoSVID) || !strings.Contains(err.Error(), svid.ID.String()) {
		t.Errorf("empty store: err = %v, want ErrNoSVID naming %s", err, svid.ID)
	}
	if _, err := s.GetX509BundleForTrustDomain(ca.TrustDomain()); !errors.Is(err, ErrNoBundle) || !strings.Contains(err.Error(), "aether.test") {
		t.Errorf("empty store: err = %v, want ErrNoBundle naming aether.test", err)
	}

	s.PutSVID(svid)
	s.PutBundle(ca.Bundle())
	got, err := s.GetX509SVIDFor(svid.ID)
	if err != nil || got != svid {
		t.Fatalf("GetX509SVIDFor = %v, %v; want the SVID put", got, err)
	}
	if _, _, err := x509svid.Verify(got.Certificates, s); err != nil {
		t.Errorf("the store's SVID does not verify under the store's bundle: %v", err)
	}
	other := spiffeid.RequireTrustDomainFromString("other.test")
	if _, err := s.GetX509BundleForTrustDomain(other); !errors.Is(err, ErrNoBundle) {
		t.Errorf("other.test: err = %v, want ErrNoBundle", err)
	}

	s.DeleteSVID(svid.ID)
	if _, err := s.GetX509SVIDFor(svid.ID); !errors.Is(err, ErrNoSVID) {
		t.Errorf("after DeleteSVID: err = %v, want ErrNoSVID", err)
	}
}

func TestStoreKeepsItsOwnCopyOfABundle(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	foreign := newTestCA(t, "aether.test").Bundle().X509Authorities()[0]
	s := NewStore()
	b := ca.Bundle()
	s.PutBundle(b)
	b.AddX509Authority(foreign)

	held, err := s.GetX509BundleForTrustDomain(ca.TrustDomain())
	if err != nil {
		t.Fatal(err)
	}
	if held.HasX509Authority(foreign) {
		t.Error("a change to the caller's bundle after PutBundle reached the store")
	}
}

func TestSubscribeSignalsEachChangeCoalescedUntilCancelled(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	s := NewStore()
	changed, cancel := s.Subscribe()
	other, cancelOther := s.Subscribe()
	defer cancelOther()
	svid := issue(t, ca, Request{Account: cart, TTL: time.Hour})

	if pending(changed) {
		t.Fatal("signal before any change")
	}
	s.PutSVID(svid)
	s.PutBundle(ca.Bundle())
	if !pending(changed) || !pending(other) {
		t.Fatal("no signal after PutSVID and PutBundle")
	}
	if pending(changed) {
		t.Error("two changes while unread gave two signals, want one")
	}

	s.DeleteSVID(spiffeid.RequireFromString("spiffe://aether.test/ns/shop/sa/nobody"))
	if pending(changed) {
		t.Error("deleting an identity the store does not hold signalled a change")
	}
	s.DeleteSVID(svid.ID)
	if !pending(changed) {
		t.Error("no signal after DeleteSVID")
	}

	cancel()
	cancel() // idempotent
	s.PutSVID(svid)
	if pending(changed) {
		t.Error("signal after cancel")
	}
	if !pending(other) {
		t.Error("cancelling one subscriber silenced another")
	}
}

// Readers, writers and subscribers at once; run with -race.
func TestStoreIsSafeForConcurrentUse(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	s := NewStore()
	s.PutBundle(ca.Bundle())
	svids := make([]*x509svid.SVID, 4)
	for i := range svids {
		svids[i] = issue(t, ca, Request{Account: cart, TTL: time.Hour})
	}
	s.PutSVID(svids[0])
	id := svids[0].ID

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Go(func() {
			for range 500 {
				svid, err := s.GetX509SVIDFor(id)
				if err != nil {
					errs <- err
					return
				}
				if _, _, err := x509svid.Verify(svid.Certificates, s); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range 500 {
			s.PutSVID(svids[i%len(svids)])
			s.PutBundle(ca.Bundle())
		}
	})
	wg.Go(func() {
		for range 200 {
			ch, cancel := s.Subscribe()
			pending(ch)
			cancel()
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
