package h2

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// idleBody is a downstream request's body under its connection manager's
// stream_idle_timeout: while the proxy waits on a Read (the upstream
// request pulls the body through it), a client that sends no byte for the
// timeout has its body cut, as Envoy's stream idle timer does, and the
// request is answered 408 (or reset, once the response has begun). A
// slow-body client (headers, then the body a byte at a time or not at all)
// holds a stream, its handler and an upstream stream no longer. Time the
// proxy does not wait on the client (the upstream holding the body back)
// is not counted against it.
//
// The watch is a timer that looks at the last activity when it fires,
// not one reset per Read: a Read costs two clock reads and no timer
// operation. The cut is the response writer's read deadline, set in the
// past, which fails the Read under way: net/http's connection, x/net's and
// quic-go's streams all support it.
type idleBody struct {
	r       io.ReadCloser
	w       http.ResponseWriter
	timeout time.Duration
	// onFire counts the cut; it is called once, under mu.
	onFire func()

	// last is when the proxy last began waiting for the body or got a
	// byte of it, in Unix nanoseconds; reading is the Reads under way.
	last    atomic.Int64
	reading atomic.Int32
	eof     atomic.Bool

	mu sync.Mutex
	t  *time.Timer
	// done is set once the watch is over: the body ended, the timer
	// fired, or the handler returned. fired is set by the cut.
	done, fired bool
}

// pastDeadline fails a Read at once.
var pastDeadline = time.Unix(1, 0)

func watchBody(r io.ReadCloser, w http.ResponseWriter, timeout time.Duration, onFire func()) *idleBody {
	b := &idleBody{r: r, w: w, timeout: timeout, onFire: onFire}
	b.last.Store(time.Now().UnixNano())
	b.mu.Lock()
	b.t = time.AfterFunc(timeout, b.check)
	b.mu.Unlock()
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.reading.Add(1)
	b.last.Store(time.Now().UnixNano())
	n, err := b.r.Read(p)
	if n > 0 {
		b.last.Store(time.Now().UnixNano())
	}
	b.reading.Add(-1)
	if errors.Is(err, io.EOF) {
		b.eof.Store(true)
	}
	if err != nil {
		// Nothing more is waited for.
		b.stop()
	}
	return n, err
}

func (b *idleBody) Close() error { return b.r.Close() }

// check runs when the timer fires: it cuts the body if a Read has waited
// the whole timeout, and otherwise looks again when it would have.
func (b *idleBody) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	if b.reading.Load() == 0 {
		// Nothing waits on the client: a Read that starts counts from
		// its start.
		b.t.Reset(b.timeout)
		return
	}
	if idle := time.Since(time.Unix(0, b.last.Load())); idle < b.timeout {
		b.t.Reset(b.timeout - idle)
		return
	}
	b.done, b.fired = true, true
	_ = http.NewResponseController(b.w).SetReadDeadline(pastDeadline)
	b.onFire()
}

func (b *idleBody) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.done = true
		b.t.Stop()
	}
}

// timedOut says whether the timeout cut the body.
func (b *idleBody) timedOut() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.fired
}

// finish ends the watch as the handler returns, and says whether the
// timeout cut the body. The response writer is not used after it. A body
// left unread (the upstream answered before taking all of it, or never
// asked for it) still has the timeout, from now, in all: net/http reads
// up to 256 KiB of it after the handler returns, with no deadline of its
// own, so that the connection can serve on.
func (b *idleBody) finish() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.done = true
		b.t.Stop()
	}
	if !b.fired && !b.eof.Load() {
		_ = http.NewResponseController(b.w).SetReadDeadline(time.Now().Add(b.timeout))
	}
	return b.fired
}
