package federation

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptrace"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/federation"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/identity"
)

// The refresh schedule. A peer's refresh hint is followed within
// [MinRefresh, MaxRefresh]: the floor keeps a peer that advertises a hint
// of zero or a second from having every fetcher poll it without pause; the
// ceiling bounds how long a root the peer added (a rotation) or removed (a
// revocation) takes to arrive, whatever the peer advertises. A bundle
// without a hint is refreshed every DefaultRefresh.
const (
	DefaultMinRefresh = 5 * time.Second
	DefaultMaxRefresh = time.Hour
	DefaultRefresh    = 5 * time.Minute
	// DefaultFetchTimeout bounds one fetch, connection to body.
	DefaultFetchTimeout = 10 * time.Second
)

// The reasons a fetch failed, the fetch_failures counter's reason label.
const (
	// ReasonConnect: the endpoint could not be reached (refused, no
	// route, DNS).
	ReasonConnect = "connect"
	// ReasonTimeout: the fetch did not finish within the timeout.
	ReasonTimeout = "timeout"
	// ReasonTLS: the TLS handshake failed, the endpoint's SVID among
	// others: not verified by the trust domain's bundle, or not
	// EndpointID.
	ReasonTLS = "tls"
	// ReasonHTTP: the request failed after the handshake.
	ReasonHTTP = "http"
	// ReasonBundle: the answer was not a SPIFFE bundle (an error page, a
	// malformed document). go-spiffe reads the body whatever the status.
	ReasonBundle = "bundle"
	// ReasonNoX509: a bundle with no X.509 authority, which would verify
	// no peer; it is not taken.
	ReasonNoX509 = "no_x509_authorities"
)

var failureReasons = []string{ReasonConnect, ReasonTimeout, ReasonTLS, ReasonHTTP, ReasonBundle, ReasonNoX509}

// Peer is a trust domain to federate with.
type Peer struct {
	TrustDomain spiffeid.TrustDomain
	// URL is the peer's bundle endpoint, https.
	URL string
	// Bootstrap authenticates the endpoint until the first fetch
	// succeeds; from then on the last bundle fetched does, so a peer that
	// rotates its root is followed. It is never served as the peer's
	// bundle: only what the endpoint answered is trusted for workloads.
	Bootstrap *x509bundle.Bundle
}

// FetcherConfig configures a Fetcher.
type FetcherConfig struct {
	// Local is this cluster's trust domain; no peer may claim it.
	Local spiffeid.TrustDomain
	Peers []Peer
	// MinRefresh, MaxRefresh, Refresh and Timeout default to the
	// Default* constants when zero.
	MinRefresh, MaxRefresh, Refresh, Timeout time.Duration
	// Registerer takes the fetcher's series; nil registers none.
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Fetcher fetches every peer's bundle from its endpoint and keeps the
// last good one of each. It is an x509bundle.Source of the peers' bundles
// (the local one is not among them).
type Fetcher struct {
	cfg      FetcherConfig
	failures *prometheus.CounterVec
	updates  *prometheus.CounterVec

	mu      sync.RWMutex
	bundles map[spiffeid.TrustDomain]*x509bundle.Bundle
	subs    map[chan struct{}]struct{}
}

var _ x509bundle.Source = (*Fetcher)(nil)

// NewFetcher checks cfg: every peer a trust domain of its own other than
// the local one, an https URL and a bootstrap bundle of that trust domain
// with an X.509 authority.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	if cfg.Local.IsZero() {
		return nil, errors.New("federation: no local trust domain")
	}
	seen := map[spiffeid.TrustDomain]bool{}
	for _, p := range cfg.Peers {
		switch {
		case p.TrustDomain.IsZero():
			return nil, fmt.Errorf("federation peer %q: no trust domain", p.URL)
		case p.TrustDomain == cfg.Local:
			return nil, fmt.Errorf("federation peer %q: it is the local trust domain, whose bundle is the local CA's", p.TrustDomain)
		case seen[p.TrustDomain]:
			return nil, fmt.Errorf("federation peer %q: listed twice", p.TrustDomain)
		case p.Bootstrap == nil || len(p.Bootstrap.X509Authorities()) == 0:
			return nil, fmt.Errorf("federation peer %q: no bootstrap bundle with an X.509 authority to authenticate its endpoint", p.TrustDomain)
		case p.Bootstrap.TrustDomain() != p.TrustDomain:
			return nil, fmt.Errorf("federation peer %q: bootstrap bundle is of trust domain %q", p.TrustDomain, p.Bootstrap.TrustDomain())
		}
		if _, err := ParseEndpointURL(p.URL); err != nil {
			return nil, fmt.Errorf("federation peer %q: %w", p.TrustDomain, err)
		}
		seen[p.TrustDomain] = true
	}
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&cfg.MinRefresh, DefaultMinRefresh}, {&cfg.MaxRefresh, DefaultMaxRefresh}, {&cfg.Refresh, DefaultRefresh}, {&cfg.Timeout, DefaultFetchTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return nil, fmt.Errorf("federation: negative duration %s", *d.v)
		}
	}
	if cfg.MinRefresh > cfg.MaxRefresh {
		return nil, fmt.Errorf("federation: refresh floor %s is above its ceiling %s", cfg.MinRefresh, cfg.MaxRefresh)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	f := &Fetcher{
		cfg: cfg,
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aether_agent_federation_fetch_failures_total",
			Help: "Failed fetches of a federated trust domain's bundle, by trust domain and reason; the last good bundle stays trusted."}, []string{"trust_domain", "reason"}),
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aether_agent_federation_bundle_updates_total",
			Help: "Fetched bundles of a federated trust domain whose X.509 authorities differed from the last good ones (the first included)."}, []string{"trust_domain"}),
		bundles: map[spiffeid.TrustDomain]*x509bundle.Bundle{},
		subs:    map[chan struct{}]struct{}{},
	}
	for _, p := range cfg.Peers {
		for _, r := range failureReasons {
			f.failures.WithLabelValues(p.TrustDomain.Name(), r)
		}
		f.updates.WithLabelValues(p.TrustDomain.Name())
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{f.failures, f.updates} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("failed to register federation metric: %w", err)
			}
		}
	}
	return f, nil
}

// Run fetches every peer's bundle at once and then on its schedule, until
// ctx ends; it returns nil then.
func (f *Fetcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range f.cfg.Peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.watch(ctx, p)
		}()
	}
	wg.Wait()
	return nil
}

// watch is one peer's loop. After a success the next fetch is the
// bundle's hint away (NextRefresh); after a failure it is the floor away,
// doubling with each failure in a row up to the refresh interval, so a
// peer that is down is retried soon but not hammered.
func (f *Fetcher) watch(ctx context.Context, p Peer) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	interval := f.cfg.Refresh
	backoff := time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		hint, err := f.fetch(ctx, p)
		if ctx.Err() != nil {
			return
		}
		var next time.Duration
		if err != nil {
			reason := Reason(err)
			f.failures.WithLabelValues(p.TrustDomain.Name(), reason).Inc()
			if backoff == 0 {
				backoff = f.cfg.MinRefresh
			} else {
				backoff = min(2*backoff, interval)
			}
			next = backoff
			f.cfg.Logger.Warn("federated bundle fetch failed; keeping the last good bundle", "trust_domain", p.TrustDomain.Name(),
				"url", p.URL, "reason", reason, "retry_in", next, "err", err)
		} else {
			backoff = 0
			interval = f.NextRefresh(hint)
			next = interval
		}
		timer.Reset(next)
	}
}

// NextRefresh is the wait after a fetch whose bundle carried hint (zero:
// none): the hint within [MinRefresh, MaxRefresh], or Refresh without one.
func (f *Fetcher) NextRefresh(hint time.Duration) time.Duration {
	if hint <= 0 {
		return f.cfg.Refresh
	}
	return min(max(hint, f.cfg.MinRefresh), f.cfg.MaxRefresh)
}

// fetch fetches p's bundle once, authenticating the endpoint with p's
// last good bundle or its bootstrap, and takes it when it holds an X.509
// authority. It returns the bundle's refresh hint. A failure is a
// *FetchError naming its stage.
func (f *Fetcher) fetch(ctx context.Context, p Peer) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	var st stages
	ctx = httptrace.WithClientTrace(ctx, st.trace())
	sb, err := federation.FetchBundle(ctx, p.TrustDomain, p.URL, federation.WithSPIFFEAuth(endpointAuth{f, p}, EndpointID(p.TrustDomain)))
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", err, ctx.Err())
		}
		return 0, &FetchError{TrustDomain: p.TrustDomain, URL: p.URL, Reason: st.reason(ctx), Err: err}
	}
	authorities := sb.X509Authorities()
	if len(authorities) == 0 {
		return 0, &FetchError{TrustDomain: p.TrustDomain, URL: p.URL, Reason: ReasonNoX509, Err: errNoX509}
	}
	hint, _ := sb.RefreshHint()
	f.put(x509bundle.FromX509Authorities(p.TrustDomain, authorities))
	return hint, nil
}

// FetchError is a failed fetch of a peer's bundle, with the reason it is
// counted under.
type FetchError struct {
	TrustDomain spiffeid.TrustDomain
	URL         string
	Reason      string
	Err         error
}

func (e *FetchError) Error() string {
	return fmt.Sprintf("bundle of %q from %s (%s): %v", e.TrustDomain, e.URL, e.Reason, e.Err)
}

func (e *FetchError) Unwrap() error { return e.Err }

// Reason is the reason err was counted under, or "" when it is no
// *FetchError.
func Reason(err error) string {
	var fe *FetchError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return ""
}

// stages records how far a fetch got, from go's HTTP client trace:
// go-spiffe's FetchBundle returns the client's errors as they are, and
// neither the TLS verifier's errors nor the client's ("server gave HTTP
// response to HTTPS client") carry a type that says which stage failed.
type stages struct {
	mu                          sync.Mutex
	connectErr, tlsErr          error
	connected, handshook, wrote bool
	answered                    bool
}

func (s *stages) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		ConnectDone: func(_, _ string, err error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				s.connectErr = err
			} else {
				s.connected = true
			}
		},
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil {
				s.tlsErr = err
			} else {
				s.handshook = true
			}
		},
		WroteRequest: func(httptrace.WroteRequestInfo) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.wrote = true
		},
		GotFirstResponseByte: func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.answered = true
		},
	}
}

// reason is the failed stage: a fetch that ran out of time is a timeout
// until it had an answer, after which only the body was being read.
func (s *stages) reason(ctx context.Context) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ctx.Err() != nil && !s.answered:
		return ReasonTimeout
	case s.connectErr != nil && !s.connected:
		return ReasonConnect
	case s.tlsErr != nil && !s.handshook:
		return ReasonTLS
	case s.answered:
		return ReasonBundle
	case !s.connected:
		// No dial was traced: the name did not resolve.
		return ReasonConnect
	default:
		return ReasonHTTP
	}
}

var errNoX509 = errors.New("no X.509 authority")

// endpointAuth is the bundle a peer's endpoint SVID is verified with:
// the peer's last good bundle, else its bootstrap. An SVID of any other
// trust domain is refused, whatever else the agent trusts.
type endpointAuth struct {
	f *Fetcher
	p Peer
}

func (a endpointAuth) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	if td != a.p.TrustDomain {
		return nil, fmt.Errorf("bundle endpoint of %q presented an SVID of trust domain %q: %w", a.p.TrustDomain, td, identity.ErrNoBundle)
	}
	if b, err := a.f.GetX509BundleForTrustDomain(td); err == nil {
		return b, nil
	}
	return a.p.Bootstrap, nil
}

// put makes b the last good bundle of its trust domain, notifying when its
// authorities changed.
func (f *Fetcher) put(b *x509bundle.Bundle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.bundles[b.TrustDomain()]; ok && old.Equal(b) {
		return
	}
	f.bundles[b.TrustDomain()] = b
	f.updates.WithLabelValues(b.TrustDomain().Name()).Inc()
	f.cfg.Logger.Info("federated bundle updated", "trust_domain", b.TrustDomain().Name(), "x509_authorities", len(b.X509Authorities()))
	for ch := range f.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// GetX509BundleForTrustDomain implements x509bundle.Source: td's last good
// bundle, or an error wrapping identity.ErrNoBundle before its first.
func (f *Fetcher) GetX509BundleForTrustDomain(td spiffeid.TrustDomain) (*x509bundle.Bundle, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, ok := f.bundles[td]
	if !ok {
		return nil, fmt.Errorf("federation: %w for trust domain %q (none fetched yet, or not federated)", identity.ErrNoBundle, td)
	}
	return b, nil
}

// Bundles are the last good bundle of each peer that has one, sorted by
// trust domain. Each is the Fetcher's own and never changed: a newer one
// replaces it.
func (f *Fetcher) Bundles() []*x509bundle.Bundle {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]*x509bundle.Bundle, 0, len(f.bundles))
	for _, b := range f.bundles {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *x509bundle.Bundle) int {
		return strings.Compare(a.TrustDomain().Name(), b.TrustDomain().Name())
	})
	return out
}

// Subscribe returns a channel that receives a value after any peer's
// bundle changed: coalescing (capacity one, never blocks the fetcher), as
// identity.Source's. cancel stops delivery.
func (f *Fetcher) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	f.mu.Lock()
	f.subs[ch] = struct{}{}
	f.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			f.mu.Lock()
			delete(f.subs, ch)
			f.mu.Unlock()
		})
	}
}
