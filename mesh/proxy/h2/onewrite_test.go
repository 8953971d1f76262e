package h2_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
)

// countedConn counts the writes the HTTP/2 server makes on its side of
// the connection: each is a TLS record and a TCP segment on a real one.
type countedConn struct {
	net.Conn
	writes atomic.Int64
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// The inbound's HTTP/2 server (x/net, patched in third_party/x-net)
// writes a response's headers and its small body in one write. Unpatched,
// a handler whose response has a header map waits until its HEADERS frame
// is written, and the serve loop flushes that frame before the handler
// queues its DATA: every response cost the inbound two writes (two TLS
// records, two segments) and the outbound two reads. Red without the
// replace of golang.org/x/net: 2 writes a response.
func TestResponseHeadersAndBodyLeaveInOneWrite(t *testing.T) {
	body := strings.Repeat("r", 1024)
	srvSide, cliSide := net.Pipe()
	conn := &countedConn{Conn: srvSide}
	srv := &http2.Server{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.ServeConn(conn, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			// As the proxy's handler answers: the upstream's headers
			// copied (a header map makes x/net's handler wait for its
			// HEADERS frame to be written), the status, the body, return.
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Content-Length", "1024")
			w.WriteHeader(http.StatusOK)
			_, _ = io.WriteString(w, body)
		})})
	}()
	tr := &http2.Transport{AllowHTTP: true, DialTLSContext: func(context.Context, string, string, *tls.Config) (net.Conn, error) {
		return cliSide, nil
	}}
	t.Cleanup(func() { tr.CloseIdleConnections(); _ = cliSide.Close(); <-done })
	get := func() {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://inbound/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(got) != body {
			t.Fatalf("response body %d bytes, %v; want %d", len(got), err, len(body))
		}
	}
	// The first exchange carries the preface and SETTINGS both ways.
	get()
	before := conn.writes.Load()
	const n = 50
	for range n {
		get()
	}
	per := float64(conn.writes.Load()-before) / n
	if per != 1 {
		t.Errorf("the server wrote %.2f times a response of %d bytes; want 1 (headers and body together)", per, len(body))
	}
}
