package h2

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// deadlineWriter is a response writer whose read deadline, set in the
// past, fails the pipe's reader as a server's connection would.
type deadlineWriter struct {
	http.ResponseWriter
	pw   *io.PipeWriter
	sets atomic.Int32
}

func (w *deadlineWriter) SetReadDeadline(t time.Time) error {
	w.sets.Add(1)
	if !t.After(time.Now()) {
		w.pw.CloseWithError(os.ErrDeadlineExceeded)
	}
	return nil
}

// The stream idle timeout counts only time the proxy waits on the
// client: a body not read for several timeouts (the upstream holding it
// back) whose bytes are there when it is read is not cut; one the proxy
// waits on with nothing coming is, once, through the read deadline.
func TestStreamIdleCountsOnlyWaiting(t *testing.T) {
	const timeout = 50 * time.Millisecond
	pr, pw := io.Pipe()
	w := &deadlineWriter{pw: pw}
	var fired atomic.Int32
	b := watchBody(pr, w, timeout, func() { fired.Add(1) })
	go func() { _, _ = pw.Write([]byte("abc")) }()
	// Not read for four timeouts: the timer fires with no Read waiting.
	time.Sleep(4 * timeout)
	buf := make([]byte, 3)
	if _, err := io.ReadFull(b, buf); err != nil {
		t.Fatalf("a body whose bytes were there when read: %v", err)
	}
	if fired.Load() != 0 || b.timedOut() {
		t.Fatal("cut while the proxy was not waiting on the client")
	}
	// Now a Read waits, and nothing comes.
	_, err := b.Read(buf)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a Read with nothing coming: %v, want the deadline's error", err)
	}
	if !b.finish() || fired.Load() != 1 {
		t.Errorf("after the cut: finish %v, counted %d, want true and 1", b.timedOut(), fired.Load())
	}
	if n := w.sets.Load(); n != 1 {
		t.Errorf("read deadline set %d times, want once (the cut; a cut body gets no deadline after)", n)
	}
}
