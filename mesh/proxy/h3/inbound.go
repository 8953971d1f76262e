// Package h3 is the QUIC half of the mesh's east-west path: the per-pod
// inbound HTTP/3 server on UDP 18008, beside the mTLS HTTP/2 inbound on
// TCP 18008 (ARCHITECTURE.md, "East-west QUIC"). It runs quic-go's http3
// server on a socket the proxy made in the pod's netns.
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

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
)

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
	// Observer, when set, is told every handshake refused (by reason),
	// every peer accepted and every datagram dropped before a connection
	// took it (observe.go).
	Observer Observer
	// Trusted says whether a trust domain has a bundle: a refused peer
	// from a domain without one is counted as foreign.
	Trusted func(spiffeid.TrustDomain) bool
}

// Inbound is one pod's HTTP/3 inbound.
type Inbound struct {
	opts InboundOptions
	srv  *http3.Server
	tr   *quic.Transport
	ln   *quic.EarlyListener
	done chan error
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
	in := &Inbound{opts: o, done: make(chan error, 1)}
	if _, err := rand.Read(in.ticketKey[:]); err != nil {
		return nil, fmt.Errorf("h3 inbound: session ticket key: %w", err)
	}
	in.srv = &http3.Server{Handler: o.Handler, ConnContext: o.ConnContext}
	// The server runs on a transport of its own, rather than
	// http3.Server.Serve's, so that what quic-go drops before any
	// connection takes it can be counted (observe.go).
	in.tr = &quic.Transport{Conn: conn}
	if o.Observer != nil {
		in.tr.Tracer = dropRecorder{o.Observer}
		in.tr.ConnContext = func(ctx context.Context, _ *quic.ClientInfo) (context.Context, error) {
			o.Observer.Started()
			return ctx, nil
		}
	}
	tc := http3.ConfigureTLSConfig(&tls.Config{
		MinVersion:             tls.VersionTLS13,
		SessionTicketsDisabled: !o.EnableResumption,
		GetConfigForClient:     in.configFor,
	})
	ln, err := in.tr.ListenEarly(tc, &quic.Config{Allow0RTT: o.EnableEarlyData})
	if err != nil {
		return nil, fmt.Errorf("h3 inbound: listen: %w", err)
	}
	in.ln = ln
	if o.Observer != nil {
		go in.countNonQUIC()
	}
	go func() { in.done <- in.srv.ServeListener(ln) }()
	return in, nil
}

// configFor is the handshake's configuration with the R4 fields applied
// and the observer's hooks; the chain's own configuration is never
// modified.
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
	err := in.srv.Close()
	err = errors.Join(err, in.ln.Close())
	if serr := <-in.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && !errors.Is(serr, quic.ErrServerClosed) {
		err = errors.Join(err, fmt.Errorf("h3 inbound: %w", serr))
	}
	// The transport did not create conn, so closing it leaves conn open.
	return errors.Join(err, in.tr.Close())
}
