package h3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"

	"github.com/quic-go/quic-go/qlog"
	"github.com/quic-go/quic-go/qlogwriter"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Observer is told what an inbound refuses, accepts and drops, so that the
// proxy can count each: the destination's own view of its peers, beside
// what the app records. Its methods must not block.
type Observer interface {
	// Started is one connection quic-go began for a new client's
	// Initial; it ends accepted, refused, or never handshaken (a forged
	// Initial, a client that went away).
	Started()
	// Refused is one handshake refused, by a Refused* reason.
	Refused(reason string)
	// Accepted is one handshake whose peer passed verification: a full
	// one, or a resumed session (whose certificate is the ticket's).
	Accepted(peer string, resumed bool)
	// Dropped is one datagram dropped before any connection took it, by
	// quic-go's qlog trigger, or DroppedNotQUIC.
	Dropped(reason string)
}

// Reasons a handshake is refused. A peer is classified by the
// certificate it presented once verification refused it; the order of the
// checks is the order of the questions: did it present one, is it current,
// is its trust domain ours.
const (
	RefusedBadALPN            = "bad_alpn"
	RefusedNoClientCert       = "no_client_certificate"
	RefusedExpired            = "expired"
	RefusedForeignTrustDomain = "foreign_trust_domain"
	RefusedPeer               = "peer_rejected"
)

// DroppedNotQUIC is a datagram whose first byte marks it as no QUIC packet
// at all (quic-go hands those to ReadNonQUICPacket, else drops them
// without a trace event).
const DroppedNotQUIC = "not_quic"

func (in *Inbound) refused(reason string) {
	if in.opts.Observer != nil {
		in.opts.Observer.Refused(reason)
	}
}

// observeVerification makes c count its verdicts. A client certificate
// the chain requires is checked here rather than by Go (RequireAnyClientCert
// fails the handshake before any callback, so a missing certificate could
// not be counted); VerifyConnection runs on full and resumed handshakes
// alike.
func (in *Inbound) observeVerification(c *tls.Config) {
	require := c.ClientAuth == tls.RequireAnyClientCert
	if require {
		c.ClientAuth = tls.RequestClientCert
	}
	verify := c.VerifyConnection
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if require && len(cs.PeerCertificates) == 0 {
			in.refused(RefusedNoClientCert)
			return errors.New("h3 inbound: client presented no certificate")
		}
		if verify != nil {
			if err := verify(cs); err != nil {
				in.refused(refusal(cs.PeerCertificates, time.Now(), in.opts.Trusted))
				return err
			}
		}
		peer := ""
		if len(cs.PeerCertificates) > 0 {
			if id, err := x509svid.IDFromCert(cs.PeerCertificates[0]); err == nil {
				peer = id.String()
			}
		}
		in.opts.Observer.Accepted(peer, cs.DidResume)
		return nil
	}
}

// refusal is why a peer that presented certs was refused.
func refusal(certs []*x509.Certificate, now time.Time, trusted func(spiffeid.TrustDomain) bool) string {
	if len(certs) == 0 {
		return RefusedNoClientCert
	}
	for _, c := range certs {
		if now.Before(c.NotBefore) || now.After(c.NotAfter) {
			return RefusedExpired
		}
	}
	if id, err := x509svid.IDFromCert(certs[0]); err == nil && trusted != nil && !trusted(id.TrustDomain()) {
		return RefusedForeignTrustDomain
	}
	return RefusedPeer
}

// countNonQUIC drains the datagrams quic-go sets aside as not QUIC, and
// counts each as dropped, until the transport closes.
func (in *Inbound) countNonQUIC() {
	buf := make([]byte, 1500)
	for {
		if _, _, err := in.tr.ReadNonQUICPacket(context.Background(), buf); err != nil {
			return
		}
		in.opts.Observer.Dropped(DroppedNotQUIC)
	}
}

// dropRecorder is the transport's qlog recorder: it keeps the one event
// that matters here, a datagram dropped before a connection took it.
type dropRecorder struct{ o Observer }

func (r dropRecorder) RecordEvent(ev qlogwriter.Event) {
	if d, ok := ev.(qlog.PacketDropped); ok {
		r.o.Dropped(string(d.Trigger))
	}
}

func (dropRecorder) Close() error { return nil }
