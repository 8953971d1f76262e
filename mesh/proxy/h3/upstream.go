package h3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// UpstreamOptions are what a twin's QuicUpstreamTransport configures.
type UpstreamOptions struct {
	// Transport is the QUIC transport upstream connections leave from:
	// one UDP socket in the node netns, shared by every twin (quic-go
	// tells connections apart by their IDs).
	Transport *quic.Transport
	// Certificate is the twin's SVID, its source account's, read per
	// handshake so a rotation reaches the next connection. A twin
	// presents one identity: QUIC has no per-connection certificate
	// selector (Q2a), which is why there is one twin per account.
	Certificate func() (*tls.Certificate, error)
	// Bundles is the trust bundle source the server is verified against.
	Bundles x509bundle.Source
	// SNI is <port>.<svc>.<ns>.<mesh-domain>.
	SNI string
}

// Upstream is a twin's HTTP/3 client: one QUIC connection per endpoint,
// carrying every request to it. Connections are pooled per twin, never
// per downstream connection (#1021): a connection per request is where
// HTTP/3's per-request cost misses its budget.
type Upstream struct {
	rt *http3.Transport
}

// NewUpstream returns the client of one twin.
func NewUpstream(o UpstreamOptions) (*Upstream, error) {
	if o.Transport == nil || o.Certificate == nil || o.Bundles == nil || o.SNI == "" {
		return nil, errors.New("h3 upstream: Transport, Certificate, Bundles and SNI are required")
	}
	tc := &tls.Config{
		MinVersion: tls.VersionTLS13,
		ServerName: o.SNI,
		// The chain is verified against the SPIFFE bundle, then the
		// name, in VerifyConnection; the default verifier knows neither.
		InsecureSkipVerify:   true,
		VerifyConnection:     VerifyServer(o.Bundles, o.SNI),
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return o.Certificate() },
	}
	return NewUpstreamTLS(o.Transport, tc), nil
}

// NewUpstreamTLS is a twin's client with a ready client configuration:
// the data plane's, which verifies the server as its TLS context says
// (WithNameCheck adds the QUIC client's name check).
func NewUpstreamTLS(tr *quic.Transport, tc *tls.Config) *Upstream {
	return &Upstream{rt: &http3.Transport{
		TLSClientConfig: tc,
		// A proxy forwards Accept-Encoding as its client sent it; the
		// transport would otherwise ask for gzip and inflate the answer.
		DisableCompression: true,
		Dial: func(ctx context.Context, addr string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, fmt.Errorf("h3 upstream: endpoint %q: %w", addr, err)
			}
			return tr.DialEarly(ctx, net.UDPAddrFromAddrPort(ap), tc, qc)
		},
	}}
}

// WithNameCheck returns tc verifying, after its own check of the server's
// identity, the leaf's DNS SANs against the SNI, as Envoy's QUIC client
// does on top of its certificate validator (Q5).
func WithNameCheck(tc *tls.Config) *tls.Config {
	tc = tc.Clone()
	verify := tc.VerifyConnection
	sni := tc.ServerName
	tc.VerifyConnection = func(cs tls.ConnectionState) error {
		if verify != nil {
			if err := verify(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return errors.New("h3 upstream: server presented no certificate")
		}
		if err := cs.PeerCertificates[0].VerifyHostname(sni); err != nil {
			return fmt.Errorf("h3 upstream: server DNS SANs %v do not match SNI %q: %w", cs.PeerCertificates[0].DNSNames, sni, err)
		}
		return nil
	}
	return tc
}

// RoundTrip sends req to endpoint ep over the twin's connection to it.
// Only the URL is req's to change, so the request is copied shallowly:
// a Clone would copy every header once more per request, and the
// proxy's handler has already made req its own.
func (u *Upstream) RoundTrip(req *http.Request, ep netip.AddrPort) (*http.Response, error) {
	out, url := *req, *req.URL
	url.Scheme, url.Host = "https", ep.String()
	out.URL = &url
	return u.rt.RoundTrip(&out)
}

// Close closes every connection of the twin.
func (u *Upstream) Close() error { return u.rt.Close() }

// VerifyServer checks a server as Envoy's QUIC client does (Q5): first
// its SPIFFE identity (the chain up to the trust bundle of the leaf's
// trust domain), then the leaf's DNS SANs against the SNI. An SVID
// without DNS SANs fails the second step.
func VerifyServer(bundles x509bundle.Source, sni string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("h3 upstream: server presented no certificate")
		}
		id, _, err := x509svid.Verify(cs.PeerCertificates, bundles)
		if err != nil {
			return fmt.Errorf("h3 upstream: server SPIFFE identity: %w", err)
		}
		if err := cs.PeerCertificates[0].VerifyHostname(sni); err != nil {
			return fmt.Errorf("h3 upstream: server %s: DNS SANs %v do not match SNI %q: %w", id, cs.PeerCertificates[0].DNSNames, sni, err)
		}
		return nil
	}
}
