package node

import (
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// The HTTP echo is the pod app of the mTLS path. Behind the mesh it serves
// plain HTTP (the inbound proxy forwards to it on the pod's loopback) and
// answers, and records, the XFCC header the proxy set: the destination's
// own view of who called. With a TLS port it also serves mTLS itself, the
// app-to-app baseline the mesh's cost is measured against, and records the
// TLS peer it verified.

// Echo is the HTTP echo's answer.
type Echo struct {
	Pod  string `json:"pod"`
	XFCC string `json:"xfcc,omitempty"`
	// Peer is the SPIFFE ID the app's own TLS handshake verified.
	Peer string `json:"peer,omitempty"`
}

// XFCCHeader is the header the inbound proxy sets.
const XFCCHeader = "X-Forwarded-Client-Cert"

// EchoTLS is the app's own mTLS port: an SVID and the bundle peers are
// verified with (PEM files).
type EchoTLS struct {
	Port                  int
	Cert, Key, BundleFile string
	TrustDomain           string
}

func (c BackendConfig) httpHandler(rec *recorder, port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e := Echo{Pod: c.Name, XFCC: r.Header.Get(XFCCHeader)}
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			if id, err := x509svid.IDFromCert(r.TLS.PeerCertificates[0]); err == nil {
				e.Peer = id.String()
			}
		}
		if err := rec.write(Record{Event: "http", Port: port, Src: r.RemoteAddr, Payload: r.Host + r.URL.Path, XFCC: e.XFCC, Peer: e.Peer}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(e)
	})
}

// serveHTTP binds every HTTP port (and the TLS port) and serves them until
// a server fails.
func (c BackendConfig) serveHTTP(rec *recorder, errc chan<- error) ([]func() error, error) {
	var closers []func() error
	for _, port := range c.HTTP {
		l, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: port})
		if err != nil {
			return closers, fmt.Errorf("backend %s: failed to listen on http port %d: %w", c.Name, port, err)
		}
		srv := &http.Server{Handler: c.httpHandler(rec, port), Protocols: new(http.Protocols)}
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
		closers = append(closers, srv.Close)
		go func() { errc <- serveErr(srv.Serve(l)) }()
	}
	if c.TLS == nil {
		return closers, nil
	}
	cfg, err := c.TLS.config()
	if err != nil {
		return closers, fmt.Errorf("backend %s: %w", c.Name, err)
	}
	l, err := tls.Listen("tcp4", fmt.Sprintf(":%d", c.TLS.Port), cfg)
	if err != nil {
		return closers, fmt.Errorf("backend %s: failed to listen on tls port %d: %w", c.Name, c.TLS.Port, err)
	}
	srv := &http.Server{Handler: c.httpHandler(rec, c.TLS.Port)}
	closers = append(closers, srv.Close)
	go func() { errc <- serveErr(srv.Serve(l)) }()
	return closers, nil
}

func serveErr(err error) error {
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// config is go-spiffe's mTLS server config: any SVID of the trust domain,
// h2, TLS 1.3, no session tickets (as the mesh's inbound).
func (t *EchoTLS) config() (*tls.Config, error) {
	svid, err := x509svid.Load(t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("tls port: %w", err)
	}
	td, err := spiffeid.TrustDomainFromString(t.TrustDomain)
	if err != nil {
		return nil, fmt.Errorf("tls port: %w", err)
	}
	b, err := x509bundle.Load(td, t.BundleFile)
	if err != nil {
		return nil, fmt.Errorf("tls port: %w", err)
	}
	cfg := tlsconfig.MTLSServerConfig(svid, b, tlsconfig.AuthorizeMemberOf(td))
	cfg.MinVersion = tls.VersionTLS13
	cfg.NextProtos = []string{"h2"}
	cfg.SessionTicketsDisabled = true
	return cfg, nil
}

// ParseEchoTLS reads --tls PORT,CERT,KEY,BUNDLE,TRUSTDOMAIN.
func ParseEchoTLS(s string) (*EchoTLS, error) {
	if s == "" {
		return nil, nil
	}
	f := strings.Split(s, ",")
	if len(f) != 5 {
		return nil, fmt.Errorf("want PORT,CERT,KEY,BUNDLE,TRUSTDOMAIN, got %q", s)
	}
	var port int
	if _, err := fmt.Sscanf(f[0], "%d", &port); err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("bad port %q", f[0])
	}
	return &EchoTLS{Port: port, Cert: f[1], Key: f[2], BundleFile: f[3], TrustDomain: f[4]}, nil
}
