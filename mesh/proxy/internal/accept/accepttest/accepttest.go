// Package accepttest scripts a listening socket's accepts and records a
// listener's log lines, for tests of the accept loop and of the listeners
// built on it. Run under testing/synctest, the times it records are the
// bubble's fake time, so a test reads the loop's waits without waiting.
package accepttest

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"
)

// Step is one scripted accept.
type Step[C net.Conn] func() (C, error)

// Fail is an accept that fails with errno, as accept4(2) would.
func Fail[C net.Conn](errno syscall.Errno) Step[C] {
	return func() (C, error) {
		var zero C
		return zero, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}
	}
}

// Listener answers each Accept with the next step of its script, then
// blocks until Close, as an idle socket would.
type Listener[C net.Conn] struct {
	steps  []Step[C]
	spent  chan struct{}
	closed chan struct{}
	once   sync.Once

	mu    sync.Mutex
	calls []time.Time
}

// New scripts a listener with steps.
func New[C net.Conn](steps ...Step[C]) *Listener[C] {
	return &Listener[C]{steps: steps, spent: make(chan struct{}), closed: make(chan struct{})}
}

// Accept runs the next step, or blocks once the script is spent.
func (l *Listener[C]) Accept() (C, error) {
	l.mu.Lock()
	i := len(l.calls)
	l.calls = append(l.calls, time.Now())
	l.mu.Unlock()
	if i < len(l.steps) {
		return l.steps[i]()
	}
	if i == len(l.steps) {
		close(l.spent)
	}
	<-l.closed
	var zero C
	return zero, net.ErrClosed
}

// Spent is closed once Accept is called past the script's end.
func (l *Listener[C]) Spent() <-chan struct{} { return l.spent }

// Gaps are the times between consecutive Accept calls: a loop's waits.
func (l *Listener[C]) Gaps() []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(l.calls); i++ {
		gaps = append(gaps, l.calls[i].Sub(l.calls[i-1]))
	}
	return gaps
}

// Close makes a blocked Accept return net.ErrClosed.
func (l *Listener[C]) Close() error { l.once.Do(func() { close(l.closed) }); return nil }

// Addr is a fixed loopback address; nothing listens on it.
func (l *Listener[C]) Addr() net.Addr {
	return net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), 18082))
}

// Log records the lines logged through it. It keeps no attributes added
// by Logger.With: the loggers under test add theirs per line.
type Log struct {
	mu      sync.Mutex
	records []slog.Record
}

// Logger logs into l.
func (l *Log) Logger() *slog.Logger { return slog.New(l) }

// Records are the lines logged so far.
func (l *Log) Records() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// Suppressed is each line's "suppressed" attribute, how many lines the
// accept loop held back before it; -1 for a line without one.
func (l *Log) Suppressed() []int64 {
	var out []int64
	for _, r := range l.Records() {
		n := int64(-1)
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "suppressed" && a.Value.Kind() == slog.KindInt64 {
				n = a.Value.Int64()
			}
			return n == -1
		})
		out = append(out, n)
	}
	return out
}

func (l *Log) Enabled(context.Context, slog.Level) bool { return true }

func (l *Log) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	l.records = append(l.records, r.Clone())
	l.mu.Unlock()
	return nil
}

func (l *Log) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *Log) WithGroup(string) slog.Handler      { return l }
