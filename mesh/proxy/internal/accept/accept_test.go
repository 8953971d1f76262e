package accept_test

import (
	"errors"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/aether-mesh/aether/mesh/proxy/internal/accept"
	"github.com/aether-mesh/aether/mesh/proxy/internal/accept/accepttest"
)

func counter() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Name: "accept_errors_total", Help: "test"})
}

func count(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// pipe is an accept that yields one end of an in-memory connection; the
// test keeps the other end in peers.
func pipe(peers chan<- net.Conn) accepttest.Step[net.Conn] {
	return func() (net.Conn, error) {
		c, peer := net.Pipe()
		peers <- peer
		return c, nil
	}
}

// closed reports whether peer's other end was closed: a read returns
// io.EOF instead of blocking.
func closed(peer net.Conn) bool {
	_, err := peer.Read(make([]byte, 1))
	return errors.Is(err, io.EOF)
}

// A failing accept backs off as net/http's Server does, 5ms doubling to 1s,
// with exactly one accept per wait; a success resets the backoff; every
// failure is counted, and the log holds one line per 10s, each saying how
// many it held back. Time is the synctest bubble's: the gaps between
// accepts are the loop's waits, read exactly.
func TestAcceptBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const emfile, enfile = 40, 3
		peers := make(chan net.Conn, 1)
		var steps []accepttest.Step[net.Conn]
		for range emfile {
			steps = append(steps, accepttest.Fail[net.Conn](syscall.EMFILE))
		}
		steps = append(steps, pipe(peers))
		for range enfile {
			steps = append(steps, accepttest.Fail[net.Conn](syscall.ENFILE))
		}
		ln := accepttest.New(steps...)
		var log accepttest.Log
		errs := counter()
		handled := 0
		l := accept.New(ln, accept.Options{Name: "tcp-capture~default~client", Protocol: "tcp", Log: log.Logger(), Errors: errs})
		l.Serve(func(net.Conn) { handled++ })
		<-ln.Spent()
		synctest.Wait()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}

		ms := time.Millisecond
		want := []time.Duration{5 * ms, 10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms}
		for len(want) < emfile {
			want = append(want, time.Second)
		}
		// The success is retried at once; the failures after it start over.
		want = append(want, 0, 5*ms, 10*ms, 20*ms)
		if gaps := ln.Gaps(); !slices.Equal(gaps, want) {
			t.Fatalf("waits between accepts %v, want %v", gaps, want)
		}
		if handled != 1 || !closed(<-peers) {
			t.Errorf("the accepted connection was handled %d times (want 1) or not closed after", handled)
		}
		if v := count(t, errs); v != emfile+enfile {
			t.Errorf("accept errors counted %v, want %d", v, emfile+enfile)
		}
		// Failure i comes at 1275ms+(i-8)s for i >= 8: lines at failures 0,
		// 17 (10.275s), 27 and 37, each 10s apart; the 5 failures after
		// failure 37 are held back and counted.
		suppressed := log.Suppressed()
		if want := []int64{0, 16, 9, 9}; !slices.Equal(suppressed, want) {
			t.Errorf("log lines held back %v before each line, want %v: one line per %s", suppressed, want, accept.LogEvery)
		}
	})
}

// Close during a backoff returns at once instead of waiting it out, and
// nothing is accepted after.
func TestCloseCutsTheBackoffShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ln := accepttest.New(accepttest.Fail[net.Conn](syscall.EMFILE), accepttest.Fail[net.Conn](syscall.EMFILE))
		var log accepttest.Log
		l := accept.New(ln, accept.Options{Name: "l", Protocol: "tcp", Log: log.Logger(), Errors: counter()})
		l.Serve(func(net.Conn) {})
		synctest.Wait() // the loop waits after its first failure
		start := time.Now()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited != 0 {
			t.Errorf("Close waited %s of the backoff out", waited)
		}
		if gaps := ln.Gaps(); len(gaps) != 0 {
			t.Errorf("the loop accepted again after Close, %s after its failure", gaps[0])
		}
	})
}

// Close closes every connection held, the accepted one and one its handler
// tracks, waits for the handler, and refuses to track any more.
func TestCloseClosesHeldConnections(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		peers := make(chan net.Conn, 1)
		ln := accepttest.New(pipe(peers))
		var log accepttest.Log
		l := accept.New(ln, accept.Options{Name: "l", Protocol: "tcp", Log: log.Logger(), Errors: counter()})
		up, upPeer := net.Pipe()
		returned := false
		l.Serve(func(c net.Conn) {
			if !l.Track(up) {
				t.Error("Track refused a connection before Close")
				return
			}
			defer l.Untrack(up)
			_, _ = c.Read(make([]byte, 1)) // until Close closes c
			returned = true
		})
		down := <-peers
		<-ln.Spent()
		synctest.Wait()
		if n := l.Held(); n != 2 {
			t.Fatalf("the loop holds %d connections, want the accepted one and the tracked one", n)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !returned {
			t.Error("Close returned before the handler")
		}
		if !closed(down) || !closed(upPeer) {
			t.Error("Close left a held connection open")
		}
		if n := l.Held(); n != 0 {
			t.Errorf("the loop holds %d connections after Close", n)
		}
		late, _ := net.Pipe()
		defer late.Close()
		if l.Track(late) {
			t.Error("Track held a connection after Close")
		}
	})
}
