package proxy_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// eastWestMesh: web-0 (account web) in the rig's client pod calls api,
// whose pod api-0 is the rig's backend; both are local to the one node,
// so one agent and one proxy carry both ends.
func eastWestMesh(rig *proxytest.Rig) *registry.State {
	st := &registry.State{
		Nodes: []registry.Node{{Name: "node-a"}},
		Pods: []registry.Pod{
			{Name: "web-0", Namespace: "demo", Node: "node-a", ServiceAccount: "web", IP: proxytest.PodAddr.Addr(), NetnsPath: rig.Pod.Path, Ready: true,
				Labels: map[string]string{"app": "web"}, DependsOn: []registry.Key{{Namespace: "demo", Name: "api"}}},
			{Name: "api-0", Namespace: "demo", Node: "node-a", ServiceAccount: "api", IP: proxytest.BackendAddr(0), NetnsPath: rig.Back.Path, Ready: true,
				Labels: map[string]string{"app": "api"}},
		},
		Services: []registry.Service{{Name: "api", Namespace: "demo", ClusterIP: netip.MustParseAddr("10.96.0.60"), Selector: map[string]string{"app": "api"},
			Ports: []registry.ServicePort{{Name: "web", Port: 8080, TargetPort: 7080, Protocol: registry.ProtocolTCP, AppProtocol: registry.AppProtocolHTTP}}}},
		ServiceAccounts: []registry.ServiceAccount{{Name: "web", Namespace: "demo"}, {Name: "api", Namespace: "demo"}},
	}
	st.DeriveEndpoints()
	st.Sort()
	return st
}

// TestEastWestRequest is a request from web-0 to api over the whole
// east-west path, both ends real: the outbound listener selects web's
// twin, which does not exist until the on_demand filter asks the agent
// for it; the twin carries the request over HTTP/3 to api-0's QUIC
// inbound, whose access log records HTTP/3 and web's SPIFFE ID, and the
// app the XFCC. A second request pays no on-demand round trip (the
// agent's admissions stay at one). The control runs the same mesh with
// --mesh-transport h2: the request arrives over HTTP/2.
func TestEastWestRequest(t *testing.T) {
	privileged.Require(t)
	for _, c := range []struct {
		name      string
		transport agent.MeshTransport
		proto     string
		admitted  float64
	}{
		{"control: mesh-transport h2", agent.TransportH2, "HTTP/2.0", 0},
		{"subject: mesh-transport auto", agent.TransportAuto, "HTTP/3.0", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			rig := proxytest.NewRig(t, 1)
			st := eastWestMesh(rig)
			xfcc := startBackApp(t, rig)
			dir := t.TempDir()
			target, reg := runEastWestAgent(t, st, c.transport, dir)
			p := proxy.New(proxy.Options{Node: "node-a", XDS: target, UpstreamNetns: rig.Node.Path, Log: quietLog()})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = p.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			waitListener(t, p, "http-outbound~demo~web-0")
			waitListener(t, p, "http-inbound~demo~api-0")
			for i := range 2 {
				if err := callFromPod(rig, "api.demo.mesh.test"); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if x := <-xfcc; !strings.Contains(x, "URI=spiffe://aether.test/ns/demo/sa/web") {
					t.Fatalf("request %d: app saw XFCC %q, want web's ID", i, x)
				}
			}
			waitLog(t, filepath.Join(dir, "access-node-a.log"), `"protocol":"`+c.proto+`"`, `"source":"spiffe://aether.test/ns/demo/sa/web"`)
			if n := counter(t, reg, "aether_agent_odcds_admitted_total", "", ""); n != c.admitted {
				t.Fatalf("agent admitted %v twins for two requests, want %v", n, c.admitted)
			}
		})
	}
}

func runEastWestAgent(t testing.TB, st *registry.State, transport agent.MeshTransport, dir string) (string, *prometheus.Registry) {
	t.Helper()
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	rot, err := identity.NewRotator(ca, store, identity.RotatorConfig{TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rot.Keep(agent.LocalAccounts(st, "node-a")); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, err := agent.New(agent.Options{Node: "node-a", Mode: constants.CaptureTProxy, Transport: transport, Logger: quietLog(), Registerer: reg,
		HTTP: &agent.HTTPPath{TrustDomain: ca.TrustDomain(), MeshDomain: "mesh.test", AccessLog: filepath.Join(dir, "access-node-a.log"), Identities: store, EastWest: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	lis, err := agent.Listen("unix://" + filepath.Join(dir, "xds.sock"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gs := a.NewGRPCServer(ctx)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); cancel() })
	return "unix://" + filepath.Join(dir, "xds.sock"), reg
}

// startBackApp is api-0's app on 127.0.0.1:7080 in the backend netns; it
// sends each request's XFCC.
func startBackApp(t testing.TB, rig *proxytest.Rig) <-chan string {
	t.Helper()
	seen := make(chan string, 4)
	var ln net.Listener
	if err := transparent.InNetns(rig.Back.Path, func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:7080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case seen <- r.Header.Get("X-Forwarded-Client-Cert"):
		default: // a benchmark reads none
		}
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = app.Serve(ln) }()
	t.Cleanup(func() { _ = app.Close() })
	return seen
}

// callFromPod sends one plain HTTP request from the client pod to its
// outbound listener, by authority.
func callFromPod(rig *proxytest.Rig, authority string) error {
	var c net.Conn
	if err := transparent.InNetns(rig.Pod.Path, func() error {
		var err error
		c, err = net.DialTimeout("tcp", "127.0.0.1:18081", 5*time.Second)
		return err
	}); err != nil {
		return err
	}
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return c, nil }}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+authority+"/", nil)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return &statusError{resp.Status, string(body)}
	}
	return nil
}

type statusError struct{ status, body string }

func (e *statusError) Error() string { return e.status + ": " + e.body }

func waitListener(t testing.TB, p *proxy.Proxy, name string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(","+strings.Join(p.Listeners(), ",")+",", ","+name+",") {
		if time.Now().After(deadline) {
			t.Fatalf("listener %s never ran; running: %v", name, p.Listeners())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitLog(t *testing.T, path string, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		ok := true
		for _, line := range strings.Split(string(b), "\n") {
			ok = true
			for _, w := range wants {
				ok = ok && strings.Contains(line, w)
			}
			if ok {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log %s has no line with %v:\n%s", path, wants, b)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
