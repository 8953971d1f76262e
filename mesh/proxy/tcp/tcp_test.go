package tcp

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/internal/accept/accepttest"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
)

// The listener and its clients stay on the root namespace's loopback, so
// these tests need no privilege; 127.0.0.1 plays the ClusterIP.
var loopback = netip.MustParseAddr("127.0.0.1")

const svc = "tcp:svc-a.default"

type clusters map[string]*cluster.Cluster

func (c clusters) Active(name string) *cluster.Cluster { return c[name] }

// backend serves every connection with fn on a loopback port until test
// cleanup, and returns the cluster that points at it.
func backend(t testing.TB, fn func(c *net.TCPConn)) clusters {
	t.Helper()
	ln, err := net.ListenTCP("tcp4", net.TCPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.AcceptTCP()
			if err != nil {
				return
			}
			wg.Go(func() { defer c.Close(); fn(c) })
		}
	})
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	a := &cluster.Assignment{Name: svc, Endpoints: []cluster.Endpoint{{Addr: ln.Addr().(*net.TCPAddr).AddrPort(), Weight: 1}}}
	return clusters{svc: cluster.New(&cluster.Spec{Name: svc, Kind: cluster.Static, Static: a, ConnectTimeout: 5 * time.Second})}
}

func spec(idle time.Duration) *listener.Spec {
	return &listener.Spec{
		Name:   "tcp-capture~default~client",
		Socket: listener.Socket{Protocol: corev3.SocketAddress_TCP, Addr: netip.AddrPortFrom(loopback, 0)},
		TCP: &listener.TCP{Chains: []*listener.Chain{{
			Name: svc, Prefixes: []netip.Prefix{netip.PrefixFrom(loopback, 32)}, Cluster: svc, IdleTimeout: idle,
		}}},
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func listen(t *testing.T, s *listener.Spec, cs Clusters) (*Listener, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	l, err := Listen(s, cs, Options{Log: quiet(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, m
}

func dial(t *testing.T, l *Listener) *net.TCPConn {
	t.Helper()
	c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(l.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	// A safety net only: a test that needs it has already failed.
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func value(t *testing.T, m *metrics.Metrics, family string) float64 {
	t.Helper()
	v, err := m.Value(family, map[string]string{"listener": "tcp-capture~default~client"})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// A client that half-closes after its request still gets the whole reply:
// the backend answers only once it has read the client's FIN, which the
// proxy must pass on while keeping the reply direction open.
func TestHalfCloseKeepsTheReplyFlowing(t *testing.T) {
	cs := backend(t, func(c *net.TCPConn) {
		n, err := io.Copy(io.Discard, c)
		if err != nil {
			return
		}
		_, _ = fmt.Fprintf(c, "read %d bytes to EOF", n)
	})
	l, m := listen(t, spec(time.Hour), cs)
	c := dial(t, l)
	req := strings.Repeat("x", 100<<10)
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(c)
	if want := fmt.Sprintf("read %d bytes to EOF", len(req)); err != nil || string(got) != want {
		t.Fatalf("reply after half-close: %q, %v; want %q", got, err, want)
	}
	if v := value(t, m, "aether_proxy_tcp_idle_timeouts_total"); v != 0 {
		t.Errorf("idle timeouts %v on a connection that was never idle", v)
	}
}

// With a short idle_timeout, a connection on which nothing moves is closed
// on both sides and counted; the backend's own read is the witness for
// the upstream side.
func TestIdleTimeoutClosesBothSides(t *testing.T) {
	upstream := make(chan error, 1)
	cs := backend(t, func(c *net.TCPConn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, c)
		upstream <- err
	})
	l, m := listen(t, spec(200*time.Millisecond), cs)
	c := dial(t, l)
	if _, err := io.WriteString(c, "hello"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("downstream was not closed by the idle timeout: %v", err)
	}
	if err := <-upstream; err != nil {
		t.Fatalf("upstream was not closed by the idle timeout: %v", err)
	}
	if v := value(t, m, "aether_proxy_tcp_idle_timeouts_total"); v != 1 {
		t.Fatalf("idle timeouts counted %v, want 1", v)
	}
}

// An upstream reset closes the downstream connection too, instead of
// half-closing it and waiting on a client that may never close its side:
// the proxy holds no connection afterwards although the client keeps its
// socket open and silent.
func TestUpstreamResetClosesBothSides(t *testing.T) {
	reset := make(chan struct{})
	cs := backend(t, func(c *net.TCPConn) {
		<-reset
		// Closed with linger 0: an RST, not a FIN.
		_ = c.SetLinger(0)
	})
	l, _ := listen(t, spec(time.Hour), cs)
	c := dial(t, l)
	waitTracked(t, l, 2, "the proxy to hold both connections")
	close(reset)
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the client read data from a backend that sent none")
	}
	waitTracked(t, l, 0, "the proxy to release both connections after the upstream reset")
}

// waitTracked waits until the listener holds n connections.
func waitTracked(t *testing.T, l *Listener, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tracked(l) != n {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: it holds %d connections", what, tracked(l))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func tracked(l *Listener) int { return l.loop.Held() }

// A chain whose cluster is not active closes the connection and counts it
// as no_cluster, not as an upstream error.
func TestNoActiveClusterIsCountedAsSuch(t *testing.T) {
	l, m := listen(t, spec(time.Hour), clusters{})
	c := dial(t, l)
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("connection with no cluster was not closed: %v", err)
	}
	for family, want := range map[string]float64{
		"aether_proxy_tcp_no_cluster_total": 1,
		"aether_proxy_tcp_errors_total":     0,
	} {
		if v := value(t, m, family); v != want {
			t.Errorf("%s = %v, want %v", family, v, want)
		}
	}
}

// A failing accept on a TCP listener is counted in its own family and
// backs off (the accept package's tests hold the whole schedule), under
// the bubble's fake time.
func TestAcceptErrorsAreCountedAndBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acc := accepttest.New(
			accepttest.Fail[*net.TCPConn](syscall.EMFILE),
			accepttest.Fail[*net.TCPConn](syscall.EMFILE),
			accepttest.Fail[*net.TCPConn](syscall.ENFILE),
		)
		var log accepttest.Log
		m := metrics.New()
		s := spec(time.Hour)
		s.TCP = &listener.TCP{}
		l := serve(s, acc, clusters{}, Options{Log: log.Logger(), Metrics: m}, realClock)
		<-acc.Spent()
		_ = l.Close()
		ms := time.Millisecond
		if gaps, want := acc.Gaps(), []time.Duration{5 * ms, 10 * ms, 20 * ms}; !slices.Equal(gaps, want) {
			t.Errorf("waits between accepts %v, want %v", gaps, want)
		}
		if v := value(t, m, "aether_proxy_tcp_accept_errors_total"); v != 3 {
			t.Errorf("accept errors counted %v, want 3", v)
		}
		if n := len(log.Records()); n != 1 {
			t.Errorf("%d log lines for 3 failures within 35ms, want 1", n)
		}
	})
}

// A connection that trickles keeps its upstream past several idle
// windows: the bytes move by splice, unseen by the proxy, and the idle
// timeout reads the kernel's record of the last data each socket
// received. Reading only the proxy's own activity, it closed this
// connection at its first window.
func TestTrickleOutlivesTheIdleTimeout(t *testing.T) {
	got := make(chan int, 1)
	cs := backend(t, func(c *net.TCPConn) {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		got <- int(n)
	})
	const idle = 300 * time.Millisecond
	l, m := listen(t, spec(idle), cs)
	c := dial(t, l)
	const sends = 12 // 12 x 100 ms: four idle windows
	for range sends {
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatalf("write after %s of trickle: %v", idle, err)
		}
		time.Sleep(idle / 3) // the trickle's pace, a third of the window
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if n := <-got; n != sends {
		t.Fatalf("the backend read %d bytes to EOF, want %d: the trickle was cut", n, sends)
	}
	if v := value(t, m, "aether_proxy_tcp_idle_timeouts_total"); v != 0 {
		t.Fatalf("idle timeouts %v on a connection that moved a byte every %s", v, idle/3)
	}
}
