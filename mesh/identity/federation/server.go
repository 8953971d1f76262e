package federation

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/spiffebundle"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/federation"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// DefaultRefreshHint is the refresh hint a Server advertises when
// ServerConfig.RefreshHint is zero: a peer picks up a new root within five
// minutes, well inside any SVID's half-life the mesh issues by default.
const DefaultRefreshHint = 5 * time.Minute

// ServerConfig configures a bundle endpoint.
type ServerConfig struct {
	// TrustDomain is the local trust domain, whose bundle is served.
	TrustDomain spiffeid.TrustDomain
	// Bundles is read on every request for TrustDomain's bundle.
	Bundles x509bundle.Source
	// SVID is what the endpoint presents: an SVID of TrustDomain whose ID
	// is EndpointID(TrustDomain). It is read on every handshake.
	SVID x509svid.Source
	// RefreshHint is advertised in the bundle (whole seconds, as the
	// bundle format carries); zero means DefaultRefreshHint.
	RefreshHint time.Duration
	Logger      *slog.Logger
}

// Server is a bundle endpoint on the https_spiffe profile.
type Server struct {
	cfg     ServerConfig
	handler http.Handler

	mu       sync.Mutex
	digest   [sha256.Size]byte
	sequence uint64
}

var _ spiffebundle.Source = (*Server)(nil)

// NewServer checks cfg and makes the endpoint's handler. The SVID is read
// once here, so that an endpoint that would present another identity than
// EndpointID, which every peer's fetch refuses, fails at start.
func NewServer(cfg ServerConfig) (*Server, error) {
	if cfg.TrustDomain.IsZero() {
		return nil, errors.New("bundle endpoint: no trust domain")
	}
	if cfg.Bundles == nil || cfg.SVID == nil {
		return nil, fmt.Errorf("bundle endpoint of %q: a bundle source and an SVID source are required", cfg.TrustDomain)
	}
	if cfg.RefreshHint == 0 {
		cfg.RefreshHint = DefaultRefreshHint
	}
	if cfg.RefreshHint < time.Second {
		return nil, fmt.Errorf("bundle endpoint of %q: refresh hint %s is under a second, the bundle format's unit", cfg.TrustDomain, cfg.RefreshHint)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	svid, err := cfg.SVID.GetX509SVID()
	if err != nil {
		return nil, fmt.Errorf("bundle endpoint of %q: SVID: %w", cfg.TrustDomain, err)
	}
	if want := EndpointID(cfg.TrustDomain); svid.ID != want {
		return nil, fmt.Errorf("bundle endpoint of %q: SVID %s, want %s, the ID its peers require", cfg.TrustDomain, svid.ID, want)
	}
	s := &Server{cfg: cfg}
	h, err := federation.NewHandler(cfg.TrustDomain, s)
	if err != nil {
		return nil, fmt.Errorf("bundle endpoint of %q: %w", cfg.TrustDomain, err)
	}
	s.handler = h
	return s, nil
}

// GetBundleForTrustDomain implements spiffebundle.Source for the handler:
// the local bundle's X.509 authorities with the refresh hint and a
// sequence number that moves when the authorities do. The number starts
// at 1 with each Server; a fetcher takes any change, not only a higher
// number, so a restarted endpoint is not ignored.
func (s *Server) GetBundleForTrustDomain(td spiffeid.TrustDomain) (*spiffebundle.Bundle, error) {
	if td != s.cfg.TrustDomain {
		return nil, fmt.Errorf("bundle endpoint of %q: no bundle for trust domain %q", s.cfg.TrustDomain, td)
	}
	xb, err := s.cfg.Bundles.GetX509BundleForTrustDomain(td)
	if err != nil {
		return nil, fmt.Errorf("bundle endpoint of %q: %w", td, err)
	}
	h := sha256.New()
	for _, c := range xb.X509Authorities() {
		h.Write(c.Raw)
	}
	var digest [sha256.Size]byte
	h.Sum(digest[:0])
	s.mu.Lock()
	if s.sequence == 0 || digest != s.digest {
		s.digest = digest
		s.sequence++
	}
	seq := s.sequence
	s.mu.Unlock()
	b := spiffebundle.FromX509Authorities(td, xb.X509Authorities())
	b.SetRefreshHint(s.cfg.RefreshHint)
	b.SetSequenceNumber(seq)
	return b, nil
}

// Serve serves the endpoint over TLS on l until ctx ends, then closes l.
// It returns nil when ctx ended it.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	hs := &http.Server{
		Handler:           s.handler,
		TLSConfig:         tlsconfig.TLSServerConfig(s.cfg.SVID),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	// go-spiffe's FetchBundle makes a new HTTP transport per fetch and
	// never closes it: a kept-alive connection would sit idle on both ends
	// until the transport's idle timeout. Closing after each answer ends
	// it at once.
	hs.SetKeepAlivesEnabled(false)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = hs.Close()
		case <-done:
		}
	}()
	err := hs.ServeTLS(l, "", "")
	close(done)
	if ctx.Err() != nil && errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("bundle endpoint of %q on %s: %w", s.cfg.TrustDomain, l.Addr(), err)
}
