package h2_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

const (
	trustDomain = "aether.test"
	meshDomain  = "mesh.test"
	ns          = "demo"
)

// app is the destination app: it answers with, and records, the XFCC each
// request carried. Its record is the witness; the client's view is not.
// It reads a request's body before it answers, as an upload would, and
// records only a request whose body arrived whole.
type app struct {
	srv  *http.Server
	port uint16
	mu   sync.Mutex
	seen []string
	// encodings are the Accept-Encoding each request carried.
	encodings []string
	// closed counts the connections to the app that have closed; opened
	// those it has accepted.
	closed, opened atomic.Int32
}

// kbPath answers kb instead of the XFCC: the benchmark rig's 1 KB body.
const kbPath = "/1k"

var kb = []byte(strings.Repeat("a", 1023) + "\n")

func startApp(t testing.TB) *app {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &app{port: uint16(ln.Addr().(*net.TCPAddr).Port)}
	a.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		x := r.Header.Get(h2.XFCC)
		a.mu.Lock()
		a.seen = append(a.seen, x)
		a.encodings = append(a.encodings, r.Header.Get("Accept-Encoding"))
		a.mu.Unlock()
		if r.URL.Path == kbPath {
			w.Write(kb)
			return
		}
		io.WriteString(w, x)
	}), ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			a.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			a.closed.Add(1)
		}
	}}
	go a.srv.Serve(ln)
	t.Cleanup(func() { a.srv.Close() })
	return a
}

// peers counts the requests the app saw per peer URI in their XFCC.
func (a *app) peers() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]int{}
	for _, x := range a.seen {
		_, uri, _ := strings.Cut(x, "URI=")
		out[uri]++
	}
	return out
}

// open is how many connections to the app are open.
func (a *app) open() int { return int(a.opened.Load() - a.closed.Load()) }

func (a *app) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.seen)
}

// mesh is one node's worth of the mTLS path on loopback: the destination
// pod's inbound listener in front of the app, one outbound listener per
// source pod, the h2 cluster between them, all compiled from the agent's
// resources.
type mesh struct {
	ca       *identity.CA
	store    *secret.Store
	metrics  *metrics.Metrics
	clusters map[string]*cluster.Cluster
	opts     h2.Options
	app      *app
	inbound  *h2.Listener
	outbound map[string]*h2.Listener
	// specs are the served listeners' compiled resources, by name.
	specs  map[string]*listener.Spec
	logDir string
}

func (m *mesh) Active(name string) *cluster.Cluster { return m.clusters[name] }

func id(sa string) string { return "spiffe://" + trustDomain + "/ns/" + ns + "/sa/" + sa }

type meshConfig struct {
	// staticSecret makes the h2 cluster present one certificate (#831).
	staticSecret string
	// factory is the outbound listener's set_filter_state factory.
	factory string
}

func newMesh(t testing.TB, cfg meshConfig, sources ...string) *mesh {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: trustDomain, MeshDomain: meshDomain})
	if err != nil {
		t.Fatal(err)
	}
	m := &mesh{ca: ca, store: secret.NewStore(), metrics: metrics.New(), clusters: map[string]*cluster.Cluster{}, outbound: map[string]*h2.Listener{}, specs: map[string]*listener.Spec{}, logDir: t.TempDir()}
	m.opts = h2.Options{Store: m.store, Logs: &h2.LogFiles{}, Metrics: m.metrics}
	m.opts.Pool = &h2.Pool{Store: m.store, Metrics: m.metrics}
	t.Cleanup(func() { m.opts.Pool.Close(); m.opts.Logs.Close() })
	m.putSecret(t, bundleSecret(t, ca.Bundle()))
	for _, sa := range append([]string{"dst"}, sources...) {
		m.putSecret(t, svidSecret(t, m.issue(t, sa, time.Hour, time.Time{})))
	}
	m.app = startApp(t)
	mc := agentmtls.Mesh{Domain: meshDomain, AccessLog: filepath.Join(m.logDir, "access.log")}
	dst := agentmtls.Pod{Namespace: ns, Name: "dst-0", ID: id("dst"), IP: netip.MustParseAddr("127.0.0.1"),
		Serves: []agentmtls.Port{{Service: "dst", Namespace: ns, Port: 8080, TargetPort: m.app.port}}}
	l, cls, err := agentmtls.InboundListenerFor(mc, dst)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cls {
		m.addCluster(t, c)
	}
	m.inbound = m.serve(t, l)
	up := agentmtls.Upstream{StaticSecret: cfg.staticSecret}
	h2c, err := agentmtls.H2ClusterFor(mc, agentmtls.Service{Name: "dst", Namespace: ns, Port: 8080, Accounts: []string{id("dst")}}, up)
	if err != nil {
		t.Fatal(err)
	}
	c := m.addCluster(t, h2c)
	c.SetAssignment(&cluster.Assignment{Name: h2c.GetName(), Endpoints: []cluster.Endpoint{{Addr: m.inbound.Addr(), Weight: 1}}})
	factory := cfg.factory
	if factory == "" {
		factory = agentmtls.HashableString
	}
	for _, sa := range sources {
		src := agentmtls.Pod{Namespace: ns, Name: sa + "-0", ID: id(sa)}
		ol, err := agentmtls.OutboundListenerFor(mc, src, []agentmtls.Route{{Service: "dst", Namespace: ns}}, factory)
		if err != nil {
			t.Fatal(err)
		}
		m.outbound[sa] = m.serve(t, ol)
	}
	return m
}

func (m *mesh) issue(t testing.TB, sa string, ttl time.Duration, at time.Time) *x509svid.SVID {
	t.Helper()
	s, err := m.ca.Issue(identity.Request{Account: identity.Account{Namespace: ns, ServiceAccount: sa}, TTL: ttl, IssuedAt: at})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func svidSecret(t testing.TB, s *x509svid.SVID) *tlsv3.Secret {
	t.Helper()
	sec, err := agentmtls.SVIDSecret(s)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func bundleSecret(t testing.TB, b *x509bundle.Bundle) *tlsv3.Secret {
	t.Helper()
	sec, err := agentmtls.BundleSecret([]*x509bundle.Bundle{b})
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

func (m *mesh) putSecret(t testing.TB, s *tlsv3.Secret) {
	t.Helper()
	c, err := secret.FromProto(s)
	if err != nil {
		t.Fatal(err)
	}
	m.store.Apply([]*secret.Secret{c}, nil)
}

func (m *mesh) addCluster(t testing.TB, c *clusterv3.Cluster) *cluster.Cluster {
	t.Helper()
	s, err := cluster.FromProto(c)
	if err != nil {
		t.Fatal(err)
	}
	cl := cluster.New(s)
	m.clusters[s.Name] = cl
	return cl
}

// serve compiles l and serves it on a fresh loopback port: the contract's
// 18008 and 18081 live in pod netns, which these tests do not need.
func (m *mesh) serve(t testing.TB, l *listenerv3.Listener) *h2.Listener {
	t.Helper()
	s, err := listener.FromProto(l)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hl := h2.Serve(s, ln, m, m.opts)
	t.Cleanup(func() { hl.Close() })
	m.specs[s.Name] = s
	return hl
}

// get sends one plain HTTP/1.1 request through sa's outbound listener.
func (m *mesh) get(t testing.TB, c *http.Client, sa, authority string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+m.outbound[sa].Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = authority
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("request from %s to %s: %v", sa, authority, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (m *mesh) accessLog(t testing.TB) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(m.logDir, "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("access log line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

var dstAuthority = xdsnames.Authority("dst", ns, meshDomain)
