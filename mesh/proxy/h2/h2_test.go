package h2_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
)

// interleave sends n requests from each source at once, each source on its
// own client, and returns how many answered 200.
func interleave(t *testing.T, m *mesh, n int, sources ...string) int {
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for _, sa := range sources {
		c := &http.Client{Transport: &http.Transport{}}
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if code, _ := m.get(t, c, sa, dstAuthority); code == http.StatusOK {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return ok
}

// Subject: each source's requests reach the destination app as that
// source, counted per request from the app's own record.
func TestEachSourceArrivesAsItself(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a", "sa-b")
	const n = 40
	if got := interleave(t, m, n, "sa-a", "sa-b"); got != 2*n {
		t.Fatalf("%d of %d requests answered 200", got, 2*n)
	}
	peers := m.app.peers()
	if peers[id("sa-a")] != n || peers[id("sa-b")] != n || len(peers) != 2 {
		t.Errorf("the app saw peers %v, want %d requests each from %s and %s", peers, n, id("sa-a"), id("sa-b"))
	}
	for _, sa := range []string{"sa-a", "sa-b"} {
		if c := m.upstreamConns(sa); c < 1 {
			t.Errorf("the pool opened %v connections presenting %s, want at least one", c, id(sa))
		}
	}
}

// upstreamConns is how many upstream connections the pool opened
// presenting sa's SVID.
func (m *mesh) upstreamConns(sa string) float64 {
	v, _ := m.metrics.Value("aether_proxy_http_upstream_connections_total", map[string]string{"cluster": "h2:dst." + ns, "identity": id(sa)})
	return v
}

// Control (#831): the h2 cluster presents one static certificate, so
// source B's requests arrive as A.
func TestStaticCertificateMakesBArriveAsA(t *testing.T) {
	m := newMesh(t, meshConfig{staticSecret: id("sa-a")}, "sa-a", "sa-b")
	const n = 20
	if got := interleave(t, m, n, "sa-a", "sa-b"); got != 2*n {
		t.Fatalf("%d of %d requests answered 200", got, 2*n)
	}
	if peers := m.app.peers(); peers[id("sa-a")] != 2*n || len(peers) != 1 {
		t.Errorf("the app saw peers %v, want all %d as %s", peers, 2*n, id("sa-a"))
	}
}

// Control (#831, the pool): the certificate is selected per connection, but
// the identity is stamped with envoy.string, which is not Hashable, so it
// stays out of the pool key and B's requests ride A's connection.
func TestUnhashableIdentitySharesThePool(t *testing.T) {
	m := newMesh(t, meshConfig{factory: agentmtls.PlainString}, "sa-a", "sa-b")
	ca := &http.Client{Transport: &http.Transport{}}
	if code, body := m.get(t, ca, "sa-a", dstAuthority); code != http.StatusOK {
		t.Fatalf("A's first request: %d %q", code, body)
	}
	cb := &http.Client{Transport: &http.Transport{}}
	const n = 10
	for range n {
		if code, body := m.get(t, cb, "sa-b", dstAuthority); code != http.StatusOK {
			t.Fatalf("B's request: %d %q", code, body)
		}
	}
	if peers := m.app.peers(); peers[id("sa-a")] != n+1 || len(peers) != 1 {
		t.Errorf("the app saw peers %v, want all %d as %s: B rides A's pooled connection", peers, n+1, id("sa-a"))
	}
	if a, b := m.upstreamConns("sa-a"), m.upstreamConns("sa-b"); a != 1 || b != 0 {
		t.Errorf("the pool opened %v connections as %s and %v as %s, want one, A's, for both sources", a, id("sa-a"), b, id("sa-b"))
	}
}

func TestUnknownAuthorityIs404WithABody(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	code, body := m.get(t, http.DefaultClient, "sa-a", "nope."+ns+"."+meshDomain)
	if code != http.StatusNotFound || !strings.Contains(body, "no mesh service has this authority") {
		t.Errorf("unknown authority answered %d %q, want 404 naming the miss", code, body)
	}
	if m.app.count() != 0 {
		t.Errorf("the app saw %d requests, want none", m.app.count())
	}
}

func TestUpstreamFailureIs503UF(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	m.inbound.Close()
	code, body := m.get(t, http.DefaultClient, "sa-a", dstAuthority)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "upstream connect error") {
		t.Errorf("a dead upstream answered %d %q, want 503", code, body)
	}
	var flags []any
	for _, e := range m.accessLog(t) {
		flags = append(flags, e["flags"])
	}
	if len(flags) != 1 || flags[0] != "UF" {
		t.Errorf("access log flags %v, want one UF", flags)
	}
}

// The access log of both hops carries the source identity, the status and
// the cluster of each request.
func TestAccessLogNamesTheSource(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	if code, _ := m.get(t, http.DefaultClient, "sa-a", dstAuthority); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	es := m.accessLog(t)
	if len(es) != 2 {
		t.Fatalf("access log has %d lines, want one per hop (2): %v", len(es), es)
	}
	for _, e := range es {
		if e["source"] != id("sa-a") || e["status"] != float64(200) || e["flags"] != "-" {
			t.Errorf("access log line %v, want source %s, status 200, flags -", e, id("sa-a"))
		}
	}
}

// TestUpstreamAsksNoCompression: a request reaches the app with the
// Accept-Encoding its client sent, none when it sent none. Go's
// transports otherwise ask for gzip on the client's behalf and inflate
// the answer themselves, as Envoy never does: a body the app compresses
// would be decompressed by the proxy, for every request.
func TestUpstreamAsksNoCompression(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	for _, ae := range []string{"", "br"} {
		c := &http.Client{Transport: &http.Transport{DisableCompression: true}}
		req, err := http.NewRequest("GET", "http://"+m.outbound["sa-a"].Addr().String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = dstAuthority
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		c.CloseIdleConnections()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
		m.app.mu.Lock()
		got := m.app.encodings[len(m.app.encodings)-1]
		m.app.mu.Unlock()
		if got != ae {
			t.Errorf("client sent Accept-Encoding %q, the app saw %q", ae, got)
		}
	}
}

// TestDownstreamCloseKeepsTheUpstreamPooled: Connection is hop-by-hop. A
// client that sends "Connection: close" closes its own connection to the
// outbound listener, not the pool's connection to the destination: 20 such
// requests open one upstream connection. Without it every request paid a
// new mTLS handshake (the long soak's prober, which opens a connection per
// probe, made the proxy's h2 windows collapse at 300 probes/s).
func TestDownstreamCloseKeepsTheUpstreamPooled(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	const n = 20
	for i := range n {
		c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		req, err := http.NewRequest("GET", "http://"+m.outbound["sa-a"].Addr().String()+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = dstAuthority
		req.Close = true
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, resp.StatusCode)
		}
	}
	if got := m.app.count(); got != n {
		t.Fatalf("the app saw %d requests, want %d", got, n)
	}
	v, _ := m.metrics.Value("aether_proxy_http_upstream_connections_total", map[string]string{"cluster": "h2:dst." + ns, "identity": id("sa-a")})
	if v != 1 {
		t.Fatalf("%d requests with Connection: close opened %.0f upstream connection(s), want 1", n, v)
	}
}
