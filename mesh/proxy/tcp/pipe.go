package tcp

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// pipe copies both ways until both directions are done. A FIN from one
// side is passed on as a CloseWrite of the other while the other direction
// keeps flowing, as Envoy's tcp_proxy half-closes; an error either way (a
// reset, a write to a closed peer) closes both, as does idle, the
// tcp_proxy idle_timeout (zero: none).
func (l *Listener) pipe(down, up *net.TCPConn, idle time.Duration) {
	abort := sync.OnceFunc(func() { _ = down.Close(); _ = up.Close() })
	act := &activity{now: l.clock.now}
	act.touch()
	if idle > 0 {
		w := watchIdle(l.clock, act, idle, func() { l.stats.IdleTimeouts.Inc(); abort() })
		defer w.stop()
	}
	finish := func(dst *net.TCPConn, err error) {
		if err != nil {
			abort()
			return
		}
		_ = dst.CloseWrite()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		n, err := copyConn(up, down, act)
		l.stats.BytesUp.Add(float64(n))
		finish(up, err)
	})
	n, err := copyConn(down, up, act)
	l.stats.BytesDown.Add(float64(n))
	finish(down, err)
	wg.Wait()
}

var bufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyConn copies src to dst until src's EOF (nil error) or an error,
// marking activity at every read and write.
func copyConn(dst, src *net.TCPConn, act *activity) (int64, error) {
	bp := bufs.Get().(*[]byte)
	defer bufs.Put(bp)
	var n int64
	for {
		r, rerr := src.Read(*bp)
		if r > 0 {
			act.touch()
			w, werr := dst.Write((*bp)[:r])
			n += int64(w)
			if werr != nil {
				return n, werr
			}
			act.touch()
		}
		if errors.Is(rerr, io.EOF) {
			return n, nil
		}
		if rerr != nil {
			return n, rerr
		}
	}
}

// activity is when a byte last moved either way.
type activity struct {
	now  func() time.Time
	last atomic.Int64
}

func (a *activity) touch() { a.last.Store(a.now().UnixNano()) }

func (a *activity) since() time.Duration { return a.now().Sub(time.Unix(0, a.last.Load())) }

// idleWatch fires expire once activity has been still for idle. Its timer
// fires at most once per idle window: when bytes moved meanwhile it re-arms
// for the rest of the window instead of being reset on every read.
type idleWatch struct {
	mu      sync.Mutex
	t       timer
	stopped bool
}

func watchIdle(clk clock, act *activity, idle time.Duration, expire func()) *idleWatch {
	w := &idleWatch{}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t = clk.afterFunc(idle, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped {
			return
		}
		if rest := idle - act.since(); rest > 0 {
			w.t.Reset(rest)
			return
		}
		w.stopped = true
		expire()
	})
	return w
}

func (w *idleWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
}
