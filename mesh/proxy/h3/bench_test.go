package h3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// cpuNow is this process's user+system CPU time.
func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// hop is one mTLS HTTP hop, client and server in this process.
type hop struct {
	do    func(ctx context.Context) error
	close func()
}

var body = strings.Repeat("x", 100)

// h3Hop is a twin's client against the HTTP/3 inbound, tickets off.
func h3Hop(b *testing.B) hop {
	ca := newCA(b, "aether.test")
	ep, _, _ := inbound(b, ca, issue(b, ca, "svc-b", false))
	u := twinClient(b, ca, issue(b, ca, "client", false))
	return hop{
		do: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://svc-b.demo.mesh.local/", strings.NewReader(body))
			resp, err := u.RoundTrip(req, ep)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return err
		},
		close: func() { _ = u.Close() },
	}
}

// h2Hop is Go's HTTP/2 over TLS 1.3 with the same certificates: the floor
// the twin replaces.
func h2Hop(b *testing.B) hop {
	ca := newCA(b, "aether.test")
	roots := x509.NewCertPool()
	for _, c := range ca.Bundle().X509Authorities() {
		roots.AddCert(c)
	}
	server, client := issue(b, ca, "svc-b", false), issue(b, ca, "client", false)
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{tlsCert(server)},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots, NextProtos: []string{"h2"}, SessionTicketsDisabled: true})
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})}
	if err := http2.ConfigureServer(srv, nil); err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.Serve(l) }()
	// No Accept-Encoding added, as the twin adds none.
	tr := &http2.Transport{DisableCompression: true, TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: sni,
		Certificates: []tls.Certificate{tlsCert(client)}}}
	url := "https://" + l.Addr().String() + "/"
	return hop{
		do: func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return err
		},
		close: func() { tr.CloseIdleConnections(); _ = srv.Close() },
	}
}

// BenchmarkHopCPU puts the twin's HTTP/3 hop beside the HTTP/2-over-TLS
// floor on the same traffic (100-byte bodies, one pooled connection,
// 1 and 16 requests in flight), client and server in this process, on
// loopback. Reported: cpu-ns/req per protocol (getrusage of the whole
// process, so both ends are counted), allocs/req and B/req (the heap
// allocations behind it, both ends) and h3/h2 of the CPU, the ratio the release
// gates (≤ 1.5, target ≤ 1.3) on the netns path.
func BenchmarkHopCPU(b *testing.B) {
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			var perReq [2]cost
			for i, mk := range []func(*testing.B) hop{h2Hop, h3Hop} {
				// Both ends' goroutines carry the label, so a CPU
				// profile splits by protocol: pprof -tagfocus proto=h3.
				pprof.Do(context.Background(), pprof.Labels("proto", []string{"h2", "h3"}[i]), func(context.Context) {
					h := mk(b)
					perReq[i] = measure(b, h, inflight)
					h.close()
				})
			}
			for i, proto := range []string{"h2", "h3"} {
				b.ReportMetric(perReq[i].cpu, proto+"-cpu-ns/req")
				b.ReportMetric(perReq[i].allocs, proto+"-allocs/req")
				b.ReportMetric(perReq[i].bytes, proto+"-B/req")
			}
			b.ReportMetric(perReq[1].cpu/perReq[0].cpu, "h3/h2")
		})
	}
}

// cost is what one request costs the whole process: CPU (user+system),
// heap allocations and bytes allocated.
type cost struct{ cpu, allocs, bytes float64 }

// measure runs b.N requests with inflight workers after a warm-up that
// opens the connection, and returns their cost per request.
func measure(b *testing.B, h hop, inflight int) cost {
	ctx := context.Background()
	for range 50 {
		if err := h.do(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	start := cpuNow(b)
	var wg sync.WaitGroup
	var next sync.Mutex
	left := b.N
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				next.Lock()
				if left == 0 {
					next.Unlock()
					return
				}
				left--
				next.Unlock()
				if err := h.do(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	cpu := cpuNow(b) - start
	runtime.ReadMemStats(&m1)
	n := float64(b.N)
	return cost{cpu: float64(cpu) / n, allocs: float64(m1.Mallocs-m0.Mallocs) / n, bytes: float64(m1.TotalAlloc-m0.TotalAlloc) / n}
}
