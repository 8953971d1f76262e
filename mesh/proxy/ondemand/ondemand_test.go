package ondemand

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeCDS records the names subscribed, as the CDS stream would send them.
type fakeCDS struct {
	mu    sync.Mutex
	names []string
	err   error
}

func (f *fakeCDS) subscribe(name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.names = append(f.names, name)
	return f.err
}

func (f *fakeCDS) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.names)
}

const twin = "quic:svc-b.demo@client.demo"

// await runs Await in the bubble and reports its result and the fake time
// it took.
func await(d *Discovery, name string) <-chan result {
	out := make(chan result, 1)
	go func() {
		start := time.Now()
		err := d.Await(context.Background(), name)
		out <- result{err, time.Since(start)}
	}()
	return out
}

type result struct {
	err  error
	took time.Duration
}

func TestArrivalResumesThePausedRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cds := &fakeCDS{}
		d := &Discovery{Subscribe: cds.subscribe}
		r1, r2 := await(d, twin), await(d, twin)
		synctest.Wait()
		if got := cds.sent(); !slices.Equal(got, []string{twin}) {
			t.Fatalf("subscribed %v, want %s once for two paused requests", got, twin)
		}
		time.Sleep(300 * time.Microsecond)
		d.Update([]string{twin}, nil)
		for _, r := range []result{<-r1, <-r2} {
			if r.err != nil || r.took != 300*time.Microsecond {
				t.Fatalf("Await = %v after %s, want nil at the arrival (300µs)", r.err, r.took)
			}
		}
		if err := d.Await(context.Background(), twin); err != nil {
			t.Fatalf("Await on a present cluster = %v", err)
		}
		if s := d.Stats(); s.Subscribed != 1 || s.Skipped != 1 || s.Found != 2 {
			t.Fatalf("stats = %+v, want 1 subscribed, 1 skipped, 2 found", s)
		}
	})
}

// TestRefusedNameFailsAtOnceThenEveryLaterRequestWaitsTheTimeout: a name
// answered in removed_resources fails its paused request at once; the
// subscription is kept, so a later request sends nothing and waits out
// the timeout, as Envoy's does.
func TestRefusedNameFailsAtOnceThenEveryLaterRequestWaitsTheTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cds := &fakeCDS{}
		d := &Discovery{Subscribe: cds.subscribe}
		r := await(d, twin)
		synctest.Wait()
		d.Update(nil, []string{twin})
		if got := <-r; !errors.Is(got.err, ErrMissing) || got.took != 0 {
			t.Fatalf("refused Await = %v after %s, want ErrMissing at once", got.err, got.took)
		}
		got := <-await(d, twin)
		if !errors.Is(got.err, ErrTimeout) || got.took != DefaultTimeout {
			t.Fatalf("later Await = %v after %s, want ErrTimeout after %s", got.err, got.took, DefaultTimeout)
		}
		if sent := cds.sent(); len(sent) != 1 {
			t.Fatalf("subscribed %v, want the name once for the life of the Discovery", sent)
		}
		if s := d.Stats(); s.Missing != 1 || s.TimedOut != 1 || s.Skipped != 1 {
			t.Fatalf("stats = %+v", s)
		}
		if names := d.Names(); !slices.Equal(names, []string{twin}) {
			t.Fatalf("Names = %v, want %s kept for a fresh stream", names, twin)
		}
	})
}

func TestUnansweredNameTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &Discovery{Subscribe: (&fakeCDS{}).subscribe, Timeout: 5 * time.Second}
		got := <-await(d, twin)
		if !errors.Is(got.err, ErrTimeout) || got.took != 5*time.Second {
			t.Fatalf("Await = %v after %s, want ErrTimeout after 5s", got.err, got.took)
		}
	})
}

func TestSubscribeFailureIsReturnedAndTheNameKept(t *testing.T) {
	cds := &fakeCDS{err: errors.New("no ADS stream")}
	d := &Discovery{Subscribe: cds.subscribe}
	err := d.Await(context.Background(), twin)
	if err == nil || !errors.Is(err, cds.err) {
		t.Fatalf("Await = %v, want the subscribe error wrapped", err)
	}
	if names := d.Names(); !slices.Equal(names, []string{twin}) {
		t.Fatalf("Names = %v, want %s kept for the next stream", names, twin)
	}
}

func TestCancelledRequestStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &Discovery{Subscribe: (&fakeCDS{}).subscribe}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Await(ctx, twin) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("Await = %v, want context.Canceled", err)
		}
	})
}
