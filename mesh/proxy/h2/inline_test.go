package h2

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

// writeCounter counts the writes that reach it: what the socket under an
// HTTP/1.1 transport's connection would see. It is a plain io.Writer, as a
// socket is, so net/http buffers in front of it as the transport does.
type writeCounter struct {
	buf    bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}

func (w *writeCounter) String() string { return w.buf.String() }

// upstream is a request as the handler hands it to the pool: a body
// streamed from the downstream, of known length.
func upstream(t *testing.T, body string, length int64) *http.Request {
	t.Helper()
	r, err := http.NewRequest("POST", "http://app/", io.NopCloser(struct{ io.Reader }{strings.NewReader(body)}))
	if err != nil {
		t.Fatal(err)
	}
	r.ContentLength = length
	return r
}

// A small body of known length leaves with its headers: net/http writes
// the request in one write, where the streamed body cost two (headers
// flushed first). Red without inlineBody: 2 writes.
func TestSmallBodyLeavesWithItsHeaders(t *testing.T) {
	body := strings.Repeat("b", 1024)
	for _, inline := range []bool{false, true} {
		r := upstream(t, body, int64(len(body)))
		if inline {
			if err := inlineBody(r); err != nil {
				t.Fatal(err)
			}
		}
		var w writeCounter
		if err := r.Write(&w); err != nil {
			t.Fatal(err)
		}
		want := 2
		if inline {
			want = 1
		}
		if w.writes != want || !strings.HasSuffix(w.String(), "\r\n\r\n"+body) {
			t.Errorf("inline=%v: %d writes, request %q...; want %d writes ending in the body", inline, w.writes, w.String()[:40], want)
		}
	}
}

// A body in memory can be sent again: GetBody gives the same bytes.
func TestInlineBodyCanBeSentAgain(t *testing.T) {
	r := upstream(t, "hello", 5)
	if err := inlineBody(r); err != nil {
		t.Fatal(err)
	}
	first, _ := io.ReadAll(r.Body)
	again, err := r.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	second, _ := io.ReadAll(again)
	if string(first) != "hello" || string(second) != "hello" {
		t.Errorf("body %q, then GetBody %q; want hello twice", first, second)
	}
}

// A body shorter than its declared length is a downstream that ended
// mid-request: an error, and nothing is forwarded. A body over the bound,
// or of unknown length, streams as before.
func TestInlineBodyBounds(t *testing.T) {
	short := upstream(t, "abc", 10)
	if err := inlineBody(short); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("3 bytes of a declared 10: %v; want io.ErrUnexpectedEOF", err)
	}
	for _, c := range []struct {
		name   string
		length int64
	}{{"over the bound", inlineBodyMax + 1}, {"unknown length", -1}} {
		r := upstream(t, strings.Repeat("x", inlineBodyMax+1), c.length)
		before := r.Body
		if err := inlineBody(r); err != nil || r.Body != before || r.GetBody != nil {
			t.Errorf("%s: err %v, body replaced %v; want the body left streaming", c.name, err, r.Body != before)
		}
	}
}
