package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

const (
	node    = "node-1"
	udpName = "udp-capture~default~client"
	tcpName = "tcp-capture~default~client"
)

var port = constants.ProxyL4OutboundPort

func quietLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startProxy runs a proxy against srv until test cleanup and waits for the
// named listeners to be running.
func startProxy(t testing.TB, rig *proxytest.Rig, srv *proxytest.Server, batch int, listeners ...string) *proxy.Proxy {
	t.Helper()
	p := proxy.New(proxy.Options{Node: node, XDS: srv.Target, Batch: batch, UpstreamNetns: rig.Node.Path, Log: quietLog()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	waitFor(t, fmt.Sprintf("listeners %v", listeners), func() bool {
		have := p.Listeners()
		for _, l := range listeners {
			found := false
			for _, h := range have {
				found = found || h == l
			}
			if !found {
				return false
			}
		}
		return true
	})
	return p
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// exchange sends msg and returns the reply and its source as the kernel
// reports it on the connected socket.
func exchange(c *net.UDPConn, msg string) (string, netip.AddrPort, error) {
	return exchangeWithin(c, msg, time.Second)
}

// exchangeWithin is exchange with a shorter wait, for datagrams expected to
// be dropped: the positive control in the same test bounds how long a
// delivered reply takes.
func exchangeWithin(c *net.UDPConn, msg string, d time.Duration) (string, netip.AddrPort, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", netip.AddrPort{}, err
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 2048)
	n, src, err := c.ReadFromUDPAddrPort(buf)
	if err != nil {
		return "", netip.AddrPort{}, err
	}
	return string(buf[:n]), src, nil
}

func metric(t testing.TB, p *proxy.Proxy, family string, labels map[string]string) float64 {
	t.Helper()
	v, err := p.Metrics().Value(family, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// metricReaches polls a counter until it equals want or two seconds pass,
// and returns its last value. A counter is bumped after the send it counts
// returns, so a reply can reach the test before its datagram is counted.
func metricReaches(t testing.TB, p *proxy.Proxy, family string, labels map[string]string, want float64) float64 {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		v := metric(t, p, family, labels)
		if v == want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type fixture struct {
	rig      *proxytest.Rig
	srv      *proxytest.Server
	p        *proxy.Proxy
	svcs     []proxytest.Service
	backends []*proxytest.Backend
}

// newFixture builds n UDP services, each with its own backend pod answering
// with its name, behind one capture listener on the client pod.
func newFixture(t *testing.T, n int, idle time.Duration, tcp bool) *fixture {
	t.Helper()
	return newFixturePublishing(t, n, n, idle, tcp)
}

// newFixturePublishing is newFixture with only the first published
// services in the initial snapshot; the rest have backends but no route,
// for a test to add later.
func newFixturePublishing(t *testing.T, n, published int, idle time.Duration, tcp bool) *fixture {
	t.Helper()
	privileged.Require(t)
	f := &fixture{rig: proxytest.NewRig(t, n), srv: proxytest.NewServer(t)}
	for i := range n {
		name := fmt.Sprintf("svc-%c.default", 'a'+i)
		ep := netip.AddrPortFrom(proxytest.BackendAddr(i), uint16(5001+i))
		f.svcs = append(f.svcs, proxytest.Service{Name: name, VIP: proxytest.VIP(i), Endpoints: []netip.AddrPort{ep}})
		f.backends = append(f.backends, f.rig.StartBackend(t, name, ep, false))
	}
	var tcpSvcs []proxytest.Service
	listeners := []string{udpName}
	if tcp {
		tcpSvcs = f.tcpServices(t)
		listeners = append(listeners, tcpName)
	}
	f.srv.Set(t, node, proxytest.UDPSnapshot(f.rig.Pod.Path, idle, f.svcs[:published], tcpSvcs))
	f.p = startProxy(t, f.rig, f.srv, proxy.DefaultBatch, listeners...)
	return f
}

// Per datagram, the matcher's arm is chosen by ipi_addr: each VIP's
// datagrams reach that service's backend and nobody else's, the reply's
// source is VIP:18082 (a connected client accepts nothing else), and the
// backend sees the proxy's node-side address, not the client's.
func TestUDPSelectsClusterByDestination(t *testing.T) {
	f := newFixture(t, 2, time.Minute, false)
	const n = 20
	for i, s := range f.svcs {
		c := f.rig.Dial(t, netip.AddrPortFrom(s.VIP, port))
		for k := range n {
			reply, src, err := exchange(c, fmt.Sprintf("to-%d-%d", i, k))
			if err != nil {
				t.Fatalf("%s datagram %d: no reply: %v", s.Name, k, err)
			}
			if reply != s.Name {
				t.Fatalf("%s datagram %d answered by %q", s.Name, k, reply)
			}
			if want := netip.AddrPortFrom(s.VIP, port); src != want {
				t.Fatalf("%s reply came from %s, want %s", s.Name, src, want)
			}
		}
	}
	for i, b := range f.backends {
		if b.Got() != n {
			t.Errorf("backend %s received %d datagrams, want %d", b.Name, b.Got(), n)
		}
		for src := range b.Sources() {
			if src.Addr() != proxytest.NodeBackSide.Addr() {
				t.Errorf("backend %s saw source %s, want the node's %s", b.Name, src, proxytest.NodeBackSide.Addr())
			}
		}
		if got := metricReaches(t, f.p, "aether_proxy_cluster_upstream_tx_datagrams_total", map[string]string{"cluster": "udp:" + f.svcs[i].Name}, n); got != n {
			t.Errorf("cluster udp:%s counted %v datagrams, want %d", f.svcs[i].Name, got, n)
		}
	}
	if got := metricReaches(t, f.p, "aether_proxy_udp_downstream_tx_datagrams_total", map[string]string{"listener": udpName}, 2*n); got != 2*n {
		t.Errorf("listener sent %v replies, want %d", got, 2*n)
	}
}

// A VIP with no arm takes on_no_match, the blackhole: nothing is delivered
// anywhere, no session is made, and the drop is counted on the listener and
// the cluster. The served VIP in the same run is the control that the path
// delivers at all.
func TestUDPNoMatchIsBlackholedAndCounted(t *testing.T) {
	f := newFixture(t, 1, time.Minute, false)
	if _, _, err := exchange(f.rig.Dial(t, netip.AddrPortFrom(f.svcs[0].VIP, port)), "control"); err != nil {
		t.Fatalf("control: the routed VIP got no reply: %v", err)
	}
	stray := f.rig.Dial(t, netip.AddrPortFrom(proxytest.VIP(99), port))
	const n = 5
	for range n {
		if reply, src, err := exchangeWithin(stray, "stray", 200*time.Millisecond); err == nil {
			t.Fatalf("a datagram for an unrouted VIP was answered with %q from %s", reply, src)
		}
	}
	if got := f.backends[0].Got(); got != 1 {
		t.Errorf("backend received %d datagrams, want only the control's 1", got)
	}
	if got := metricReaches(t, f.p, "aether_proxy_udp_dropped_total", map[string]string{"listener": udpName, "reason": "none_healthy"}, n); got != n {
		t.Errorf("listener counted %v blackholed datagrams, want %d", got, n)
	}
	if got := metricReaches(t, f.p, "aether_proxy_cluster_none_healthy_total", map[string]string{"cluster": "blackhole"}, n); got != n {
		t.Errorf("blackhole cluster counted %v, want %d", got, n)
	}
	if got := metricReaches(t, f.p, "aether_proxy_udp_sessions_total", map[string]string{"listener": udpName}, 1); got != 1 {
		t.Errorf("%v sessions were made, want 1 (the control's)", got)
	}
}

// A session is per downstream 5-tuple: one socket's datagrams share one
// upstream socket (the backend sees one source port), a second client
// socket gets its own, and both end after the idle timeout, after which
// traffic makes a new session.
func TestUDPSessionsPerFiveTupleWithIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	f := newFixture(t, 1, idle, false)
	vip := netip.AddrPortFrom(f.svcs[0].VIP, port)
	c1, c2 := f.rig.Dial(t, vip), f.rig.Dial(t, vip)
	for range 3 {
		for _, c := range []*net.UDPConn{c1, c2} {
			if _, _, err := exchange(c, "x"); err != nil {
				t.Fatal(err)
			}
		}
	}
	l := f.p.UDPListener(udpName)
	if got := len(l.Sessions()); got != 2 {
		t.Fatalf("%d sessions for 2 client sockets, want 2", got)
	}
	srcs := f.backends[0].Sources()
	if len(srcs) != 2 {
		t.Fatalf("backend saw %d upstream sources, want 2 (one per session): %v", len(srcs), srcs)
	}
	for s, k := range srcs {
		if k != 3 {
			t.Errorf("upstream source %s carried %d datagrams, want 3", s, k)
		}
	}
	waitFor(t, "idle sessions to expire", func() bool { return len(l.Sessions()) == 0 })
	if got := metricReaches(t, f.p, "aether_proxy_udp_sessions_active", map[string]string{"listener": udpName}, 0); got != 0 {
		t.Errorf("active sessions gauge reads %v after expiry, want 0", got)
	}
	if _, _, err := exchange(c1, "again"); err != nil {
		t.Fatal(err)
	}
	if got := metricReaches(t, f.p, "aether_proxy_udp_sessions_total", map[string]string{"listener": udpName}, 3); got != 3 {
		t.Errorf("sessions_total %v after re-use, want 3", got)
	}
	if got := len(f.backends[0].Sources()); got != 3 {
		t.Errorf("backend saw %d upstream sources, want 3 (new session after idle)", got)
	}
}

// Adding a service and removing another while a session is live keeps the
// untouched session: the backend keeps seeing the same upstream source port
// (the same upstream socket), the new service routes at once, and the
// removed one is dropped into the blackhole.
func TestUpdateKeepsOtherSessions(t *testing.T) {
	f := newFixturePublishing(t, 3, 2, time.Minute, false)
	a := f.rig.Dial(t, netip.AddrPortFrom(f.svcs[0].VIP, port))
	b := f.rig.Dial(t, netip.AddrPortFrom(f.svcs[1].VIP, port))
	for _, c := range []*net.UDPConn{a, b} {
		if _, _, err := exchange(c, "before"); err != nil {
			t.Fatal(err)
		}
	}
	before := f.backends[0].Sources()
	c := f.rig.Dial(t, netip.AddrPortFrom(f.svcs[2].VIP, port))
	// svc-c routing is the sign the update landed, so it must not route
	// before the update is published.
	if reply, _, err := exchangeWithin(c, "early", 200*time.Millisecond); err == nil {
		t.Fatalf("svc-c answered %q before it was published; its routing proves nothing about the update", reply)
	}
	// svc-b leaves, svc-c arrives.
	next := []proxytest.Service{f.svcs[0], f.svcs[2]}
	f.srv.Set(t, node, proxytest.UDPSnapshot(f.rig.Pod.Path, time.Minute, next, nil))
	// svc-c routes only once the new LDS (its arm) is applied and its
	// cluster is warm, which takes its EDS, subscribed only after the CDS
	// response that adds it. That same CDS response removes svc-b's
	// cluster, so svc-b's session is closed before svc-c can answer.
	waitFor(t, "svc-c to route", func() bool {
		reply, _, err := exchangeWithin(c, "new", 200*time.Millisecond)
		return err == nil && reply == f.svcs[2].Name
	})
	if reply, _, err := exchange(a, "after"); err != nil || reply != f.svcs[0].Name {
		t.Fatalf("svc-a after the update: %q, %v", reply, err)
	}
	after := f.backends[0].Sources()
	if len(after) != 1 || len(before) != 1 {
		t.Fatalf("svc-a's backend saw upstream sources %v before and %v after; the session was replaced", before, after)
	}
	for s := range before {
		if after[s] != 2 {
			t.Errorf("svc-a's session source %s carried %d datagrams, want 2 (one before, one after)", s, after[s])
		}
	}
	gotB := f.backends[1].Got()
	if reply, _, err := exchangeWithin(b, "gone", 200*time.Millisecond); err == nil {
		t.Errorf("removed svc-b still answered %q", reply)
	}
	if f.backends[1].Got() != gotB {
		t.Errorf("removed svc-b's backend still received datagrams")
	}
	for _, k := range f.p.UDPListener(udpName).Sessions() {
		if k.Dst.Addr() == f.svcs[1].VIP {
			t.Errorf("svc-b's session %v outlived its route", k)
		}
	}
}

// The proxy's upstream egress leaves from the node netns and carries no
// mark there: kube-proxy's KUBE-FIREWALL drops 0xae7e on a node. Counters
// on the backend port split packets with the passthrough mark from those
// without; one datagram sent with the mark from the same netns is the
// control that the marked counter can count.
func TestUpstreamCarriesNoMark(t *testing.T) {
	f := newFixture(t, 1, time.Minute, false)
	ctr, err := proxytest.InstallMarkCounters(f.rig.Node, f.svcs[0].Endpoints[0].Port(), constants.CapturePassthroughFwMark)
	if err != nil {
		t.Fatal(err)
	}
	const n = 10
	c := f.rig.Dial(t, netip.AddrPortFrom(f.svcs[0].VIP, port))
	for range n {
		if _, _, err := exchange(c, "m"); err != nil {
			t.Fatal(err)
		}
	}
	ctl, err := transparent.DialUDP(f.rig.Node.Path, netip.AddrPort{}, f.svcs[0].Endpoints[0], transparent.Options{Mark: constants.CapturePassthroughFwMark})
	if err != nil {
		t.Fatal(err)
	}
	defer ctl.Close()
	if _, err := ctl.Write([]byte("marked control")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backend to see all datagrams", func() bool { return f.backends[0].Got() == n+1 })
	marked, unmarked, err := ctr.Read()
	if err != nil {
		t.Fatal(err)
	}
	if marked != 1 || unmarked != n {
		t.Fatalf("node netns output saw %d marked and %d unmarked packets to the backend, want 1 (the control) and %d", marked, unmarked, n)
	}
}

// tcpServices starts one TCP backend per UDP service, on the same
// ClusterIP and backend pod but its own port, answering with its name.
func (f *fixture) tcpServices(t *testing.T) []proxytest.Service {
	var out []proxytest.Service
	for i, s := range f.svcs {
		ep := netip.AddrPortFrom(s.Endpoints[0].Addr(), uint16(6001+i))
		name := "tcp-" + s.Name
		ln, err := transparent.ListenTCP(f.rig.Back.Path, ep, transparent.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				_, _ = c.Write([]byte(name))
				_ = c.Close()
			}
		}()
		out = append(out, proxytest.Service{Name: s.Name, VIP: s.VIP, Endpoints: []netip.AddrPort{ep}})
	}
	return out
}

// TCP on the same 18082: the accepted socket's local address is the
// original destination, and it alone picks the filter chain. UDP and TCP
// services sharing a ClusterIP each reach their own backend; a VIP no chain
// matches is closed and counted.
func TestTCPFilterChainByLocalAddress(t *testing.T) {
	f := newFixture(t, 2, time.Minute, true)
	dial := func(vip netip.Addr) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		c, err := transparent.DialTCP(ctx, f.rig.Pod.Path, netip.AddrPortFrom(vip, port), transparent.Options{})
		if err != nil {
			return "", err
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		return string(b), err
	}
	for _, s := range f.svcs {
		got, err := dial(s.VIP)
		if err != nil || got != "tcp-"+s.Name {
			t.Errorf("TCP to %s:%d: got %q, %v; want %q", s.VIP, port, got, err, "tcp-"+s.Name)
		}
		reply, _, err := exchange(f.rig.Dial(t, netip.AddrPortFrom(s.VIP, port)), "u")
		if err != nil || reply != s.Name {
			t.Errorf("UDP to %s:%d: got %q, %v; want %q", s.VIP, port, reply, err, s.Name)
		}
		if got := metricReaches(t, f.p, "aether_proxy_tcp_connections_total", map[string]string{"listener": tcpName, "cluster": "tcp:" + s.Name}, 1); got != 1 {
			t.Errorf("tcp:%s counted %v connections, want 1", s.Name, got)
		}
	}
	if got, _ := dial(proxytest.VIP(99)); got != "" {
		t.Errorf("a VIP with no filter chain was answered %q", got)
	}
	waitFor(t, "the unmatched connection to be counted", func() bool {
		return metric(t, f.p, "aether_proxy_tcp_no_filter_chain_match_total", map[string]string{"listener": tcpName}) == 1
	})
}
