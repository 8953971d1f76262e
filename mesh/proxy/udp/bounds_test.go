package udp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
)

// capped is static with a max_connections circuit breaker.
func capped(name string, limit uint32, hosts ...netip.AddrPort) *cluster.Cluster {
	c := static(name, hosts...)
	c.Spec.MaxConnections = limit
	return c
}

func listen(t *testing.T, spec string, cs Clusters, o Options) *Listener {
	t.Helper()
	l, err := Listen(udpConfig(t, spec, loopback), cs, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func dialTo(t *testing.T, l *Listener) *net.UDPConn {
	t.Helper()
	c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(l.LocalAddr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// value reads one series; waitValue polls until it reaches want.
func value(t *testing.T, m *metrics.Metrics, family string, labels map[string]string) float64 {
	t.Helper()
	v, err := m.Value(family, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func waitValue(t *testing.T, m *metrics.Metrics, family string, labels map[string]string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for value(t, m, family, labels) < want {
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v, want %v", family, labels, value(t, m, family, labels), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func exchangeOnce(c *net.UDPConn, msg string) (string, error) {
	if _, err := c.Write([]byte(msg)); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 128)
	n, err := c.Read(buf)
	return string(buf[:n]), err
}

// The cluster's max_connections caps its sessions across every listener
// sharing the proxy's breakers: clients beyond it get no session, each of
// their datagrams is counted as overflow on the cluster and the listener,
// and a session that closes frees its place.
func TestSessionsCappedByMaxConnections(t *testing.T) {
	b := startBackend(t, "b")
	cs := &clusters{}
	cs.set(capped("udp:a", 2, b.addr))
	m, br := metrics.New(), NewBreakers()
	l1 := listen(t, "a", cs, Options{Metrics: m, Breakers: br})
	l2 := listen(t, "a", cs, Options{Metrics: m, Breakers: br})
	for i, c := range []*net.UDPConn{dialTo(t, l1), dialTo(t, l1)} {
		if got, err := exchangeOnce(c, "hi"); err != nil || got != "b" {
			t.Fatalf("client %d under the cap: reply %q, %v", i, got, err)
		}
	}
	over := dialTo(t, l2)
	for range 3 {
		if _, err := over.Write([]byte("over")); err != nil {
			t.Fatal(err)
		}
	}
	overflow := map[string]string{"listener": l2.Name(), "reason": metrics.DropOverflow}
	waitValue(t, m, "aether_proxy_udp_downstream_rx_datagrams_dropped_total", overflow, 3)
	if v := value(t, m, "aether_proxy_cluster_upstream_cx_overflow_total", map[string]string{"cluster": "udp:a"}); v != 3 {
		t.Fatalf("cluster overflow %v, want 3", v)
	}
	if n, open := len(l2.Sessions()), br.Open("udp:a"); n != 0 || open != 2 {
		t.Fatalf("over the cap: %d sessions on the second listener, %d open on the cluster; want 0 and 2", n, open)
	}
	if got := b.got.Load(); got != 2 {
		t.Fatalf("backend got %d datagrams, want only the 2 under the cap", got)
	}
	// Closing the first listener closes its sessions and frees the cap.
	if err := l1.Close(); err != nil {
		t.Fatal(err)
	}
	if open := br.Open("udp:a"); open != 0 {
		t.Fatalf("%d sessions still counted after their listener closed", open)
	}
	if got, err := exchangeOnce(over, "again"); err != nil || got != "b" {
		t.Fatalf("after the cap freed: reply %q, %v", got, err)
	}
}

// recorder is an echo backend that keeps every payload in arrival order.
type recorder struct {
	addr netip.AddrPort
	mu   sync.Mutex
	got  []string
}

func startRecorder(t *testing.T) *recorder {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, src, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			r.got = append(r.got, string(buf[:n]))
			r.mu.Unlock()
			_, _ = c.WriteToUDPAddrPort(buf[:n], src)
		}
	})
	t.Cleanup(func() { _ = c.Close(); wg.Wait() })
	return r
}

func (r *recorder) payloads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// The upstream socket is made off the serve loop. With every dial worker
// held, the serve loop still reads the client's datagrams (it is not
// waiting on the dial); once a worker frees, the session's first
// datagrams reach the host in the order they were sent, none lost.
func TestEarlyDatagramsQueueInOrderWhileDialing(t *testing.T) {
	r := startRecorder(t)
	cs := &clusters{}
	cs.set(static("udp:a", r.addr))
	m := metrics.New()
	l := listen(t, "a", cs, Options{Batch: 1, Metrics: m})
	for range dialWorkers {
		l.dials <- struct{}{}
	}
	var freed sync.Once
	free := func() {
		freed.Do(func() {
			for range dialWorkers {
				<-l.dials
			}
		})
	}
	// Runs before the listener closes, should the test stop early.
	t.Cleanup(free)
	c := dialTo(t, l)
	want := []string{"one", "two", "three"}
	for _, p := range want {
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	waitValue(t, m, "aether_proxy_udp_downstream_rx_datagrams_total", map[string]string{"listener": l.Name()}, 3)
	if got := r.payloads(); len(got) != 0 {
		t.Fatalf("host got %q before any upstream socket could be made", got)
	}
	free()
	buf := make([]byte, 64)
	for i := range want {
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(buf); err != nil {
			t.Fatalf("reply %d of %d: %v", i+1, len(want), err)
		}
	}
	if got := r.payloads(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("host got %q, want %q in order", got, want)
	}
}

// A session waiting for replies holds no reply buffer: the buffers come
// from a shared pool for the burst being moved. Many sessions that each
// had a reply and now sit idle must cost far less heap than one
// maxDatagram buffer each.
func TestIdleSessionsHoldNoReplyBuffers(t *testing.T) {
	const sessions = 200
	b := startBackend(t, "b")
	cs := &clusters{}
	cs.set(static("udp:a", b.addr))
	l := listen(t, "a", cs, Options{Batch: 8, Metrics: metrics.New()})
	clients := make([]*net.UDPConn, sessions)
	for i := range clients {
		clients[i] = dialTo(t, l)
	}
	before := heapInUse()
	for i, c := range clients {
		if got, err := exchangeOnce(c, "hi"); err != nil || got != "b" {
			t.Fatalf("client %d: reply %q, %v", i, got, err)
		}
	}
	perSession := (heapInUse() - before) / sessions
	if n := len(l.Sessions()); n != sessions {
		t.Fatalf("%d sessions, want %d", n, sessions)
	}
	if perSession > maxDatagram/4 {
		t.Fatalf("each idle session holds %d bytes of heap, want well under one %d-byte reply buffer", perSession, maxDatagram)
	}
}

func heapInUse() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse)
}

// countingHandler counts log records.
type countingHandler struct{ n atomic.Int64 }

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *countingHandler) Handle(context.Context, slog.Record) error {
	h.n.Add(1)
	return nil
}
func (h *countingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *countingHandler) WithGroup(string) slog.Handler      { return h }

// A capture socket whose reads keep failing (EMFILE here) must not spin or
// flood the log. Over ten seconds of fake time the read is retried with
// exponential backoff up to one second, every failure is counted, and the
// warning is logged at most once per logEvery. Without the backoff the
// loop spins and the reader stops it at spinLimit calls.
func TestReadErrorsBackOff(t *testing.T) {
	const spinLimit = 1000
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int64
		stop := make(chan struct{})
		read := func([]ipv4.Message) (int, error) {
			if calls.Add(1) == spinLimit {
				t.Errorf("%d reads without waiting: the read loop spins", spinLimit)
				<-stop
			}
			return 0, fmt.Errorf("read udp: %w", unix.EMFILE)
		}
		logs := &countingHandler{}
		m := metrics.New()
		cs := &clusters{}
		cs.set()
		l, err := Listen(udpConfig(t, "a", loopback), cs, Options{Metrics: m, Log: slog.New(logs), hooks: hooks{read: read}})
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		n := calls.Load()
		close(stop)
		if err := l.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			t.Fatal(err)
		}
		// 1+2+...+512 ms is about 1 s in ten doublings, then one read per
		// second: about 19 reads in ten seconds.
		if n < 10 || n > 25 {
			t.Fatalf("%d reads in 10 s of failures, want 10 to 25 (exponential backoff capped at %v)", n, maxBackoff)
		}
		if v := value(t, m, "aether_proxy_udp_downstream_rx_errors_total", map[string]string{"listener": l.Name()}); int64(v) != n {
			t.Fatalf("rx errors counted %v, want every one of the %d failed reads", v, n)
		}
		if got := logs.n.Load(); got > 10/int64(logEvery/time.Second)+1 {
			t.Fatalf("%d warnings in 10 s, want at most one per %v", got, logEvery)
		}
	})
}

// Runs of equal-size datagrams become one UDP_SEGMENT message each (the
// last datagram of a run may not be shorter here: a shorter one starts
// its own run), a run stops before it would pass the bytes or segments
// one segmented send may carry, empty datagrams are never packed, and a
// lone datagram goes without the control message.
func TestPackGSO(t *testing.T) {
	msgs := func(sizes ...int) []ipv4.Message {
		out := make([]ipv4.Message, len(sizes))
		for i, n := range sizes {
			out[i].Buffers = [][]byte{make([]byte, n)}
		}
		return out
	}
	cases := []struct {
		sizes      []int
		wantCounts []int
	}{
		{[]int{1200, 1200, 1200, 500, 500, 64}, []int{3, 2, 1}},
		{[]int{1200, 64, 1200}, []int{1, 1, 1}},
		{[]int{40000, 40000}, []int{1, 1}},
		{[]int{30000, 30000, 30000}, []int{2, 1}},
		{slices.Repeat([]int{10}, 100), []int{64, 36}},
		{[]int{0, 0}, []int{1, 1}},
	}
	for _, tc := range cases {
		got, counts := packGSO(msgs(tc.sizes...))
		if fmt.Sprint(counts) != fmt.Sprint(tc.wantCounts) {
			t.Fatalf("sizes %v: packed as %v, want %v", tc.sizes, counts, tc.wantCounts)
		}
		for i, m := range got {
			if gso := len(m.OOB) > 0; gso != (counts[i] > 1) {
				t.Fatalf("sizes %v: message %d carries %d datagrams, UDP_SEGMENT set: %v", tc.sizes, i, counts[i], gso)
			}
		}
	}
}

// A queued burst goes upstream as segmented sends; the host still gets
// each datagram on its own, whole and in order.
func TestSegmentedSendsArriveAsDatagrams(t *testing.T) {
	r := startRecorder(t)
	cs := &clusters{}
	cs.set(static("udp:a", r.addr))
	m := metrics.New()
	l := listen(t, "a", cs, Options{Batch: 8, Metrics: m})
	for range dialWorkers {
		l.dials <- struct{}{}
	}
	var freed sync.Once
	free := func() {
		freed.Do(func() {
			for range dialWorkers {
				<-l.dials
			}
		})
	}
	t.Cleanup(free)
	c := dialTo(t, l)
	var want []string
	for i := range 9 {
		p := fmt.Sprintf("datagram-%d", i)
		if i == 8 {
			p = "last"
		}
		want = append(want, p)
		if _, err := c.Write([]byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	waitValue(t, m, "aether_proxy_udp_downstream_rx_datagrams_total", map[string]string{"listener": l.Name()}, 9)
	free()
	waitValue(t, m, "aether_proxy_cluster_upstream_tx_datagrams_total", map[string]string{"cluster": "udp:a"}, 9)
	deadline := time.Now().Add(5 * time.Second)
	for len(r.payloads()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := r.payloads(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("host got %q, want %q", got, want)
	}
}

// refusesGSO is sendmmsg on a route that refuses segmented sends (EIO):
// it takes plain messages up to the first segmented one.
type refusesGSO struct{ got [][]byte }

func (w *refusesGSO) WriteBatch(ms []ipv4.Message, _ int) (int, error) {
	for i, m := range ms {
		if len(m.OOB) > 0 {
			if i == 0 {
				return 0, fmt.Errorf("sendmmsg: %w", unix.EIO)
			}
			return i, nil
		}
		w.got = append(w.got, bytes.Join(m.Buffers, nil))
	}
	return len(ms), nil
}

// When the route refuses a segmented send, the datagrams it would have
// carried go out plainly, in order, and the session stops segmenting.
func TestSegmentedSendFallsBackOnEIO(t *testing.T) {
	w := &refusesGSO{}
	up := &upstream{pc: w}
	out := make([]ipv4.Message, 0, 4)
	var want []string
	for _, p := range []string{"a", "bb", "cc", "dd"} {
		out = append(out, ipv4.Message{Buffers: [][]byte{[]byte(p)}})
		want = append(want, p)
	}
	sent, err := up.sendBatch(out)
	if err != nil || sent != len(out) {
		t.Fatalf("sent %d of %d: %v", sent, len(out), err)
	}
	if fmt.Sprintf("%s", w.got) != fmt.Sprint(want) {
		t.Fatalf("route got %s, want %v", w.got, want)
	}
	if !up.plain.Load() {
		t.Fatal("the session still segments after EIO")
	}
}

// Datagrams queued for a session whose upstream socket is still being made
// are bounded, and every one that does not go upstream is counted: past
// the queue's bound, and when the session closes before its socket exists.
func TestQueuedDatagramsAreCountedWhenDropped(t *testing.T) {
	cs := &clusters{}
	cs.set(static("udp:a", startBackend(t, "b").addr))
	m := metrics.New()
	l := listen(t, "a", cs, Options{Batch: 1, Metrics: m})
	for range dialWorkers {
		l.dials <- struct{}{}
	}
	var freed sync.Once
	free := func() {
		freed.Do(func() {
			for range dialWorkers {
				<-l.dials
			}
		})
	}
	t.Cleanup(free)
	c := dialTo(t, l)
	big := make([]byte, maxPendingBytes*2/3)
	for range 3 {
		if _, err := c.Write(big); err != nil {
			t.Fatal(err)
		}
	}
	waitValue(t, m, "aether_proxy_udp_downstream_rx_datagrams_total", map[string]string{"listener": l.Name()}, 3)
	dropped := map[string]string{"listener": l.Name(), "reason": metrics.DropDialQueue}
	if v := value(t, m, "aether_proxy_udp_downstream_rx_datagrams_dropped_total", dropped); v != 2 {
		t.Fatalf("%v datagrams dropped past the queue's bound, want 2 (one fits)", v)
	}
	// The arm goes while the socket is still being made: the queued
	// datagram is discarded, and counted.
	l.Update(udpConfig(t, "a", netip.MustParseAddr("127.0.0.2")).UDP)
	if v := value(t, m, "aether_proxy_udp_downstream_rx_datagrams_dropped_total", dropped); v != 3 {
		t.Fatalf("%v datagrams counted dropped after the session closed, want 3", v)
	}
}

// A client's segmented send reaches the capture socket as one UDP_GRO
// buffer; the host must get each datagram as the client cut it, and an
// empty datagram is still one datagram.
func TestGROBufferIsSplitIntoDatagrams(t *testing.T) {
	r := startRecorder(t)
	cs := &clusters{}
	cs.set(static("udp:a", r.addr))
	m := metrics.New()
	l := listen(t, "a", cs, Options{Batch: 8, Metrics: m})
	c := dialTo(t, l)
	var burst []byte
	var want []string
	for i := range 5 {
		seg := bytes.Repeat([]byte{'a' + byte(i)}, 100)
		if i == 4 {
			seg = seg[:50]
		}
		burst = append(burst, seg...)
		want = append(want, string(seg))
	}
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 100) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if _, err := c.Write(burst); err != nil {
		t.Fatal(err)
	}
	if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 0) }); err != nil || serr != nil {
		t.Fatal(err, serr)
	}
	if _, err := c.Write(nil); err != nil {
		t.Fatal(err)
	}
	want = append(want, "")
	waitValue(t, m, "aether_proxy_udp_downstream_rx_datagrams_total", map[string]string{"listener": l.Name()}, float64(len(want)))
	deadline := time.Now().Add(5 * time.Second)
	for len(r.payloads()) < len(want) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := r.payloads(); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("host got %q, want %q", got, want)
	}
}

// When upstream sockets cannot be made (here: the upstream netns does not
// exist; EMFILE would do the same), every new session fails and every
// datagram is counted, but the warning is logged once per logEvery, not
// once per datagram.
func TestUpstreamSocketFailuresAreCountedAndLogLimited(t *testing.T) {
	const clients = 20
	cs := &clusters{}
	cs.set(static("udp:a", startBackend(t, "b").addr))
	m, logs := metrics.New(), &countingHandler{}
	l := listen(t, "a", cs, Options{Metrics: m, Log: slog.New(logs), UpstreamNetns: "/nonexistent/netns"})
	for range clients {
		if _, err := dialTo(t, l).Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	waitValue(t, m, "aether_proxy_cluster_errors_total", map[string]string{"cluster": "udp:a"}, clients)
	waitValue(t, m, "aether_proxy_udp_dropped_total", map[string]string{"listener": l.Name(), "reason": metrics.DropUpstreamError}, clients)
	if n := logs.n.Load(); n != 1 {
		t.Fatalf("%d warnings for %d failed upstream sockets within %v, want 1", n, clients, logEvery)
	}
}

// The reply buffer pool lends at most its capacity at once; a returned
// buffer can be lent again.
func TestBufPoolLendsAtMostItsCapacity(t *testing.T) {
	p := newBufPool(3)
	var held []*[]byte
	for range 3 {
		held = append(held, p.get())
	}
	if b, ok := p.tryGet(); ok {
		t.Fatalf("lent a fourth buffer (%d bytes) from a pool of 3", len(*b))
	}
	p.put(held[0])
	if _, ok := p.tryGet(); !ok {
		t.Fatal("a returned buffer was not lent again")
	}
}
