package proxy_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// BenchmarkUDPProxy puts the proxied path (client pod → capture → proxy →
// node → backend) beside the direct one (client pod → node forwarding →
// the same backend) in one run, for each payload size and UDP batch size.
//
// Reported per sub-benchmark:
//   - direct-dgram/s, proxied-dgram/s and proxied/direct: round-trip
//     datagrams per second with 32 in flight, and their ratio (target ≥ 0.5);
//   - p99-direct-us, p99-proxied-us and p99-added-us: one-at-a-time
//     round-trip latency;
//   - proxy-cpu-ns/dgram: this process's CPU (getrusage) per round trip on
//     the proxied path minus the same on the direct path. Client and
//     backend run in this process on both paths, so the difference is the
//     proxy's share (its two socket hops each way and its own work).
func BenchmarkUDPProxy(b *testing.B) {
	privileged.Require(b)
	rig := proxytest.NewRig(b, 1)
	srv := proxytest.NewServer(b)
	be := netip.AddrPortFrom(proxytest.BackendAddr(0), 5001)
	rig.StartBackend(b, "echo", be, true)
	svc := proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{be}}
	srv.Set(b, node, proxytest.UDPSnapshot(rig.Pod.Path, time.Minute, []proxytest.Service{svc}, nil))
	direct := rig.Dial(b, be)
	for _, batch := range []int{1, 8} {
		for _, size := range []int{64, 1200} {
			b.Run(fmt.Sprintf("size=%d/batch=%d", size, batch), func(b *testing.B) {
				p := startProxy(b, rig, srv, batch, udpName)
				_ = p
				proxied := rig.Dial(b, netip.AddrPortFrom(svc.VIP, port))
				payload := make([]byte, size)
				// Warm both paths: session, ARP, neighbour entries.
				for _, c := range []*net.UDPConn{direct, proxied} {
					if _, err := roundTrips(c, payload, 100); err != nil {
						b.Fatal(err)
					}
				}
				b.ResetTimer()
				dRate, dCPU, err := throughput(direct, payload, b.N)
				if err != nil {
					b.Fatal(err)
				}
				pRate, pCPU, err := throughput(proxied, payload, b.N)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				const samples = 2000
				dLat, err := roundTrips(direct, payload, samples)
				if err != nil {
					b.Fatal(err)
				}
				pLat, err := roundTrips(proxied, payload, samples)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(dRate, "direct-dgram/s")
				b.ReportMetric(pRate, "proxied-dgram/s")
				b.ReportMetric(pRate/dRate, "proxied/direct")
				b.ReportMetric(us(p99(dLat)), "p99-direct-us")
				b.ReportMetric(us(p99(pLat)), "p99-proxied-us")
				b.ReportMetric(us(p99(pLat)-p99(dLat)), "p99-added-us")
				b.ReportMetric(float64(pCPU-dCPU)/float64(b.N), "proxy-cpu-ns/dgram")
			})
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func p99(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)*99/100]
}

func cpuTime() time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// roundTrips sends n datagrams one at a time and returns each round trip.
func roundTrips(c *net.UDPConn, payload []byte, n int) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	buf := make([]byte, 65535)
	for i := 0; i < n; i++ {
		start := time.Now()
		if _, err := c.Write(payload); err != nil {
			return nil, err
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(buf); err != nil {
			return nil, fmt.Errorf("round trip %d over %s: %w", i, c.RemoteAddr(), err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// throughput keeps window datagrams in flight until n replies arrive and
// returns replies per second and the process CPU spent. A lost datagram
// frees its window slot after a short silence, so loss lowers the rate
// instead of stalling the run.
func throughput(c *net.UDPConn, payload []byte, n int) (float64, time.Duration, error) {
	const window = 32
	tokens := make(chan struct{}, window)
	for range window {
		tokens <- struct{}{}
	}
	done := make(chan struct{})
	var received int
	var rerr error
	var wg sync.WaitGroup
	cpu0, t0 := cpuTime(), time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		buf := make([]byte, 65535)
		silent := 0
		for received < n {
			_ = c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
			if _, err := c.Read(buf); err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					rerr = err
					return
				}
				if silent++; silent > 50 {
					rerr = fmt.Errorf("no reply for 1s after %d of %d", received, n)
					return
				}
				for len(tokens) < window {
					tokens <- struct{}{}
				}
				continue
			}
			silent = 0
			received++
			select {
			case tokens <- struct{}{}:
			default:
			}
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for sent := 0; ; sent++ {
		select {
		case <-done:
			wg.Wait()
			elapsed, cpu := time.Since(t0), cpuTime()-cpu0
			if rerr != nil {
				return 0, 0, rerr
			}
			return float64(received) / elapsed.Seconds(), cpu, nil
		case <-tokens:
			if _, err := c.Write(payload); err != nil {
				cancel()
				<-done
				return 0, 0, err
			}
		case <-ctx.Done():
		}
	}
}
