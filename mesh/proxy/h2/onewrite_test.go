package h2_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
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

// A held flush never waits for the peer: a client that grants no stream
// window (SETTINGS_INITIAL_WINDOW_SIZE 0) gets the response's HEADERS
// although its DATA cannot be sent. The patch holds the flush after
// headers whose DATA follows; if it held it until that DATA was written,
// this client would never see a byte of the response. The control is the
// same exchange with a window: HEADERS and then DATA arrive.
func TestHeldFlushDoesNotWaitForFlowControl(t *testing.T) {
	for _, tc := range []struct {
		name     string
		window   uint32
		wantData bool
	}{{"no window", 0, false}, {"control: a window", 65535, true}} {
		t.Run(tc.name, func(t *testing.T) {
			srvSide, cliSide := net.Pipe()
			srv := &http2.Server{}
			done := make(chan struct{})
			go func() {
				defer close(done)
				srv.ServeConn(srvSide, &http2.ServeConnOpts{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Length", "1024")
					w.WriteHeader(http.StatusOK)
					_, _ = io.WriteString(w, strings.Repeat("r", 1024))
				})})
			}()
			t.Cleanup(func() { _ = cliSide.Close(); <-done })
			// A deadline so that a hung server fails the test instead of
			// hanging it; it bounds a wait for bytes, it times nothing.
			_ = cliSide.SetDeadline(time.Now().Add(10 * time.Second))
			// The client's whole side is written at once, beside the reads
			// below: net.Pipe is unbuffered, and the server writes its
			// SETTINGS before it reads the preface. The ACK of the server's
			// SETTINGS may precede them on the wire: the server counts its
			// SETTINGS as sent before it reads a frame, and closes a
			// connection that never acknowledges them.
			bw := bufio.NewWriter(cliSide)
			w := http2.NewFramer(bw, nil)
			var hb bytes.Buffer
			enc := hpack.NewEncoder(&hb)
			for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "inbound"}, {":path", "/"}} {
				_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
			}
			wrote := make(chan error, 1)
			go func() {
				_, err := bw.WriteString(http2.ClientPreface)
				for _, step := range []func() error{
					func() error {
						return w.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: tc.window})
					},
					w.WriteSettingsAck,
					func() error {
						return w.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
					},
					bw.Flush,
				} {
					if err == nil {
						err = step()
					}
				}
				wrote <- err
			}()
			fr := http2.NewFramer(io.Discard, cliSide)
			fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
			var status string
			data := 0
			for status == "" || (tc.wantData && data < 1024) {
				f, err := fr.ReadFrame()
				if err != nil {
					t.Fatalf("reading the response (status %q, %d DATA bytes so far): %v", status, data, err)
				}
				switch f := f.(type) {
				case *http2.MetaHeadersFrame:
					status = f.PseudoValue("status")
				case *http2.DataFrame:
					data += len(f.Data())
				}
			}
			if err := <-wrote; err != nil {
				t.Fatal(err)
			}
			if status != "200" {
				t.Fatalf("status %q; want 200", status)
			}
			if !tc.wantData && data != 0 {
				t.Fatalf("%d DATA bytes with no stream window; the client granted none", data)
			}
		})
	}
}
