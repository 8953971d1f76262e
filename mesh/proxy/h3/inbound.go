// Package h3 is the QUIC half of the mesh's east-west path: the per-pod
// inbound HTTP/3 server on UDP 18008, beside the mTLS HTTP/2 inbound on
// TCP 18008 (ARCHITECTURE.md, "On-demand twins", its QUIC inbound). It
// runs quic-go's http3 server on a socket the proxy made in the pod's
// netns.
package h3

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

// MaxIncomingStreams is how many request streams one downstream QUIC
// connection may have open at once: Envoy's QuicProtocolOptions
// max_concurrent_streams default, 100, which is quic-go's default too,
// stated here. quic-go grants streams by credit (MAX_STREAMS), so a
// stream flood over one connection holds at most this many; a client
// that opens past its credit breaks the protocol and quic-go closes the
// connection with STREAM_LIMIT_ERROR.
const MaxIncomingStreams = 100

// MaxHeaderBytes bounds a request's header section: Envoy's default
// max_request_headers_kb, 60 KiB, the TCP listeners' limit too
// (h2.MaxHeaderBytes), where quic-go's default is net/http's 1 MiB.
// quic-go measures the section as RFC 9114 does, each field's name and
// value plus 32 bytes, and advertises the limit as
// SETTINGS_MAX_FIELD_SECTION_SIZE. It answers 431 itself, and stops
// reading the stream (H3_EXCESSIVE_LOAD), when a HEADERS frame is longer
// than the limit, before reading it, or when the fields decoded so far
// pass it: a QPACK bomb, a small block that decodes large, is decoded no
// further than the limit. Its QPACK decoder has no dynamic table
// (capacity 0), so a block can only repeat static table entries, or
// carry Huffman literals; a dynamic reference resets the stream with
// QPACK_DECOMPRESSION_FAILED.
const MaxHeaderBytes = 60 << 10

// InboundOptions are what a QuicDownstreamTransport configures.
type InboundOptions struct {
	// TLS gives each handshake its configuration: the listener's
	// DownstreamTlsContext for the chain the SNI selects. It is called per
	// connection, because http3.Server copies its own tls.Config once: a
	// trust bundle or certificate change must reach the next handshake
	// through here. A nil config refuses the handshake.
	TLS func(*tls.ClientHelloInfo) (*tls.Config, error)
	// EnableResumption and EnableEarlyData are the QuicDownstreamTransport
	// fields of the same names, honoured as configured (R4): resumption
	// off disables session tickets, since Go's TLS server does not call
	// VerifyPeerCertificate on a resumed session; early data off refuses
	// 0-RTT, which http3.Server would otherwise accept.
	EnableResumption, EnableEarlyData bool
	Handler                           http.Handler
	// ConnContext, when set, derives each connection's context, so the
	// handler can read the QUIC connection's state (0-RTT, say).
	ConnContext func(context.Context, *quic.Conn) context.Context
	// ConnectionIDs issues the server's connection IDs; nil is quic-go's
	// default. A hot restart tags them by process (mesh/proxy/hotrestart).
	ConnectionIDs quic.ConnectionIDGenerator
	// Observer, when set, is told every handshake refused (by reason),
	// every peer accepted and every datagram dropped before a connection
	// took it (observe.go).
	Observer Observer
	// Trusted says whether a trust domain has a bundle: a refused peer
	// from a domain without one is counted as foreign.
	Trusted func(spiffeid.TrustDomain) bool
	// HeadersTooLarge, when set, is told of every request quic-go
	// answered 431 for headers past MaxHeaderBytes, which the handler
	// never sees. It must not block.
	HeadersTooLarge func()
}

// Inbound is one pod's HTTP/3 inbound.
type Inbound struct {
	opts InboundOptions
	tr   *quic.Transport

	mu  sync.Mutex
	srv *http3.Server
	// drained are servers Drain replaced; Close closes them too.
	drained  []*http3.Server
	ln       *quic.EarlyListener
	done     chan error
	draining bool
	// lateShut is set once the server that took the drain's late
	// handshakes is drained too: Resume needs a new one.
	lateShut bool
	// ticketKey encrypts session tickets when resumption is on. Every
	// handshake's configuration is a fresh one, and a config without
	// explicit keys seals tickets with keys of its own, which the next
	// connection's config cannot open: resumption would silently never
	// happen.
	ticketKey [32]byte
}

// ServeInbound serves HTTP/3 on conn until Close. conn is the pod's UDP
// 18008 socket, bound to the pod's address (bound to the unspecified
// address, quic-go reads IP_PKTINFO itself and answers from the address
// each packet was sent to).
// quic-go's GSO stays on (it is on by default), which halves the cost of
// large responses.
func ServeInbound(conn net.PacketConn, o InboundOptions) (*Inbound, error) {
	if o.TLS == nil || o.Handler == nil {
		return nil, errors.New("h3 inbound: TLS and Handler are required")
	}
	in := &Inbound{opts: o, tr: &quic.Transport{Conn: conn, ConnectionIDGenerator: o.ConnectionIDs}}
	if _, err := rand.Read(in.ticketKey[:]); err != nil {
		return nil, fmt.Errorf("h3 inbound: session ticket key: %w", err)
	}
	// The server runs on a transport of its own, rather than
	// http3.Server.Serve's, so that a hot restart can tag its connection
	// IDs and what quic-go drops before any connection takes it can be
	// counted (observe.go).
	if o.Observer != nil {
		in.tr.Tracer = dropRecorder{o.Observer}
		in.tr.ConnContext = func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			o.Observer.Started()
			return ctx, nil
		}
	}
	if err := in.serve(); err != nil {
		_ = in.tr.Close()
		return nil, err
	}
	if o.Observer != nil {
		go in.countNonQUIC()
	}
	return in, nil
}

// serve starts a server on the transport's listener, made on first use.
func (in *Inbound) serve() error {
	tc := &tls.Config{
		MinVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: !in.opts.EnableResumption,
		GetConfigForClient:     in.configFor,
	}
	qc := &quic.Config{Allow0RTT: in.opts.EnableEarlyData, MaxIncomingStreams: MaxIncomingStreams}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.ln == nil {
		// http3.Server.Serve sets these on the listener it makes; made
		// here, they are set here.
		ln, err := in.tr.ListenEarly(http3.ConfigureTLSConfig(tc), qc)
		if err != nil {
			return fmt.Errorf("h3 inbound: %w", err)
		}
		in.ln = ln
	}
	srv := &http3.Server{TLSConfig: tc, QUICConfig: qc, Handler: in.opts.Handler, ConnContext: in.opts.ConnContext,
		MaxHeaderBytes: MaxHeaderBytes, RequestHeadersTooLarge: in.opts.HeadersTooLarge}
	done := make(chan error, 1)
	ln := in.ln
	go func() { done <- srv.ServeListener(ln) }()
	if in.srv != nil {
		in.drained = append(in.drained, in.srv)
	}
	in.srv, in.done = srv, done
	in.draining, in.lateShut = false, false
	return nil
}

// Drain shuts the open connections gracefully: each gets GOAWAY, its
// requests in flight finish, and those still open when ctx ends are
// closed. The transport keeps reading the socket for them (through a hot
// restart's gate, which passes the packets of new connections on). A
// handshake already under way when the drain starts completes here, on a
// second server that takes connections for a quarter of the drain and is
// then drained itself.
func (in *Inbound) Drain(ctx context.Context) {
	in.mu.Lock()
	old := in.srv
	in.mu.Unlock()
	if err := in.serve(); err != nil {
		_ = old.Shutdown(ctx)
		return
	}
	in.mu.Lock()
	late := in.srv
	in.draining = true
	in.mu.Unlock()
	go func() { _ = old.Shutdown(ctx) }()
	grace := time.Second
	if dl, ok := ctx.Deadline(); ok {
		grace = time.Until(dl) / 4
	}
	go func() {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		in.mu.Lock()
		still := in.draining && in.srv == late
		in.lateShut = still
		in.mu.Unlock()
		if still {
			_ = late.Shutdown(ctx)
		}
	}()
}

// Resume serves again after Drain.
func (in *Inbound) Resume() error {
	in.mu.Lock()
	shut := in.lateShut
	in.draining = false
	in.mu.Unlock()
	if !shut {
		// The late server serves on.
		return nil
	}
	return in.serve()
}

// configFor is the handshake's configuration with the R4 fields applied;
// the chain's own configuration is never modified.
func (in *Inbound) configFor(chi *tls.ClientHelloInfo) (*tls.Config, error) {
	// QUIC requires ALPN; Go's server would refuse a hello without h3
	// too, but without saying so to anyone who counts.
	if !slices.Contains(chi.SupportedProtos, http3.NextProtoH3) {
		in.refused(RefusedBadALPN)
		return nil, fmt.Errorf("h3 inbound: client offers ALPN %q, not %q", chi.SupportedProtos, http3.NextProtoH3)
	}
	c, err := in.opts.TLS(chi)
	if err != nil {
		return nil, fmt.Errorf("h3 inbound: no TLS context for server name %q: %w", chi.ServerName, err)
	}
	if c == nil {
		return nil, fmt.Errorf("h3 inbound: no TLS context for server name %q", chi.ServerName)
	}
	c = c.Clone()
	c.MinVersion = tls.VersionTLS13
	c.SessionTicketsDisabled = !in.opts.EnableResumption
	if in.opts.EnableResumption {
		c.SetSessionTicketKeys([][32]byte{in.ticketKey})
	}
	if in.opts.Observer != nil {
		in.observeVerification(c)
	}
	return c, nil
}

// Close stops serving and closes every connection; the socket is the
// caller's.
func (in *Inbound) Close() error {
	in.mu.Lock()
	srv, ln, done, drained := in.srv, in.ln, in.done, in.drained
	in.mu.Unlock()
	for _, d := range drained {
		_ = d.Close()
	}
	err := srv.Close()
	_ = ln.Close()
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, quic.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("h3 inbound: %w", serr))
	}
	return errors.Join(err, in.tr.Close())
}
