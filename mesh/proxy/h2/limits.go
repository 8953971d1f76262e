package h2

import (
	"log"
	"log/slog"
	"strings"

	"github.com/aether-mesh/aether/mesh/proxy/metrics"
)

// The limits a hostile downstream meets on the HTTP listeners.

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
