// Package accept is the accept loop the proxy's TCP and HTTP listeners
// share. A failed accept (EMFILE, ENFILE) leaves the socket open, so
// retrying at once is a busy loop and a log line per spin: each failure is
// counted, retried after a backoff as net/http's Server paces one (5ms
// doubling to 1s, reset by a success, cut short by Close) and logged at
// most once per LogEvery with the number held back. The loop also holds
// every connection its handlers open, so that Close closes them all.
package accept

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Backoff bounds, net/http's Server's.
const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
)

// LogEvery is the most often a listener logs a failing accept; its
// counter has every one.
const LogEvery = 10 * time.Second

// Listener is a listening socket that yields connections of type C.
type Listener[C net.Conn] interface {
	Accept() (C, error)
	Close() error
}

// Options name a listener in its log lines and count its failed accepts.
type Options struct {
	// Name is the listener's resource name.
	Name string
	// Protocol ("tcp", "http") begins the listener's log message.
	Protocol string
	Log      *slog.Logger
	// Errors counts every failed accept.
	Errors prometheus.Counter
}

// Loop accepts on one listening socket and holds the connections its
// handlers use.
type Loop[C net.Conn] struct {
	ln   Listener[C]
	opts Options
	// done is closed by Close; it cuts a backoff short.
	done chan struct{}

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	// resume is non-nil while the loop is paused, and closed to resume.
	resume chan struct{}
	wg     sync.WaitGroup
}

// deadliner is a listening socket whose Accept a deadline interrupts
// without taking a connection: net.TCPListener.
type deadliner interface{ SetDeadline(time.Time) error }

// Pause stops accepting without closing the socket: connections the kernel
// completes meanwhile wait in its accept queue, for Resume or for another
// process holding the same socket (a hot restart's child). Held
// connections are untouched.
func (l *Loop[C]) Pause() error {
	d, ok := l.ln.(deadliner)
	if !ok {
		return errors.New("listener cannot be paused: it has no deadline")
	}
	l.mu.Lock()
	if l.resume == nil && !l.closed {
		l.resume = make(chan struct{})
	}
	l.mu.Unlock()
	return d.SetDeadline(time.Now())
}

// Resume accepts again after Pause.
func (l *Loop[C]) Resume() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resume == nil {
		return nil
	}
	err := l.ln.(deadliner).SetDeadline(time.Time{})
	close(l.resume)
	l.resume = nil
	return err
}

// Conns are the connections the loop holds.
func (l *Loop[C]) Conns() []net.Conn {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		out = append(out, c)
	}
	return out
}

// paused waits while the loop is paused and reports false once it closes.
func (l *Loop[C]) paused() (bool, bool) {
	l.mu.Lock()
	r := l.resume
	l.mu.Unlock()
	if r == nil {
		return false, true
	}
	select {
	case <-r:
		return true, true
	case <-l.done:
		return true, false
	}
}

// New makes a loop for ln; Serve starts it.
func New[C net.Conn](ln Listener[C], o Options) *Loop[C] {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Loop[C]{ln: ln, opts: o, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
}

// Serve starts accepting. Each connection goes to handle in its own
// goroutine, held for handle's run and closed once it returns.
func (l *Loop[C]) Serve(handle func(C)) {
	l.wg.Add(1)
	go l.run(handle)
}

// Close stops accepting, closes every held connection and waits for the
// handlers to return.
func (l *Loop[C]) Close() error {
	l.mu.Lock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	for c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	err := l.ln.Close()
	l.wg.Wait()
	return err
}

// Track holds c until Untrack, so that Close closes it. It reports false,
// holding nothing, once the loop is closed: the caller must close c.
func (l *Loop[C]) Track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

// Untrack lets go of c.
func (l *Loop[C]) Untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// Held is how many connections the loop holds.
func (l *Loop[C]) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

func (l *Loop[C]) run(handle func(C)) {
	defer l.wg.Done()
	var b backoff
	lg := rateLog{every: LogEvery}
	for {
		c, err := l.ln.Accept()
		if err == nil {
			b.reset()
			l.wg.Add(1)
			go l.serveConn(c, handle)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if was, open := l.paused(); was {
			if !open {
				return
			}
			continue
		}
		l.opts.Errors.Inc()
		delay := b.next()
		if ok, suppressed := lg.allow(time.Now()); ok {
			l.opts.Log.Warn(l.opts.Protocol+" accept failed, backing off", "listener", l.opts.Name, "err", err, "backoff", delay, "suppressed", suppressed)
		}
		if !l.sleep(delay) {
			return
		}
	}
}

func (l *Loop[C]) serveConn(c C, handle func(C)) {
	defer l.wg.Done()
	defer c.Close()
	if !l.Track(c) {
		return
	}
	defer l.Untrack(c)
	handle(c)
}

// sleep waits d and reports true, or false once the loop is closed.
func (l *Loop[C]) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

type backoff struct{ delay time.Duration }

func (b *backoff) next() time.Duration {
	b.delay = min(max(2*b.delay, minBackoff), maxBackoff)
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
