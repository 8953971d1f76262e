package udp

import (
	"sync"
	"time"
)

// A capture socket read can fail without the socket being closed: EMFILE
// or ENOMEM from the kernel, say. Retrying at once turns that into a busy
// loop and a log line per spin, so failed reads back off exponentially up
// to a cap. Warnings that can repeat per datagram (failed reads, upstream
// sockets that cannot be made) are logged at most once per logEvery, with
// the number held back since.
const (
	minBackoff = time.Millisecond
	maxBackoff = time.Second
	logEvery   = 10 * time.Second
)

// backoff is one read loop's retry state; the zero value is ready.
type backoff struct {
	wait time.Duration
	log  logLimit
}

// failed records a failed read and returns how long to wait before the
// next one, and whether to log it (with how many failures went unlogged
// since the last log).
func (b *backoff) failed(now time.Time) (wait time.Duration, log bool, unlogged int) {
	b.wait = min(max(2*b.wait, minBackoff), maxBackoff)
	log, unlogged = b.log.allow(now)
	return b.wait, log, unlogged
}

// succeeded resets the wait after a good read; the log limit stands.
func (b *backoff) succeeded() { b.wait = 0 }

// logLimit lets one warning through per logEvery; the zero value is ready.
type logLimit struct {
	mu   sync.Mutex
	last time.Time
	held int
}

// allow reports whether to log now, and how many were held back since the
// last one logged.
func (g *logLimit) allow(now time.Time) (ok bool, held int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.last.IsZero() && now.Sub(g.last) < logEvery {
		g.held++
		return false, 0
	}
	held, g.held, g.last = g.held, 0, now
	return true, held
}
