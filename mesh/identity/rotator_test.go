package identity

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// rig is a Rotator running in a synctest bubble: time.Sleep moves the
// bubble's clock, and synctest.Wait returns once Run has acted on it.
type rig struct {
	t       *testing.T
	store   *Store
	rot     *Rotator
	td      spiffeid.TrustDomain
	changed <-chan struct{}
	done    chan error
}

func startRig(t *testing.T, caCfg CAConfig, cfg RotatorConfig) *rig {
	t.Helper()
	ca, err := NewCA(caCfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, store: NewStore(), td: ca.TrustDomain(), done: make(chan error, 1)}
	if r.rot, err = NewRotator(ca, r.store, cfg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go func() { r.done <- r.rot.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	r.changed, _ = r.store.Subscribe()
	synctest.Wait() // Run is parked with nothing to rotate: an Add must wake it
	return r
}

func (r *rig) add(a Account) spiffeid.ID {
	r.t.Helper()
	if err := r.rot.Add(a); err != nil {
		r.t.Fatalf("Add(%s): %v", a, err)
	}
	id, err := ID(r.td, a)
	if err != nil {
		r.t.Fatal(err)
	}
	return id
}

func (r *rig) svid(id spiffeid.ID) *x509svid.SVID {
	r.t.Helper()
	svid, err := r.store.GetX509SVIDFor(id)
	if err != nil {
		r.t.Fatal(err)
	}
	return svid
}

// advance sleeps d on the bubble's clock and lets Run act on it.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func serial(svid *x509svid.SVID) string { return svid.Certificates[0].SerialNumber.String() }

var aether = CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local"}

func TestRotatorReissuesAtHalfLifeNotBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		r := startRig(t, aether, RotatorConfig{TTL: time.Hour})
		id := r.add(cart)
		synctest.Wait()
		pending(r.changed)
		first := r.svid(id)
		if !first.Certificates[0].NotAfter.Equal(t0.Add(time.Hour)) {
			t.Fatalf("first SVID expires %s, want t0+1h", first.Certificates[0].NotAfter)
		}

		advance(30*time.Minute - time.Second)
		if serial(r.svid(id)) != serial(first) || pending(r.changed) {
			t.Fatal("rotated before half-life (t0+29m59s)")
		}

		advance(time.Second)
		if !pending(r.changed) {
			t.Error("no change signal at half-life")
		}
		second := r.svid(id)
		if serial(second) == serial(first) {
			t.Fatal("not rotated at half-life (t0+30m)")
		}
		if !second.Certificates[0].NotAfter.Equal(t0.Add(90 * time.Minute)) {
			t.Errorf("rotated SVID expires %s, want t0+1h30m", second.Certificates[0].NotAfter)
		}
		for name, s := range map[string]*x509svid.SVID{"replaced": first, "new": second} {
			if _, _, err := x509svid.Verify(s.Certificates, r.store); err != nil {
				t.Errorf("%s SVID does not verify at half-life: %v", name, err)
			}
		}

		advance(30 * time.Minute) // t0+1h: the first SVID's NotAfter
		third := r.svid(id)
		if serial(third) == serial(second) {
			t.Error("not rotated again at the second half-life (t0+1h)")
		}
		if _, _, err := x509svid.Verify(first.Certificates, r.store); err != nil {
			t.Errorf("replaced SVID does not verify at its NotAfter: %v", err)
		}
		advance(time.Second)
		if _, _, err := x509svid.Verify(first.Certificates, r.store); err == nil {
			t.Error("replaced SVID still verifies after its NotAfter")
		}
	})
}

func TestRotatorSchedulesEachAccountOnItsOwnHalfLife(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, aether, RotatorConfig{TTL: time.Hour})
		a := r.add(cart)
		advance(10 * time.Minute)
		b := r.add(Account{Namespace: "shop", ServiceAccount: "till"})
		synctest.Wait()
		a0, b0 := r.svid(a), r.svid(b)

		advance(20 * time.Minute) // t0+30m: a's half-life only
		if serial(r.svid(a)) == serial(a0) {
			t.Error("a not rotated at its half-life")
		}
		if serial(r.svid(b)) != serial(b0) {
			t.Error("b rotated at a's half-life, 10m before its own")
		}
		advance(10 * time.Minute) // t0+40m: b's half-life
		if serial(r.svid(b)) == serial(b0) {
			t.Error("b not rotated at its half-life")
		}
	})
}

func TestRotatorAddIsIdempotentAndRemoveStopsRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, aether, RotatorConfig{TTL: time.Hour})
		id := r.add(cart)
		first := r.svid(id)
		r.add(cart)
		if serial(r.svid(id)) != serial(first) {
			t.Error("a second Add of a held account re-issued its SVID")
		}

		synctest.Wait()
		pending(r.changed)
		r.rot.Remove(cart)
		if _, err := r.store.GetX509SVIDFor(id); !errors.Is(err, ErrNoSVID) {
			t.Errorf("after Remove: err = %v, want ErrNoSVID", err)
		}
		if !pending(r.changed) {
			t.Error("Remove gave no change signal")
		}
		advance(3 * time.Hour)
		if pending(r.changed) {
			t.Error("a removed account was rotated")
		}
	})
}

func TestRotatorRefusesABadAccountLeavingNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, aether, RotatorConfig{TTL: time.Hour})
		synctest.Wait()
		pending(r.changed)
		err := r.rot.Add(Account{Namespace: "shop"})
		if err == nil || !strings.Contains(err.Error(), "empty service account") {
			t.Fatalf("Add without a service account: err = %v, want one naming it", err)
		}
		if pending(r.changed) {
			t.Error("a refused Add changed the store")
		}
		advance(3 * time.Hour)
		if pending(r.changed) {
			t.Error("a refused Add was scheduled for rotation")
		}
	})
}

func TestRotatorOmitsDNSSANsWhenConfigured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, aether, RotatorConfig{TTL: time.Hour, OmitDNSSANs: true})
		id := r.add(cart)
		advance(30 * time.Minute)
		if names := r.svid(id).Certificates[0].DNSNames; len(names) != 0 {
			t.Errorf("rotated SVID has DNS SANs %q, want none", names)
		}
	})
}

// When the root would expire before a re-issued SVID, Run stops with an
// error naming the identity and the last SVID stays served.
func TestRotatorStopsWhenTheRootCannotCoverTheNextSVID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, err := NewCA(CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.local", RootTTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		store := NewStore()
		rot, err := NewRotator(ca, store, RotatorConfig{TTL: 40 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if err := rot.Add(cart); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- rot.Run(t.Context()) }()

		time.Sleep(20 * time.Minute) // second SVID expires t0+60m, the root's NotAfter
		synctest.Wait()
		id, _ := ID(ca.TrustDomain(), cart)
		last, _ := store.GetX509SVIDFor(id)
		time.Sleep(20 * time.Minute) // third would expire t0+80m
		synctest.Wait()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "spiffe://aether.test/ns/shop/sa/cart") ||
				!strings.Contains(err.Error(), "root") {
				t.Errorf("Run: err = %v, want one naming the identity and the root", err)
			}
		default:
			t.Fatal("Run kept going with an SVID it cannot issue")
		}
		if got, _ := store.GetX509SVIDFor(id); got != last {
			t.Error("the last issued SVID is no longer served")
		}
	})
}

func TestNewRotatorRefusesATTLBelowTheMinimum(t *testing.T) {
	ca := newTestCA(t, "aether.test")
	for _, ttl := range []time.Duration{0, -time.Second, time.Second} {
		if _, err := NewRotator(ca, NewStore(), RotatorConfig{TTL: ttl}); err == nil ||
			!strings.Contains(err.Error(), "below the minimum 2s") {
			t.Errorf("TTL %s: err = %v, want one naming the minimum", ttl, err)
		}
	}
	if _, err := NewRotator(ca, NewStore(), RotatorConfig{TTL: MinRotatorTTL}); err != nil {
		t.Errorf("control: TTL %s: %v", MinRotatorTTL, err)
	}
}

// Readers take SVIDs from the store while the Rotator rotates and accounts
// come and go. Every SVID a reader is served must verify at that instant;
// run with -race.
func TestRotatedStoreServesOnlyValidSVIDsToConcurrentReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := startRig(t, aether, RotatorConfig{TTL: 10 * time.Minute})
		id := r.add(cart)
		churn := Account{Namespace: "shop", ServiceAccount: "churn"}
		var wg sync.WaitGroup
		served := make([]int, 4)
		for i := range served {
			wg.Go(func() {
				seen := map[string]bool{}
				time.Sleep(30 * time.Second) // read between half-lives, never at one
				for range 120 {
					time.Sleep(time.Minute)
					svid, err := r.store.GetX509SVIDFor(id)
					if err != nil {
						t.Error(err)
						return
					}
					if _, _, err := x509svid.Verify(svid.Certificates, r.store); err != nil {
						t.Errorf("served an SVID that does not verify now: %v", err)
					}
					seen[serial(svid)] = true
				}
				served[i] = len(seen)
			})
		}
		wg.Go(func() {
			for range 60 {
				time.Sleep(90 * time.Second)
				if err := r.rot.Add(churn); err != nil {
					t.Error(err)
				}
				time.Sleep(30 * time.Second)
				r.rot.Remove(churn)
			}
		})
		wg.Wait()
		// Reads at 1m30s, 2m30s, ..., 120m30s at a 5-minute half-life: the
		// SVIDs issued at 0, 5, ..., 120 minutes.
		for i, n := range served {
			if n != 25 {
				t.Errorf("reader %d saw %d distinct SVIDs, want 25", i, n)
			}
		}
	})
}

func TestKeepHoldsExactlyTheAccounts(t *testing.T) {
	ca, err := NewCA(CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	st := NewStore()
	r, err := NewRotator(ca, st, RotatorConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	a, b := Account{"demo", "a"}, Account{"demo", "b"}
	if err := r.Keep([]Account{a, b}); err != nil {
		t.Fatal(err)
	}
	if err := r.Keep([]Account{b}); err != nil {
		t.Fatal(err)
	}
	for acct, want := range map[Account]bool{a: false, b: true} {
		id, _ := ID(ca.TrustDomain(), acct)
		_, err := st.GetX509SVIDFor(id)
		if (err == nil) != want {
			t.Errorf("account %s held: %v, want %v", acct, err == nil, want)
		}
	}
	if err := r.Keep([]Account{b, {"demo", "Bad_Name"}}); err == nil {
		t.Error("a bad account was accepted")
	}
	id, _ := ID(ca.TrustDomain(), b)
	if _, err := st.GetX509SVIDFor(id); err != nil {
		t.Errorf("a refused Keep dropped a held account: %v", err)
	}
}
