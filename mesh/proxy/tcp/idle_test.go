package tcp

import (
	"sync/atomic"
	"testing"
	"time"
)

// activity is an idler the test moves by hand: when a byte last moved,
// on the manual clock.
type activity struct {
	now  func() time.Time
	last atomic.Int64
}

func (a *activity) touch() { a.last.Store(a.now().UnixNano()) }

func (a *activity) since() time.Duration { return a.now().Sub(time.Unix(0, a.last.Load())) }

// manual is a clock whose one timer fires only when the test says so.
type manual struct {
	at       time.Time
	armed    time.Duration // the timer's delay when last armed; 0 once stopped
	deadline time.Time
	f        func()
}

func (m *manual) clock() clock {
	return clock{
		now:       func() time.Time { return m.at },
		afterFunc: func(d time.Duration, f func()) timer { m.f = f; m.Reset(d); return m },
	}
}

func (m *manual) Reset(d time.Duration) bool { m.armed, m.deadline = d, m.at.Add(d); return true }
func (m *manual) Stop() bool                 { m.armed = 0; return true }

// fire advances the clock to the timer's deadline and runs it.
func (m *manual) fire() {
	m.armed, m.at = 0, m.deadline
	m.f()
}

// Bytes moving either way keep a connection open: a timer that fires
// after activity re-arms for the rest of the window. Only a full window
// with nothing moving expires it, exactly once.
func TestIdleWatchCountsFromTheLastByte(t *testing.T) {
	m := &manual{at: time.Unix(1000, 0)}
	act := &activity{now: m.clock().now}
	act.touch()
	const idle = 10 * time.Second
	expired := 0
	w := watchIdle(m.clock(), act, idle, func() { expired++ })
	if m.armed != idle {
		t.Fatalf("timer armed for %s, want %s", m.armed, idle)
	}
	m.at = m.at.Add(4 * time.Second)
	act.touch()
	m.fire()
	if expired != 0 {
		t.Fatal("expired 6s after the last byte, with a 10s idle timeout")
	}
	if m.armed != 4*time.Second {
		t.Fatalf("re-armed for %s, want the 4s left of the window since the last byte", m.armed)
	}
	m.fire()
	if expired != 1 {
		t.Fatalf("expired %d times after a full idle window, want 1", expired)
	}
	w.stop()
	if m.armed != 0 {
		t.Errorf("timer still armed for %s after stop", m.armed)
	}
}
