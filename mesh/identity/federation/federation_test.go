package federation

import (
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/federation"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/identity"
)

var web = identity.Account{Namespace: "demo", ServiceAccount: "web"}

// cluster is one trust domain with its own CA, its store and its bundle
// endpoint on loopback.
type cluster struct {
	td    spiffeid.TrustDomain
	ca    *identity.CA
	store *identity.Store
	url   string
	stop  context.CancelFunc
	done  chan error
}

func newCA(t *testing.T, td string) *identity.CA {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: td, MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// startCluster serves td's bundle on 127.0.0.1 with the refresh hint.
func startCluster(t *testing.T, td string, hint time.Duration) *cluster {
	t.Helper()
	c := &cluster{ca: newCA(t, td), store: identity.NewStore()}
	c.td = c.ca.TrustDomain()
	c.store.PutBundle(c.ca.Bundle())
	svid, err := identity.NewEndpointSVID(c.ca, EndpointID(c.td), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(ServerConfig{TrustDomain: c.td, Bundles: c.store, SVID: svid, RefreshHint: hint})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.url = "https://" + l.Addr().String() + "/"
	ctx, cancel := context.WithCancel(context.Background())
	c.stop, c.done = cancel, make(chan error, 1)
	go func() { c.done <- srv.Serve(ctx, l) }()
	t.Cleanup(c.down)
	return c
}

// down stops the endpoint and waits for it.
func (c *cluster) down() {
	if c.stop == nil {
		return
	}
	c.stop()
	<-c.done
	c.stop = nil
}

func (c *cluster) peer() Peer {
	return Peer{TrustDomain: c.td, URL: c.url, Bootstrap: c.ca.Bundle()}
}

// runFetcher runs a fetcher of peers for local trust domain b.test, with
// a short floor so that a test waits on the peer's hint, not on the floor.
func runFetcher(t *testing.T, reg prometheus.Registerer, peers ...Peer) *Fetcher {
	t.Helper()
	f, err := NewFetcher(FetcherConfig{Local: spiffeid.RequireTrustDomainFromString("b.test"), Peers: peers,
		MinRefresh: 50 * time.Millisecond, Timeout: 2 * time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = f.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// waitBundle waits until f holds a bundle of td for which ok is true.
func waitBundle(t *testing.T, f *Fetcher, td spiffeid.TrustDomain, within time.Duration, ok func(*x509bundle.Bundle) bool) *x509bundle.Bundle {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if b, err := f.GetX509BundleForTrustDomain(td); err == nil && ok(b) {
			return b
		}
		if time.Now().After(deadline) {
			b, err := f.GetX509BundleForTrustDomain(td)
			t.Fatalf("no wanted bundle of %q within %s: have %v (err %v)", td, within, b, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func authorities(n int) func(*x509bundle.Bundle) bool {
	return func(b *x509bundle.Bundle) bool { return len(b.X509Authorities()) == n }
}

func issue(t *testing.T, ca *identity.CA) *x509svid.SVID {
	t.Helper()
	svid, err := ca.Issue(identity.Request{Account: web, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return svid
}

// The endpoint serves the local bundle as the SPIFFE bundle format, with
// the refresh hint and a sequence number that moves with the authorities
// and only with them; it presents EndpointID, which go-spiffe's own
// https_spiffe fetch requires.
func TestServerServesTheBundleWithHintAndSequence(t *testing.T) {
	a := startCluster(t, "a.test", 7*time.Second)
	fetch := func() (uint64, time.Duration, int) {
		t.Helper()
		sb, err := federation.FetchBundle(context.Background(), a.td, a.url, federation.WithSPIFFEAuth(a.ca.Bundle(), EndpointID(a.td)))
		if err != nil {
			t.Fatal(err)
		}
		seq, _ := sb.SequenceNumber()
		hint, _ := sb.RefreshHint()
		return seq, hint, len(sb.X509Authorities())
	}
	seq1, hint, n := fetch()
	if hint != 7*time.Second || n != 1 || seq1 == 0 {
		t.Fatalf("first bundle: sequence %d, hint %s, %d authorities; want a sequence, 7s, 1", seq1, hint, n)
	}
	if seq, _, _ := fetch(); seq != seq1 {
		t.Fatalf("unchanged bundle: sequence %d, then %d", seq1, seq)
	}
	rotated := a.ca.Bundle()
	rotated.AddX509Authority(newCA(t, "a.test").Bundle().X509Authorities()[0])
	a.store.PutBundle(rotated)
	if seq, _, n := fetch(); seq != seq1+1 || n != 2 {
		t.Fatalf("rotated bundle: sequence %d, %d authorities; want %d, 2", seq, n, seq1+1)
	}
	// A fetcher that requires another ID refuses the endpoint.
	_, err := federation.FetchBundle(context.Background(), a.td, a.url, federation.WithSPIFFEAuth(a.ca.Bundle(), spiffeid.RequireFromPath(a.td, "/other")))
	if err == nil || !strings.Contains(err.Error(), `unexpected ID "`+EndpointID(a.td).String()+`"`) {
		t.Fatalf("fetch requiring another endpoint ID: err %v, want the endpoint's ID refused", err)
	}
}

// An endpoint must present EndpointID of its own trust domain: one that
// would present a workload's SVID is refused at start, as every peer
// would refuse it.
func TestServerRefusesAnotherIdentity(t *testing.T) {
	ca := newCA(t, "a.test")
	store := identity.NewStore()
	store.PutBundle(ca.Bundle())
	_, err := NewServer(ServerConfig{TrustDomain: ca.TrustDomain(), Bundles: store, SVID: issue(t, ca)})
	if err == nil || !strings.Contains(err.Error(), "spiffe://a.test/ns/demo/sa/web") || !strings.Contains(err.Error(), EndpointID(ca.TrustDomain()).String()) {
		t.Fatalf("server with a workload SVID: err %v, want one naming it and %s", err, EndpointID(ca.TrustDomain()))
	}
}

// (b) The fetcher follows the peer: a root the peer adds reaches it
// within the peer's refresh hint, with a notification, and an SVID the
// new root signed verifies under the fetcher's bundles, where before it
// did not.
func TestFetcherPicksUpTheRotatedBundle(t *testing.T) {
	a := startCluster(t, "a.test", time.Second)
	reg := prometheus.NewRegistry()
	f := runFetcher(t, reg, a.peer())
	changed, cancel := f.Subscribe()
	defer cancel()
	waitBundle(t, f, a.td, 5*time.Second, authorities(1))
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("no notification for the first bundle")
	}

	next := newCA(t, "a.test")
	fromNext := issue(t, next)
	if _, _, err := x509svid.Verify(fromNext.Certificates, f); err == nil {
		t.Fatal("an SVID of a root the peer has not published verifies")
	}
	rotated := a.ca.Bundle()
	rotated.AddX509Authority(next.Bundle().X509Authorities()[0])
	a.store.PutBundle(rotated)
	start := time.Now()
	waitBundle(t, f, a.td, 5*time.Second, authorities(2))
	t.Logf("rotation picked up after %s (hint 1s)", time.Since(start).Round(time.Millisecond))
	select {
	case <-changed:
	case <-time.After(time.Second):
		t.Fatal("no notification for the rotated bundle")
	}
	if id, _, err := x509svid.Verify(fromNext.Certificates, f); err != nil || id != fromNext.ID {
		t.Fatalf("SVID of the new root after the rotation: %v, %v", id, err)
	}
	if got := testutil.ToFloat64(f.updates.WithLabelValues("a.test")); got != 2 {
		t.Errorf("bundle updates %v, want 2 (the first and the rotation)", got)
	}
}

// (c) An endpoint that goes down leaves its last good bundle trusted;
// each failed fetch is counted with its reason, and a notification would
// only say the bundle changed, so none is sent.
func TestEndpointDownKeepsTheLastGoodBundle(t *testing.T) {
	a := startCluster(t, "a.test", time.Second)
	f := runFetcher(t, prometheus.NewRegistry(), a.peer())
	good := waitBundle(t, f, a.td, 5*time.Second, authorities(1))
	changed, cancel := f.Subscribe()
	defer cancel()
	a.down()

	connect := f.failures.WithLabelValues("a.test", ReasonConnect)
	deadline := time.Now().Add(10 * time.Second)
	for testutil.ToFloat64(connect) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("connect failures %v after the endpoint went down, want 2 or more", testutil.ToFloat64(connect))
		}
		time.Sleep(20 * time.Millisecond)
	}
	b, err := f.GetX509BundleForTrustDomain(a.td)
	if err != nil || !b.Equal(good) {
		t.Fatalf("bundle with the endpoint down: %v (err %v), want the last good one", b, err)
	}
	if bs := f.Bundles(); len(bs) != 1 || !bs[0].Equal(good) {
		t.Fatalf("Bundles() with the endpoint down = %v, want the last good one", bs)
	}
	if id, _, err := x509svid.Verify(issue(t, a.ca).Certificates, f); err != nil {
		t.Fatalf("an SVID of the peer no longer verifies with its endpoint down: %v %v", id, err)
	}
	select {
	case <-changed:
		t.Fatal("a notification with the endpoint down, where nothing changed")
	default:
	}
}

// Each way a fetch fails is counted under its own reason, and none
// replaces the last good bundle.
func TestFetchFailureReasons(t *testing.T) {
	a := startCluster(t, "a.test", time.Second)
	f, err := NewFetcher(FetcherConfig{Local: spiffeid.RequireTrustDomainFromString("b.test"), Peers: []Peer{a.peer()}, Timeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.fetch(context.Background(), a.peer()); err != nil {
		t.Fatalf("good fetch: %v", err)
	}
	good, _ := f.GetX509BundleForTrustDomain(a.td)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "https://" + closed.Addr().String() + "/"
	closed.Close()

	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()

	answer := func(body string) string {
		t.Helper()
		svid, err := identity.NewEndpointSVID(a.ca, EndpointID(a.td), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{TLSConfig: tlsconfig.TLSServerConfig(svid), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte(body))
		})}
		go func() { _ = hs.ServeTLS(l, "", "") }()
		t.Cleanup(func() { _ = hs.Close() })
		return "https://" + l.Addr().String() + "/"
	}
	plain, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plainSrv := &http.Server{Handler: http.NotFoundHandler()}
	go func() { _ = plainSrv.Serve(plain) }()
	defer plainSrv.Close()

	wrongBootstrap := a.peer()
	wrongBootstrap.Bootstrap = newCA(t, "a.test").Bundle()
	for _, c := range []struct {
		name string
		peer Peer
		want string
	}{
		{"port closed", Peer{TrustDomain: a.td, URL: closedURL}, ReasonConnect},
		{"never answers", Peer{TrustDomain: a.td, URL: "https://" + silent.Addr().String() + "/"}, ReasonTimeout},
		{"speaks plain HTTP", Peer{TrustDomain: a.td, URL: "https://" + plain.Addr().String() + "/"}, ReasonTLS},
		{"an error page", Peer{TrustDomain: a.td, URL: answer("unable to serve bundle")}, ReasonBundle},
		{"a bundle without X.509 authorities", Peer{TrustDomain: a.td, URL: answer(`{"keys":[]}`)}, ReasonNoX509},
	} {
		// A fresh fetcher for each: the endpoint is authenticated by the
		// bootstrap, as before a first fetch.
		g, err := NewFetcher(FetcherConfig{Local: f.cfg.Local, Peers: []Peer{a.peer()}, Timeout: 300 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		c.peer.Bootstrap = a.ca.Bundle()
		_, err = g.fetch(context.Background(), c.peer)
		if err == nil || Reason(err) != c.want {
			t.Errorf("%s: err %v, reason %q; want reason %q", c.name, err, Reason(err), c.want)
		}
		if _, err := g.GetX509BundleForTrustDomain(a.td); err == nil {
			t.Errorf("%s: a failed fetch left a bundle", c.name)
		}
		// And on a fetcher with a good bundle, it stays.
		_, err = f.fetch(context.Background(), c.peer)
		if b, _ := f.GetX509BundleForTrustDomain(a.td); err == nil || !b.Equal(good) {
			t.Errorf("%s: err %v, bundle %v; want a failure and the last good bundle", c.name, err, b)
		}
	}
	// A bootstrap of another root: the endpoint's SVID does not verify.
	g, err := NewFetcher(FetcherConfig{Local: f.cfg.Local, Peers: []Peer{wrongBootstrap}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.fetch(context.Background(), wrongBootstrap); err == nil || Reason(err) != ReasonTLS || !strings.Contains(err.Error(), "x509svid") {
		t.Errorf("wrong bootstrap: err %v, reason %q; want %q", err, Reason(err), ReasonTLS)
	}
}

// The refresh follows the hint between the floor and the ceiling.
func TestNextRefreshClampsTheHint(t *testing.T) {
	f, err := NewFetcher(FetcherConfig{Local: spiffeid.RequireTrustDomainFromString("b.test")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ hint, want time.Duration }{
		{0, DefaultRefresh},
		{time.Second, DefaultMinRefresh},
		{time.Minute, time.Minute},
		{24 * time.Hour, DefaultMaxRefresh},
	} {
		if got := f.NextRefresh(c.hint); got != c.want {
			t.Errorf("NextRefresh(%s) = %s, want %s", c.hint, got, c.want)
		}
	}
}

func TestFetcherRefusesABadPeer(t *testing.T) {
	a, b := newCA(t, "a.test"), newCA(t, "b.test")
	good := Peer{TrustDomain: a.TrustDomain(), URL: "https://127.0.0.1:8443/", Bootstrap: a.Bundle()}
	with := func(edit func(*Peer)) []Peer { p := good; edit(&p); return []Peer{p} }
	for _, c := range []struct {
		peers []Peer
		want  string
	}{
		{with(func(p *Peer) { p.TrustDomain = b.TrustDomain(); p.Bootstrap = b.Bundle() }), `"b.test": it is the local trust domain`},
		{[]Peer{good, good}, `"a.test": listed twice`},
		{with(func(p *Peer) { p.Bootstrap = nil }), `"a.test": no bootstrap bundle`},
		{with(func(p *Peer) { p.Bootstrap = x509bundle.FromX509Authorities(a.TrustDomain(), []*x509.Certificate{}) }), `"a.test": no bootstrap bundle`},
		{with(func(p *Peer) { p.Bootstrap = b.Bundle() }), `bootstrap bundle is of trust domain "b.test"`},
		{with(func(p *Peer) { p.URL = "http://127.0.0.1:8443/" }), `"http://127.0.0.1:8443/": scheme "http", want https`},
		{with(func(p *Peer) { p.URL = "https:///x" }), `"https:///x": no host`},
	} {
		_, err := NewFetcher(FetcherConfig{Local: b.TrustDomain(), Peers: c.peers})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("peers %v: err %v, want one saying %s", c.peers, err, c.want)
		}
	}
}
