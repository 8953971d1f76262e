package udp

import "time"

// A capture socket read can fail without the socket being closed: EMFILE
// or ENOMEM from the kernel, say. Retrying at once turns that into a busy
// loop and a log line per spin, so failed reads back off exponentially up
// to a cap, and the warning is logged at most once per logEvery with the
// number of failures it stands for.
const (
	minBackoff = time.Millisecond
	maxBackoff = time.Second
	logEvery   = 10 * time.Second
)

// backoff is one read loop's retry state; the zero value is ready.
type backoff struct {
	wait       time.Duration
	lastLog    time.Time
	suppressed int
}

// failed records a failed read and returns how long to wait before the
// next one, and whether to log it (with how many failures went unlogged
// since the last log).
func (b *backoff) failed(now time.Time) (wait time.Duration, log bool, unlogged int) {
	b.wait = min(max(2*b.wait, minBackoff), maxBackoff)
	if !b.lastLog.IsZero() && now.Sub(b.lastLog) < logEvery {
		b.suppressed++
		return b.wait, false, 0
	}
	unlogged, b.suppressed, b.lastLog = b.suppressed, 0, now
	return b.wait, true, unlogged
}

// succeeded resets the wait after a good read; the log limit stands.
func (b *backoff) succeeded() { b.wait = 0 }
