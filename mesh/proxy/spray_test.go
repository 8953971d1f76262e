package proxy_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

const steadyName = "udp-capture~default~steady"

// The steady pod and the spray pod's second source address (a pod has
// 64,512 unprivileged ports per address; the spray needs more).
var (
	steadyAddr  = netip.MustParsePrefix("10.244.3.2/24")
	steadyGW    = netip.MustParsePrefix("10.244.3.1/24")
	sprayExtra  = netip.MustParsePrefix("10.244.1.3/24")
	sprayDgram  = []byte("spray")
	steadyEvery = time.Millisecond
)

// sprayFigures is what one spray run measured.
type sprayFigures struct {
	ports, limit                     int
	overflow                         float64
	maxSessions                      int
	steadySent, steadyReplies        int64
	rssBase, rssPeak, fdBase, fdPeak int
	sprayRcvbufErrors                int64
	// RcvbufErrors during the run where the steady flow's datagrams are
	// received: its pod (the capture socket and the client), the node
	// (upstream sockets) and the backend.
	steadyRcvbuf, nodeRcvbuf, backRcvbuf int64
	// softnetDrops is the kernel's per-CPU backlog drops during the run,
	// machine-wide (/proc/net/softnet_stat is not per netns).
	softnetDrops int64
	elapsed      time.Duration
}

func (f sprayFigures) steadyRatio() float64 {
	return float64(f.steadyReplies) / float64(f.steadySent)
}

// TestSprayIsBoundedByTheCircuitBreaker: one pod sprays datagrams from
// distinct source ports at one service's VIP while another pod keeps a
// steady flow to another service through the same node proxy. The sprayed
// cluster's max_connections caps the sessions the spray can open; the
// steady flow keeps its replies; the proxy's fds and RSS stay within
// bounds derived from the cap. The overflow counter shows the cap was what
// held (the fault fired). The steady flow has its own backend: the
// sprayed service's backend takes a burst of up to cap datagrams, which
// can overflow its socket (RcvbufErrors in the backend netns, reported),
// and that is the backend's load, not the proxy's. 100,000 ports at
// Envoy's default cap take a few seconds here.
func TestSprayIsBoundedByTheCircuitBreaker(t *testing.T) {
	privileged.Require(t)
	f := runSpray(t, 100000, 1024)
	checkSpray(t, f)
}

// BenchmarkSpray is the same spray, reporting its figures as metrics: go
// test -run '^$' -bench Spray -benchtime 1x.
func BenchmarkSpray(b *testing.B) {
	privileged.Require(b)
	for range b.N {
		f := runSpray(b, 100000, 1024)
		checkSpray(b, f)
		b.ReportMetric(float64(f.ports), "spray-ports")
		b.ReportMetric(f.overflow, "overflow-dgrams")
		b.ReportMetric(float64(f.maxSessions), "max-sessions")
		b.ReportMetric(100*f.steadyRatio(), "steady-replies-%")
		b.ReportMetric(float64(f.rssPeak-f.rssBase)/1024, "rss-growth-MiB")
		b.ReportMetric(float64(f.fdPeak-f.fdBase), "fd-growth")
		b.ReportMetric(float64(f.sprayRcvbufErrors), "spray-RcvbufErrors")
		b.ReportMetric(f.elapsed.Seconds(), "spray-s")
	}
}

// Bounds on the proxy's growth under spray, from the cap: one upstream
// socket per session plus a few for the rig; per session a goroutine, its
// state and the kernel's socket, well under 32 KiB of RSS, plus 32 MiB for
// the pooled buffers, the test's own clients and the runtime's slack.
func fdBound(limit int) int     { return limit + 64 }
func rssBoundKiB(limit int) int { return limit*32 + 32*1024 }
func checkSpray(t testing.TB, f sprayFigures) {
	t.Helper()
	t.Logf("spray: %d ports in %v, cap %d: overflow %v, max sessions %d, kernel RcvbufErrors in the spray pod %d; steady %d/%d replies (%.3f%%); RSS %d -> %d KiB; fds %d -> %d",
		f.ports, f.elapsed.Round(time.Millisecond), f.limit, f.overflow, f.maxSessions, f.sprayRcvbufErrors,
		f.steadyReplies, f.steadySent, 100*f.steadyRatio(), f.rssBase, f.rssPeak, f.fdBase, f.fdPeak)
	t.Logf("kernel drops during the run: RcvbufErrors steady pod %d, node %d, backend %d; softnet backlog drops (machine-wide) %d",
		f.steadyRcvbuf, f.nodeRcvbuf, f.backRcvbuf, f.softnetDrops)
	if f.overflow == 0 {
		t.Errorf("no overflow counted: the spray never met the cap")
	}
	if f.maxSessions > f.limit {
		t.Errorf("%d sessions open at once, over the cap %d", f.maxSessions, f.limit)
	}
	if f.steadySent == 0 || f.steadyRatio() < 0.999 {
		t.Errorf("the steady flow got %d of %d replies, want at least 99.9%%", f.steadyReplies, f.steadySent)
	}
	if g := f.fdPeak - f.fdBase; g > fdBound(f.limit) {
		t.Errorf("fds grew by %d, over the bound %d", g, fdBound(f.limit))
	}
	if g := f.rssPeak - f.rssBase; g > rssBoundKiB(f.limit) && !raceEnabled {
		t.Errorf("RSS grew by %d KiB, over the bound %d KiB", g, rssBoundKiB(f.limit))
	}
}

func runSpray(t testing.TB, ports, limit int) sprayFigures {
	t.Helper()
	rig := proxytest.NewRig(t, 2)
	steadyPod := rig.AddPod(t, "pxsteady", "vsteady", steadyAddr, steadyGW)
	if err := netns.AddAddr(rig.Pod, "eth0", sprayExtra); err != nil {
		t.Fatal(err)
	}
	srv := proxytest.NewServer(t)
	sprayed, other := netip.AddrPortFrom(proxytest.BackendAddr(0), 5001), netip.AddrPortFrom(proxytest.BackendAddr(1), 5001)
	rig.StartBackend(t, "sprayed", sprayed, true)
	rig.StartBackend(t, "steady", other, true)
	svcs := []proxytest.Service{
		{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{sprayed}},
		{Name: "svc-b.default", VIP: proxytest.VIP(1), Endpoints: []netip.AddrPort{other}},
	}
	srv.Set(t, node, sprayResources(rig.Pod.Path, steadyPod.Path, svcs, uint32(limit)))
	p := startProxy(t, rig, srv, proxy.DefaultBatch, udpName, steadyName)
	vip := netip.AddrPortFrom(svcs[0].VIP, port)

	steady := &steadyFlow{conn: dialIn(t, steadyPod.Path, netip.AddrPortFrom(svcs[1].VIP, port))}
	if _, _, err := exchange(steady.conn, "warm"); err != nil {
		t.Fatalf("steady flow before the spray: %v", err)
	}
	f := sprayFigures{ports: ports, limit: limit}
	if err := f.resources(&f.rssBase, &f.fdBase); err != nil {
		t.Fatal(err)
	}
	f.rssPeak, f.fdPeak = f.rssBase, f.fdBase
	snmp0 := udpStat(t, rig.Pod.Path, "RcvbufErrors")
	steady0, node0, back0 := udpStat(t, steadyPod.Path, "RcvbufErrors"), udpStat(t, rig.Node.Path, "RcvbufErrors"), udpStat(t, rig.Back.Path, "RcvbufErrors")
	softnet0 := softnetDropped(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { steady.run(stop) })
	var sampleErr error
	wg.Go(func() { sampleErr = f.sample(p, stop) })

	start := time.Now()
	sprayer := proxytest.NewSprayer(t, rig.Pod.Path)
	for i := range ports {
		if err := sprayer.Send(sprayPort(i), vip, sprayDgram); err != nil {
			close(stop)
			wg.Wait()
			t.Fatal(err)
		}
	}
	f.elapsed = time.Since(start)
	f.overflow = settledOverflow(t, p)
	close(stop)
	wg.Wait()
	if sampleErr != nil {
		t.Fatal(sampleErr)
	}
	f.steadySent, f.steadyReplies = steady.sent.Load(), steady.replies.Load()
	f.sprayRcvbufErrors = udpStat(t, rig.Pod.Path, "RcvbufErrors") - snmp0
	f.steadyRcvbuf = udpStat(t, steadyPod.Path, "RcvbufErrors") - steady0
	f.nodeRcvbuf = udpStat(t, rig.Node.Path, "RcvbufErrors") - node0
	f.backRcvbuf = udpStat(t, rig.Back.Path, "RcvbufErrors") - back0
	f.softnetDrops = softnetDropped(t) - softnet0
	return f
}

// sprayPort is the i-th distinct source: ports 1024-65535 on the pod's
// address, then on its second address.
func sprayPort(i int) netip.AddrPort {
	const span = 65536 - 1024
	addr := proxytest.PodAddr.Addr()
	if i >= span {
		addr = sprayExtra.Addr()
	}
	return netip.AddrPortFrom(addr, uint16(1024+i%span))
}

// sprayResources serves svcs to both pods, with the first service's
// cluster capped at limit sessions.
func sprayResources(sprayNetns, steadyNetns string, svcs []proxytest.Service, limit uint32) map[resource.Type][]types.Resource {
	res := proxytest.UDPSnapshot(sprayNetns, time.Minute, svcs, nil)
	for _, r := range res[resource.ClusterType] {
		if c := r.(*clusterv3.Cluster); c.GetName() == "udp:"+svcs[0].Name {
			c.CircuitBreakers = &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
				Priority: corev3.RoutingPriority_DEFAULT, MaxConnections: wrapperspb.UInt32(limit),
			}}}
		}
	}
	res[resource.ListenerType] = append(res[resource.ListenerType],
		proxytest.UDPListener(steadyName, steadyNetns, proxytest.ExactMatcher(svcs, "blackhole"), time.Minute))
	return res
}

// steadyFlow sends one numbered datagram per steadyEvery and counts the
// distinct numbers echoed back.
type steadyFlow struct {
	conn          *net.UDPConn
	sent, replies atomic.Int64
}

func (s *steadyFlow) run(stop <-chan struct{}) {
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 64)
		seen := map[uint64]bool{}
		for {
			_ = s.conn.SetReadDeadline(time.Now().Add(time.Second))
			n, err := s.conn.Read(buf)
			if err != nil {
				// One second of silence after the sender stopped: done.
				select {
				case <-stop:
					return
				default:
					continue
				}
			}
			if n == 8 && !seen[binary.BigEndian.Uint64(buf)] {
				seen[binary.BigEndian.Uint64(buf)] = true
				s.replies.Add(1)
			}
		}
	})
	tick := time.NewTicker(steadyEvery)
	defer tick.Stop()
	msg := make([]byte, 8)
	for seq := uint64(1); ; seq++ {
		select {
		case <-stop:
			wg.Wait()
			return
		case <-tick.C:
		}
		binary.BigEndian.PutUint64(msg, seq)
		if _, err := s.conn.Write(msg); err == nil {
			s.sent.Add(1)
		}
	}
}

// sample records the peak RSS, fd count and the spray's session count
// until stop or a failed reading.
func (f *sprayFigures) sample(p *proxy.Proxy, stop <-chan struct{}) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var rss, fds int
		if err := f.resources(&rss, &fds); err != nil {
			return err
		}
		f.rssPeak, f.fdPeak = max(f.rssPeak, rss), max(f.fdPeak, fds)
		if l := p.UDPListener(udpName); l != nil {
			f.maxSessions = max(f.maxSessions, len(l.Sessions()))
		}
		select {
		case <-stop:
			return nil
		case <-tick.C:
		}
	}
}

// resources reads this process's RSS (KiB, VmRSS) and open fd count: the
// proxy runs in it.
func (f *sprayFigures) resources(rss, fds *int) error {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return err
	}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			if *rss, err = strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB")); err != nil {
				return fmt.Errorf("VmRSS %q: %w", rest, err)
			}
			found = true
		}
	}
	if !found {
		return errors.New("no VmRSS in /proc/self/status")
	}
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	*fds = len(es)
	return nil
}

// settledOverflow waits until the proxy has worked through the spray (the
// overflow count stops moving) and returns it.
func settledOverflow(t testing.TB, p *proxy.Proxy) float64 {
	t.Helper()
	read := func() float64 {
		v, err := p.Metrics().Value("aether_proxy_cluster_upstream_cx_overflow_total", map[string]string{"cluster": "udp:svc-a.default"})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	last := read()
	for {
		time.Sleep(300 * time.Millisecond)
		v := read()
		if v == last {
			return v
		}
		last = v
	}
}

func dialIn(t testing.TB, netnsPath string, dst netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := transparent.DialUDP(netnsPath, netip.AddrPort{}, dst, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func udpStat(t testing.TB, netnsPath, name string) int64 {
	t.Helper()
	s, err := proxytest.UDPStats(netnsPath)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := s[name]
	if !ok {
		t.Fatalf("no Udp %s in /proc/net/snmp of %s", name, netnsPath)
	}
	return v
}

// softnetDropped sums the dropped column of /proc/net/softnet_stat: packets
// the per-CPU input backlog refused (net.core.netdev_max_backlog).
func softnetDropped(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			t.Fatalf("softnet_stat line %q", line)
		}
		n, err := strconv.ParseInt(fields[1], 16, 64)
		if err != nil {
			t.Fatalf("softnet_stat dropped %q: %v", fields[1], err)
		}
		sum += n
	}
	return sum
}
