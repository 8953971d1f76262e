package h2

import (
	"bytes"
	"errors"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/aether-mesh/aether/mesh/proxy/metrics"
)

// The limits a hostile downstream meets on the HTTP listeners. A slow
// request body meets its connection manager's stream_idle_timeout
// (streamidle.go); the QUIC inbound's own are in mesh/proxy/h3.

// MaxHeaderBytes bounds a downstream request's header list, HTTP/1.1 and
// HTTP/2 alike: Envoy's default max_request_headers_kb, 60 KiB, where
// net/http's own default is 1 MiB. HTTP/1.1 answers 431 past it; HTTP/2
// answers 431 and, once a header block runs past twice what is left
// (a CONTINUATION flood), closes the connection with PROTOCOL_ERROR.
const MaxHeaderBytes = 60 << 10

// MaxConcurrentStreams is the stream limit each downstream HTTP/2
// connection advertises, stated rather than left to x/net's default (the
// same 250). Envoy advertises 2147483647 and relies on its premature
// reset check; x/net instead runs at most this many handlers per
// connection and queues the rest, and a connection whose queue passes four
// times the limit (a rapid reset) is closed with ENHANCE_YOUR_CALM,
// counted as too_many_early_resets.
const MaxConcurrentStreams = 250

// connErrorLog is the HTTP/2 server's ErrorLog. x/net's CountError does
// not see a connection error the framer raises while it reads (a header
// block run past MaxHeaderBytes by CONTINUATION frames is one): the
// server only logs it, as "http2: server connection error from <addr>:
// connection error: <CODE>". Those lines are counted as
// conn_<CODE>_read; every line goes on to the proxy's log.
func connErrorLog(stats *metrics.HTTPListener, lg *slog.Logger, listener string) *log.Logger {
	return log.New(logWriter(func(line string) {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "http2: server connection error from ") {
			if _, code, ok := strings.Cut(line, ": connection error: "); ok && !strings.ContainsAny(code, " :") {
				stats.ProtocolError(metrics.ProtocolReadPrefix + code + metrics.ProtocolReadSuffix)
			}
		}
		lg.Info("http2 server", "listener", listener, "msg", line)
	}), "", 0)
}

type logWriter func(string)

func (w logWriter) Write(b []byte) (int, error) { w(string(b)); return len(b), nil }

// RequestHeadersTimeout bounds how long an HTTP/1.1 downstream takes to
// send a request's headers (net/http's ReadHeaderTimeout): a slowloris
// client, dribbling its headers or sending none, holds a connection and
// its goroutine no longer. Envoy leaves request_headers_timeout unset
// (off) by default; the proxy does not follow it there, since nothing
// else would bound such a client but the fd limit. It matches the TLS
// handshake's bound.
const RequestHeadersTimeout = handshakeTimeout

// h1Watch sees what net/http does to an HTTP/1.1 connection before a
// request reaches the handler, which net/http neither logs nor reports:
// a read deadline passed (the headers timeout) or its own 431 written.
// Its flags are reset as each request starts.
type h1Watch struct {
	net.Conn
	timedOut, tooLarge, handled atomic.Bool
	// prev is the connection's last net/http state.
	prev atomic.Int32
}

func (w *h1Watch) Read(b []byte) (int, error) {
	n, err := w.Conn.Read(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) && !w.handled.Load() {
		w.timedOut.Store(true)
	}
	return n, err
}

func (w *h1Watch) Write(b []byte) (int, error) {
	// Only net/http writes before a handler runs: its error answers.
	if !w.handled.Load() && bytes.HasPrefix(b, []byte("HTTP/1.1 431 ")) {
		w.tooLarge.Store(true)
	}
	return w.Conn.Write(b)
}

// CloseWrite half-closes, as net/http does before it closes a connection
// whose request it did not read.
func (w *h1Watch) CloseWrite() error {
	if cw, ok := w.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// state follows net/http's ConnState and counts a connection that closes
// with a request begun (New or Active) that no handler took.
func (w *h1Watch) state(s http.ConnState, stats *metrics.HTTPListener) {
	prev := http.ConnState(w.prev.Swap(int32(s)))
	switch s {
	case http.StateNew, http.StateIdle:
		w.handled.Store(false)
		w.timedOut.Store(false)
		w.tooLarge.Store(false)
	case http.StateClosed:
		if w.handled.Load() || (prev != http.StateNew && prev != http.StateActive) {
			return
		}
		switch {
		case w.tooLarge.Load():
			stats.ProtocolError(metrics.ProtocolHeadersTooLarge)
		case w.timedOut.Load():
			stats.ProtocolError(metrics.ProtocolHeadersTimeout)
		}
	}
}
