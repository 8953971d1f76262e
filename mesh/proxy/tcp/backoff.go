package tcp

import "time"

// Accept backoff bounds, net/http's Server's: the first retry after 5ms,
// doubling to at most a second.
const (
	minAcceptBackoff = 5 * time.Millisecond
	maxAcceptBackoff = time.Second
)

// acceptLogEvery is the most often a listener logs a failing accept; the
// counter aether_proxy_tcp_accept_errors_total has every one.
const acceptLogEvery = 10 * time.Second

type backoff struct{ delay time.Duration }

func (b *backoff) next() time.Duration {
	b.delay = min(max(2*b.delay, minAcceptBackoff), maxAcceptBackoff)
	return b.delay
}

func (b *backoff) reset() { b.delay = 0 }

// rateLog allows one line per every, and counts what it held back.
type rateLog struct {
	every      time.Duration
	last       time.Time
	suppressed int
}

func (r *rateLog) allow(now time.Time) (ok bool, suppressed int) {
	if !r.last.IsZero() && now.Sub(r.last) < r.every {
		r.suppressed++
		return false, 0
	}
	r.last, suppressed, r.suppressed = now, r.suppressed, 0
	return true, suppressed
}

// clock is the listener's time: the accept loop's waits and the idle
// timers. Tests replace it to drive time by hand instead of waiting.
type clock struct {
	now func() time.Time
	// sleep waits d and reports true, or false once stop is closed.
	sleep func(d time.Duration, stop <-chan struct{}) bool
	// afterFunc runs f in its own goroutine once d has passed.
	afterFunc func(d time.Duration, f func()) timer
}

// timer is the part of *time.Timer an idle watch uses.
type timer interface {
	Reset(d time.Duration) bool
	Stop() bool
}

var realClock = clock{
	now: time.Now,
	sleep: func(d time.Duration, stop <-chan struct{}) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-stop:
			return false
		}
	},
	afterFunc: func(d time.Duration, f func()) timer { return time.AfterFunc(d, f) },
}
