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
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// overloadDgram is the datagram size the overload runs use.
const overloadDgram = 1200

// overloadRates are the paced rates (Mb/s of UDP payload) each run steps
// through; AETHER_OVERLOAD_RATES (comma-separated) replaces them.
var overloadRates = []int{100, 200, 300, 400, 600, 800, 1000, 1200}

// overloadFor is how long each path is driven at each rate.
const overloadFor = time.Second

// BenchmarkUDPOverload drives one-way 1200-byte datagrams from the client
// pod at paced rates, to the backend pod directly (node forwarding) and to
// VIP:18082 through the proxy, in the same run, and reports for each path
// the loss as the receiver counted it. Every loss is located where it is
// counted: RcvbufErrors from /proc/net/snmp in the pod netns (the capture
// socket) and in the backend netns (the receiver), the proxy's own drop
// counters, and the kernel's per-CPU backlog drops (softnet_stat, which is
// machine-wide, so other traffic on the machine adds to it); what none
// accounts for is reported as unaccounted.
// The last two sub-benchmarks send as fast as the client can: with one
// datagram per send, and with eight per UDP_SEGMENT send as QUIC stacks do
// (the capture socket's UDP_GRO then takes them as one buffer).
//
//	go test -run '^$' -bench UDPOverload -benchtime 1x ./mesh/proxy/
func BenchmarkUDPOverload(b *testing.B) {
	privileged.Require(b)
	rig := proxytest.NewRig(b, 1)
	srv := proxytest.NewServer(b)
	be := netip.AddrPortFrom(proxytest.BackendAddr(0), 5001)
	sink := startSink(b, rig.Back.Path, be)
	svc := proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{be}}
	srv.Set(b, node, proxytest.UDPSnapshot(rig.Pod.Path, time.Minute, []proxytest.Service{svc}, nil))
	p := startProxy(b, rig, srv, proxy.DefaultBatch, udpName)
	paths := []overloadPath{
		{name: "direct", conn: rig.Dial(b, be)},
		{name: "mesh", conn: rig.Dial(b, netip.AddrPortFrom(svc.VIP, port))},
	}
	// Warm the mesh path: its session exists before anything is measured.
	for sink.total() == 0 {
		if _, err := paths[1].conn.Write(make([]byte, overloadDgram)); err != nil {
			b.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(b, "the mesh session", func() bool { return len(p.UDPListener(udpName).Sessions()) == 1 })
	sink.settle()
	for _, mbps := range rates(b) {
		b.Run(fmt.Sprintf("rate=%dMbps", mbps), func(b *testing.B) {
			for range b.N {
				for _, path := range paths {
					r := path.run(b, rig, p, sink, mbps)
					r.report(b, path.name)
				}
			}
		})
	}
	for _, segs := range []int{1, 8} {
		name := "unpaced"
		if segs > 1 {
			name = fmt.Sprintf("unpaced-segmented-%d", segs)
		}
		b.Run(name, func(b *testing.B) {
			var got [2]overloadResult
			for range b.N {
				for i, path := range paths {
					path.segs = segs
					got[i] = path.run(b, rig, p, sink, 0)
					got[i].report(b, path.name)
				}
			}
			b.ReportMetric(got[1].deliveredRate()/got[0].deliveredRate(), "mesh/direct")
		})
	}
}

func rates(b *testing.B) []int {
	env := os.Getenv("AETHER_OVERLOAD_RATES")
	if env == "" {
		return overloadRates
	}
	var out []int
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("AETHER_OVERLOAD_RATES: %q is not a rate in Mb/s", f)
		}
		out = append(out, n)
	}
	return out
}

type overloadPath struct {
	name string
	conn *net.UDPConn
	// segs is how many datagrams one send carries (UDP_SEGMENT when > 1).
	segs int
}

type overloadResult struct {
	sent, received        int64
	elapsed               time.Duration
	rcvbufPod, rcvbufBack int64
	proxyDropped, softnet int64
	unaccounted           int64
}

func (r overloadResult) lossPct() float64 {
	return 100 * float64(r.sent-r.received) / float64(r.sent)
}

func (r overloadResult) deliveredRate() float64 {
	return float64(r.received) / r.elapsed.Seconds()
}

func (r overloadResult) report(b *testing.B, path string) {
	b.ReportMetric(r.lossPct(), path+"-loss-%")
	b.ReportMetric(float64(r.sent)/r.elapsed.Seconds()*overloadDgram*8/1e6, path+"-sent-Mbps")
	b.ReportMetric(r.deliveredRate()*overloadDgram*8/1e6, path+"-recv-Mbps")
	b.ReportMetric(float64(r.rcvbufPod), path+"-rcvbuf-pod")
	b.ReportMetric(float64(r.rcvbufBack), path+"-rcvbuf-back")
	b.ReportMetric(float64(r.proxyDropped), path+"-proxy-dropped")
	b.ReportMetric(float64(r.softnet), path+"-softnet-dropped")
	b.ReportMetric(float64(r.unaccounted), path+"-unaccounted")
}

// run sends for overloadFor at mbps (0: as fast as possible), waits for
// the receiver to settle, and accounts for every datagram.
func (p overloadPath) run(b *testing.B, rig *proxytest.Rig, px *proxy.Proxy, sink *sink, mbps int) overloadResult {
	b.Helper()
	pod0, back0 := udpStat(b, rig.Pod.Path, "RcvbufErrors"), udpStat(b, rig.Back.Path, "RcvbufErrors")
	proxy0, softnet0 := proxyDrops(b, px), softnetDropped(b)
	recv0 := sink.total()
	sent, elapsed, err := sendPaced(p.conn, mbps, max(p.segs, 1), overloadFor)
	if err != nil {
		b.Fatalf("%s: %v", p.name, err)
	}
	sink.settle()
	r := overloadResult{
		sent: sent, received: sink.total() - recv0, elapsed: elapsed,
		// The capture socket has UDP_GRO: a segmented send it cannot take
		// is dropped whole and counted once, for its segs datagrams.
		rcvbufPod:  (udpStat(b, rig.Pod.Path, "RcvbufErrors") - pod0) * int64(max(p.segs, 1)),
		rcvbufBack: udpStat(b, rig.Back.Path, "RcvbufErrors") - back0,
	}
	r.proxyDropped, r.softnet = proxyDrops(b, px)-proxy0, softnetDropped(b)-softnet0
	r.unaccounted = r.sent - r.received - r.rcvbufPod - r.rcvbufBack - r.proxyDropped - r.softnet
	return r
}

// sendPaced writes overloadDgram-byte datagrams on c for d at mbps of
// payload, catching up in batches when it falls behind the schedule; at
// 0 it sends back to back. Each send carries segs datagrams.
func sendPaced(c *net.UDPConn, mbps, segs int, d time.Duration) (int64, time.Duration, error) {
	pc := ipv4.NewPacketConn(c)
	burst := 64 / segs
	msgs := make([]ipv4.Message, burst)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, overloadDgram*segs)}
		if segs > 1 {
			msgs[i].OOB = segmentCmsg(overloadDgram)
		}
	}
	perSec := float64(mbps) * 1e6 / 8 / overloadDgram
	var sent int64
	start := time.Now()
	for {
		el := time.Since(start)
		if el >= d {
			return sent, el, nil
		}
		due := int64(burst)
		if mbps > 0 {
			due = min((int64(el.Seconds()*perSec)-sent)/int64(segs), int64(burst))
			if due <= 0 {
				time.Sleep(100 * time.Microsecond)
				continue
			}
		}
		n, err := pc.WriteBatch(msgs[:due], 0)
		sent += int64(n * segs)
		if err != nil && !errors.Is(err, unix.ENOBUFS) {
			return sent, time.Since(start), fmt.Errorf("send after %d datagrams: %w", sent, err)
		}
	}
}

// sink counts what reaches the backend address; its receive buffer is
// large so that the receiver is not what limits either path.
type sink struct {
	n  atomic.Int64
	wg sync.WaitGroup
}

func startSink(b *testing.B, netnsPath string, addr netip.AddrPort) *sink {
	b.Helper()
	c, err := transparent.ListenUDP(netnsPath, addr, transparent.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := setRcvbuf(c.UDPConn, 8<<20); err != nil {
		b.Fatal(err)
	}
	s := &sink{}
	s.wg.Go(func() {
		pc := ipv4.NewPacketConn(c.UDPConn)
		msgs := make([]ipv4.Message, 64)
		for i := range msgs {
			msgs[i].Buffers = [][]byte{make([]byte, 2048)}
		}
		for {
			n, err := pc.ReadBatch(msgs, 0)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			s.n.Add(int64(n))
		}
	})
	b.Cleanup(func() { _ = c.Close(); s.wg.Wait() })
	return s
}

func (s *sink) total() int64 { return s.n.Load() }

// settle waits until nothing has arrived for 200 ms.
func (s *sink) settle() {
	last := s.total()
	for {
		time.Sleep(200 * time.Millisecond)
		n := s.total()
		if n == last {
			return
		}
		last = n
	}
}

func setRcvbuf(c *net.UDPConn, n int) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, n)
	}); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("failed to set SO_RCVBUFFORCE %d: %w", n, serr)
	}
	return nil
}

// segmentCmsg is the UDP_SEGMENT control message for size-byte segments.
func segmentCmsg(size int) []byte {
	b := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	binary.NativeEndian.PutUint16(b[unix.CmsgLen(0):], uint16(size))
	return b
}

// proxyDrops sums the capture listener's drop counters, every reason.
func proxyDrops(b *testing.B, p *proxy.Proxy) int64 {
	b.Helper()
	var sum float64
	for family, reasons := range map[string][]string{
		"aether_proxy_udp_dropped_total":                         {metrics.DropNoRoute, metrics.DropNoCluster, metrics.DropNoHealthy, metrics.DropUpstreamError},
		"aether_proxy_udp_downstream_rx_datagrams_dropped_total": {metrics.DropOverflow, metrics.DropDialQueue},
	} {
		for _, r := range reasons {
			v, err := p.Metrics().Value(family, map[string]string{"listener": udpName, "reason": r})
			if err != nil {
				b.Fatal(err)
			}
			sum += v
		}
	}
	return int64(sum)
}
