package proxy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"golang.org/x/net/http2"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// Hot restart timings for the rig: Envoy's defaults (10 and 15 minutes)
// are for fleets.
const (
	rigDrainTime          = 500 * time.Millisecond
	rigParentShutdownTime = time.Second
)

// epoch is one running proxy process, as aether-proxy runs it: its
// rendezvous for the next epoch, and for a child its take-over.
type epoch struct {
	p        *proxy.Proxy
	cancel   context.CancelFunc
	done     chan struct{}
	takeOver chan error
	// drained is closed once a child told this epoch to drain.
	drained chan struct{}
}

// drainWitness is the proxy as its rendezvous sees it, noting when a
// child tells it to drain.
type drainWitness struct {
	*proxy.Proxy
	once    sync.Once
	drained chan struct{}
}

func (d *drainWitness) Drain(ks []hotrestart.Key, forward func(hotrestart.Packet) error) {
	d.Proxy.Drain(ks, forward)
	d.once.Do(func() { close(d.drained) })
}

// startEpoch runs a proxy of restart epoch n against srv; n > 0 takes over
// from the epoch before it on sock, telling its parent to exit
// rigParentShutdownTime after the drain. With sock empty it serves no
// rendezvous.
func startEpoch(t *testing.T, rig *proxytest.Rig, srv *proxytest.Server, sock string, n uint32) *epoch {
	return startEpochExiting(t, rig, srv, sock, n, rigParentShutdownTime)
}

// startEpochExiting is startEpoch with the parent told to exit
// shutdownAfter its drain.
func startEpochExiting(t *testing.T, rig *proxytest.Rig, srv *proxytest.Server, sock string, n uint32, shutdownAfter time.Duration) *epoch {
	t.Helper()
	r := &proxy.Restart{Epoch: n, DrainTime: rigDrainTime}
	if n > 0 {
		c, err := hotrestart.Connect(hotrestart.SocketPath(sock, 0, n-1), n)
		if err != nil {
			t.Fatal(err)
		}
		r.Parent = c
	}
	e := &epoch{done: make(chan struct{}), takeOver: make(chan error, 1), drained: make(chan struct{})}
	e.p = proxy.New(proxy.Options{Node: node, XDS: srv.Target, Batch: proxy.DefaultBatch, UpstreamNetns: rig.Node.Path, Log: quietLog(), Restart: r})
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	var rv *hotrestart.Parent
	if sock != "" {
		var err error
		if rv, err = hotrestart.Listen(hotrestart.SocketPath(sock, 0, n), n, &drainWitness{Proxy: e.p, drained: e.drained}, nil, quietLog()); err != nil {
			t.Fatal(err)
		}
		ctx = hotrestart.UntilTerminated(ctx, rv)
	}
	if r.Parent != nil {
		go func() { e.takeOver <- proxy.TakeOver(ctx, e.p, r.Parent, shutdownAfter) }()
	}
	go func() {
		_ = e.p.Run(ctx)
		if rv != nil {
			_ = rv.Close()
		}
		if r.Parent != nil {
			_ = r.Parent.Close()
		}
		close(e.done)
	}()
	t.Cleanup(e.stop)
	return e
}

func (e *epoch) stop() { e.cancel(); <-e.done }

// hotRestartMesh is a pod with a UDP and a TCP service behind its capture
// listeners and, in the same pod, an app behind the mTLS inbound on TCP
// 18008 (HTTP/2) and the QUIC inbound on UDP 18008 (HTTP/3).
type hotRestartMesh struct {
	rig *proxytest.Rig
	srv *proxytest.Server
	svc proxytest.Service
	h2  *http.Client
	h3  *http3.Transport
	// quic are the HTTP/3 client's connections, whose loss counts are the
	// witness that no QUIC packet was dropped.
	quicMu sync.Mutex
	quic   []*quic.Conn
	app    atomic.Int64
	want   []string
	// gap is set while no process holds the sockets (a naive restart's
	// stop done, its successor not yet started): an exchange begun then
	// is counted as sent into the gap.
	gap atomic.Bool
}

func newHotRestartMesh(t *testing.T) *hotRestartMesh {
	t.Helper()
	privileged.Require(t)
	m := &hotRestartMesh{rig: proxytest.NewRig(t, 1), srv: proxytest.NewServer(t)}
	ep := netip.AddrPortFrom(proxytest.BackendAddr(0), 5001)
	m.svc = proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{ep}}
	m.rig.StartBackend(t, m.svc.Name, ep, false)
	f := &fixture{rig: m.rig, svcs: []proxytest.Service{m.svc}}
	res := proxytest.UDPSnapshot(m.rig.Pod.Path, time.Minute, f.svcs, f.tcpServices(t))

	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	apiSVID, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "api"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	m.startApp(t)
	pod := mtls.Pod{Namespace: "demo", Name: "api-0", ID: "spiffe://aether.test/ns/demo/sa/api", IP: proxytest.PodAddr.Addr(), NetnsPath: m.rig.Pod.Path,
		Serves: []mtls.Port{{Service: "api", Namespace: "demo", Port: 8080, TargetPort: 7080}}}
	in, cls, err := mtls.InboundListenerFor(mtls.Mesh{Domain: "mesh.test", AccessLog: filepath.Join(t.TempDir(), "access.log")}, pod)
	if err != nil {
		t.Fatal(err)
	}
	q, err := eastwest.QuicInbound(in, "demo", "api-0", m.rig.Pod.Path)
	if err != nil {
		t.Fatal(err)
	}
	svid, err := mtls.SVIDSecret(apiSVID)
	if err != nil {
		t.Fatal(err)
	}
	bundle, err := mtls.BundleSecret([]*x509bundle.Bundle{ca.Bundle()})
	if err != nil {
		t.Fatal(err)
	}
	res[resource.ClusterType] = append(res[resource.ClusterType], cls[0])
	res[resource.SecretType] = []types.Resource{svid, bundle}
	res[resource.ListenerType] = append(res[resource.ListenerType], in, q)
	m.srv.Set(t, node, res)
	m.want = []string{udpName, tcpName, in.GetName(), q.GetName()}
	m.clients(t, ca)
	return m
}

// startApp is the pod's app on 127.0.0.1:7080, counting what it serves.
func (m *hotRestartMesh) startApp(t *testing.T) {
	var ln net.Listener
	if err := transparent.InNetns(m.rig.Pod.Path, func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:7080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	app := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		m.app.Add(1)
		_, _ = io.WriteString(w, "ok")
	})}
	go func() { _ = app.Serve(ln) }()
	t.Cleanup(func() { _ = app.Close() })
}

// clients are web's HTTP/2 and HTTP/3 clients of the inbound, in the
// backend netns, each keeping its connection across requests.
func (m *hotRestartMesh) clients(t *testing.T, ca *identity.CA) {
	s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: "demo", ServiceAccount: "web"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	web := tls.Certificate{PrivateKey: s.PrivateKey, Leaf: s.Certificates[0]}
	for _, x := range s.Certificates {
		web.Certificate = append(web.Certificate, x.Raw)
	}
	const sni = "8080.api.demo.mesh.test"
	tc := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"h2"},
		VerifyConnection: h3.VerifyServer(ca.Bundle(), sni), Certificates: []tls.Certificate{web}}
	inbound := netip.AddrPortFrom(proxytest.PodAddr.Addr(), constants.InboundPort)
	h2t := &http2.Transport{TLSClientConfig: tc, DialTLSContext: func(ctx context.Context, _, _ string, tc *tls.Config) (net.Conn, error) {
		c, err := transparent.DialTCP(ctx, m.rig.Back.Path, inbound, transparent.Options{})
		if err != nil {
			return nil, err
		}
		tlc := tls.Client(c, tc)
		if err := tlc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tlc, nil
	}}
	m.h2 = &http.Client{Transport: h2t, Timeout: 5 * time.Second}
	t.Cleanup(h2t.CloseIdleConnections)

	var pc net.PacketConn
	if err := transparent.InNetns(m.rig.Back.Path, func() error {
		var err error
		pc, err = net.ListenPacket("udp4", "0.0.0.0:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	t.Cleanup(func() { _ = tr.Close(); _ = pc.Close() })
	qtc := tc.Clone()
	qtc.NextProtos = nil
	m.h3 = &http3.Transport{TLSClientConfig: qtc, Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
		c, err := tr.DialEarly(ctx, net.UDPAddrFromAddrPort(inbound), tc, qc)
		if err == nil {
			m.quicMu.Lock()
			m.quic = append(m.quic, c)
			m.quicMu.Unlock()
		}
		return c, err
	}}
	t.Cleanup(func() { _ = m.h3.Close() })
}

// quicLost is how many packets the HTTP/3 client's connections lost, and
// how many connections it made.
func (m *hotRestartMesh) quicLost() (lost uint64, conns int) {
	m.quicMu.Lock()
	defer m.quicMu.Unlock()
	for _, c := range m.quic {
		lost += c.ConnectionStats().PacketsLost
	}
	return lost, len(m.quic)
}

// flow is one protocol's steady traffic: each step is one exchange,
// checked against what the far end answers.
type flow struct {
	name     string
	ok, fail atomic.Int64
	// gapSent are the exchanges begun while no process held the
	// sockets, gapLost those of them that failed.
	gapSent, gapLost atomic.Int64
	mu               sync.Mutex
	firstErr         string
}

func (f *flow) record(err error, inGap bool) {
	if inGap {
		f.gapSent.Add(1)
	}
	if err == nil {
		f.ok.Add(1)
		return
	}
	if inGap {
		f.gapLost.Add(1)
	}
	if f.fail.Add(1) == 1 {
		f.mu.Lock()
		f.firstErr = err.Error()
		f.mu.Unlock()
	}
}

func (f *flow) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("%s %d ok, %d failed", f.name, f.ok.Load(), f.fail.Load())
	if f.firstErr != "" {
		s += " (first: " + f.firstErr + ")"
	}
	if n := f.gapSent.Load(); n != 0 {
		s += fmt.Sprintf("; %d begun while no process held the sockets, %d of them failed", n, f.gapLost.Load())
	}
	return s
}

// drive runs the four flows until stop is closed.
func (m *hotRestartMesh) drive(t *testing.T, stop <-chan struct{}) ([]*flow, *sync.WaitGroup) {
	udpc := m.rig.Dial(t, netip.AddrPortFrom(m.svc.VIP, port))
	flows := []*flow{{name: "udp"}, {name: "tcp"}, {name: "http/2"}, {name: "http/3"}}
	steps := []func() error{
		func() error {
			// A generous wait: only a datagram that never comes back
			// is a failure, not one the loaded machine delayed.
			reply, _, err := exchangeWithin(udpc, "ping", 3*time.Second)
			if err == nil && reply != m.svc.Name {
				err = fmt.Errorf("reply %q", reply)
			}
			return err
		},
		func() error { return m.tcpOnce() },
		func() error { return m.h2Once() },
		func() error { return m.h3Once() },
	}
	var wg sync.WaitGroup
	for i, f := range flows {
		wg.Go(func() {
			tick := time.NewTicker(3 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				inGap := m.gap.Load()
				f.record(steps[i](), inGap)
			}
		})
	}
	return flows, &wg
}

func (m *hotRestartMesh) tcpOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := transparent.DialTCP(ctx, m.rig.Pod.Path, netip.AddrPortFrom(m.svc.VIP, port), transparent.Options{})
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	b, err := io.ReadAll(c)
	if err == nil && string(b) != "tcp-"+m.svc.Name {
		err = fmt.Errorf("read %q", b)
	}
	return err
}

func checkOK(resp *http.Response, err error, proto string) error {
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(b) != "ok" || resp.Proto != proto {
		return fmt.Errorf("%s over %s: %q", resp.Status, resp.Proto, b)
	}
	return nil
}

func (m *hotRestartMesh) h2Once() error {
	req, _ := http.NewRequest(http.MethodGet, "https://api.demo.mesh.test/", nil)
	resp, err := m.h2.Do(req)
	return checkOK(resp, err, "HTTP/2.0")
}

func (m *hotRestartMesh) h3Once() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+netip.AddrPortFrom(proxytest.PodAddr.Addr(), constants.InboundPort).String()+"/", nil)
	resp, err := m.h3.RoundTrip(req)
	return checkOK(resp, err, "HTTP/3.0")
}

func (m *hotRestartMesh) waitListeners(t *testing.T, p *proxy.Proxy) {
	t.Helper()
	for _, name := range m.want {
		waitListener(t, p, name)
	}
}

// restartUnder drives the four flows, restarts the proxy with restart
// while they run, and returns them once the new proxy has served alone
// for a while.
func (m *hotRestartMesh) restartUnder(t *testing.T, restart func(flows []*flow)) []*flow {
	stop := make(chan struct{})
	flows, wg := m.drive(t, stop)
	time.Sleep(300 * time.Millisecond)
	restart(flows)
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	return flows
}

// gapWait bounds how long holdGap waits for the flows to send into the
// gap: a UDP exchange takes its 3 s wait to count as lost, and a loaded
// machine may delay a flow's next step.
const gapWait = 30 * time.Second

// holdGap keeps a naive restart's gap open (called once the old process
// has closed every socket, before the new one starts) until the UDP and
// the TCP flow have each lost an exchange begun inside it, so the
// control's failure does not depend on traffic happening to arrive in a
// gap of a few milliseconds.
func (m *hotRestartMesh) holdGap(t *testing.T, flows []*flow) {
	t.Helper()
	m.gap.Store(true)
	defer m.gap.Store(false)
	deadline := time.Now().Add(gapWait)
	for _, f := range flows {
		if f.name != "udp" && f.name != "tcp" {
			continue
		}
		for f.gapLost.Load() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("broken rig: no %s exchange begun while no process held the sockets failed within %s (%s)", f.name, gapWait, f)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// freshClients drops what the HTTP clients kept from the control (a
// pooled connection to a process gone, or an HTTP/3 dial begun in the
// gap, which the transport shares with later requests until its
// handshake times out) and connects them to the running proxy, so the
// subject starts as a hot restart does: with the clients connected to
// the parent.
func (m *hotRestartMesh) freshClients(t *testing.T) {
	t.Helper()
	m.h2.CloseIdleConnections()
	m.h3.CloseIdleConnections()
	if err := m.h2Once(); err != nil {
		t.Fatalf("broken rig: the HTTP/2 client cannot reach the restarted proxy: %v", err)
	}
	if err := m.h3Once(); err != nil {
		t.Fatalf("broken rig: the HTTP/3 client cannot reach the restarted proxy: %v", err)
	}
}

// noPorts is the pod netns's count of UDP datagrams dropped for want of a
// socket.
func (m *hotRestartMesh) noPorts(t *testing.T) int64 {
	t.Helper()
	st, err := proxytest.UDPStats(m.rig.Pod.Path)
	if err != nil {
		t.Fatal(err)
	}
	return st["NoPorts"]
}

// A hot restart loses nothing: UDP, TCP, HTTP/2 and HTTP/3 exchanges
// running steadily through the proxy while epoch 1 takes over from epoch
// 0 all succeed, each answered by the far end. The control is a naive
// restart (stop, then start) under the same traffic: it fails exchanges.
func TestHotRestartLosesNothing(t *testing.T) {
	m := newHotRestartMesh(t)
	sock := filepath.Join(t.TempDir(), "hr")

	old := startEpoch(t, m.rig, m.srv, "", 0)
	m.waitListeners(t, old.p)
	var next *epoch
	var noPorts int64
	control := m.restartUnder(t, func(flows []*flow) {
		before := m.noPorts(t)
		old.stop()
		m.holdGap(t, flows)
		next = startEpoch(t, m.rig, m.srv, "", 0)
		m.waitListeners(t, next.p)
		noPorts = m.noPorts(t) - before
	})
	next.stop()
	var lost int64
	for _, f := range control {
		t.Logf("control (naive restart): %s", f)
		lost += f.fail.Load()
	}
	t.Logf("control (naive restart): the pod netns dropped %d datagrams for want of a socket across the restart", noPorts)
	if lost == 0 {
		t.Fatal("broken rig: the naive restart lost no exchange, so the subject's zero would prove nothing")
	}
	// The kernel's own witness that traffic reached the gap, apart from
	// the flows' view of it.
	if noPorts == 0 {
		t.Fatal("broken rig: the pod netns dropped no datagram for want of a socket across the naive restart")
	}

	parent := startEpoch(t, m.rig, m.srv, sock, 0)
	m.waitListeners(t, parent.p)
	m.freshClients(t)
	lostBefore, connsBefore := m.quicLost()
	var child *epoch
	subject := m.restartUnder(t, func([]*flow) {
		child = startEpoch(t, m.rig, m.srv, sock, 1)
		select {
		case err := <-child.takeOver:
			if err != nil {
				t.Errorf("take-over: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("the child did not take over within 10s")
		}
		select {
		case <-parent.done:
		case <-time.After(5 * time.Second):
			t.Error("the parent did not exit once told to")
		}
	})
	for _, f := range subject {
		t.Logf("hot restart: %s", f)
		if f.fail.Load() != 0 || f.ok.Load() == 0 {
			t.Errorf("hot restart: %s; want every exchange answered", f)
		}
	}
	// QUIC recovers lost packets, so the exchanges alone would hide a
	// child that read packets meant for its parent's connections: the
	// client's own loss detection is the witness.
	lostAfter, conns := m.quicLost()
	t.Logf("hot restart: the HTTP/3 client lost %d QUIC packets on %d connections", lostAfter-lostBefore, conns-connsBefore)
	if lostAfter != lostBefore {
		t.Errorf("the HTTP/3 client lost %d QUIC packets across the hot restart, want 0", lostAfter-lostBefore)
	}
	// The new process serves every protocol: its own counters saw traffic.
	for _, c := range []struct{ family, listener string }{
		{"aether_proxy_udp_downstream_rx_datagrams_total", udpName},
		{"aether_proxy_tcp_connections_total", tcpName},
		{"aether_proxy_http_requests_total", m.want[2]},
		{"aether_proxy_http_requests_total", m.want[3]},
	} {
		if got := sumMetric(t, child.p, c.family, c.listener); got == 0 {
			t.Errorf("the child counted no %s on %s", c.family, c.listener)
		}
	}
}

// sumMetric adds up a family's samples for one listener.
func sumMetric(t *testing.T, p *proxy.Proxy, family, listener string) float64 {
	t.Helper()
	fams, err := p.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "listener" && l.GetValue() == listener {
					sum += s.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}

// A child that dies after the parent drained, before telling it to exit,
// leaves the parent serving: it resumes accepting and reading on what it
// handed over, and UDP, TCP, HTTP/2 and HTTP/3 exchanges through it all
// succeed.
func TestHotRestartRollsBack(t *testing.T) {
	m := newHotRestartMesh(t)
	sock := filepath.Join(t.TempDir(), "hr")
	parent := startEpoch(t, m.rig, m.srv, sock, 0)
	m.waitListeners(t, parent.p)

	// TakeOver drains the parent as soon as the child is ready, and tells
	// it to exit only after the shutdown time: an hour, so the child is
	// certain to die between the two, however slowly the machine runs.
	child := startEpochExiting(t, m.rig, m.srv, sock, 1, time.Hour)
	select {
	case <-parent.drained:
	case <-time.After(30 * time.Second):
		t.Fatal("broken rig: the child did not drain the parent within 30s")
	}
	child.stop()
	select {
	case err := <-child.takeOver:
		if err == nil {
			t.Fatal("the child's take-over completed; the test needs it cut short")
		}
	default:
	}
	// The parent's pooled connections to the child are gone; new ones
	// reach the parent.
	m.h2.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)

	stop := make(chan struct{})
	flows, wg := m.drive(t, stop)
	time.Sleep(500 * time.Millisecond)
	close(stop)
	wg.Wait()
	for _, f := range flows {
		t.Logf("after the child died: %s", f)
		if f.fail.Load() != 0 || f.ok.Load() == 0 {
			t.Errorf("after the child died: %s; want the parent to serve every exchange", f)
		}
	}
	select {
	case <-parent.done:
		t.Fatal("the parent exited")
	default:
	}
}
