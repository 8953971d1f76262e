package h2_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
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
