package h2_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"

	"golang.org/x/net/http2"
)

// BenchmarkMeshPath is one request through both hops on loopback: an h2c
// client to the outbound listener, h2 over mTLS to the inbound listener,
// HTTP/1.1 to the app. It is the in-process half of suites/mtls's
// benchmark, for profiling the proxy's per-request cost.
func BenchmarkMeshPath(b *testing.B) {
	m := newMesh(b, meshConfig{}, "sa-a")
	addr := m.outbound["sa-a"].Addr().String()
	c := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, _ string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}}
	req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Host = dstAuthority
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := c.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
}

// BenchmarkMeshPathH1 is the rig's load on the in-process path: HTTP/1.1
// from the client over 4 connections, a 1 KB answer, requests in
// parallel. ns/op is the path's throughput cost, both proxies and the app
// on the same cores.
func BenchmarkMeshPathH1(b *testing.B) {
	m := newMesh(b, meshConfig{}, "sa-a")
	addr := m.outbound["sa-a"].Addr().String()
	c := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 4, MaxIdleConnsPerHost: 4}}
	b.Cleanup(c.CloseIdleConnections)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			getKB(b, c, addr, dstAuthority)
		}
	})
}

// BenchmarkMeshLatency sends one request at a time, so ns/op is a
// request's round trip: direct to the app, and through both hops. The
// difference is the latency the mesh adds, with the machine otherwise
// idle.
func BenchmarkMeshLatency(b *testing.B) {
	m := newMesh(b, meshConfig{}, "sa-a")
	for _, tc := range []struct{ name, addr, host string }{
		{"direct", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(m.app.port))), "app"},
		{"mesh", m.outbound["sa-a"].Addr().String(), dstAuthority},
	} {
		b.Run(tc.name, func(b *testing.B) {
			c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
			b.Cleanup(c.CloseIdleConnections)
			getKB(b, c, tc.addr, tc.host)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				getKB(b, c, tc.addr, tc.host)
			}
		})
	}
}

// getKB sends one HTTP/1.1 request for the 1 KB answer to addr.
func getKB(b *testing.B, c *http.Client, addr, host string) {
	req, err := http.NewRequest("GET", "http://"+addr+kbPath, nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		b.Error(err)
		return
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || n != int64(len(kb)) {
		b.Errorf("status %d, %d bytes", resp.StatusCode, n)
	}
}
