package h2_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"

	"golang.org/x/net/http2"
)

// TestResponseCopyIsPooled: proxying a response does not allocate a copy
// buffer per request. Each hop copies the upstream body through the
// handler's counting writer, which hides the response writer's ReadFrom,
// so an unpooled io.Copy allocates 32 KiB per hop: 64 KiB per request
// over the two hops, more than everything else the path allocates.
func TestResponseCopyIsPooled(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	addr := m.outbound["sa-a"].Addr().String()
	c := &http.Client{Transport: &http2.Transport{AllowHTTP: true,
		DialTLSContext: func(ctx context.Context, network, _ string, _ *tls.Config) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}}}
	t.Cleanup(c.CloseIdleConnections)
	do := func() {
		req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = dstAuthority
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	for range 20 {
		do()
	}
	const n = 200
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		do()
	}
	runtime.ReadMemStats(&after)
	perReq := (after.TotalAlloc - before.TotalAlloc) / n
	t.Logf("%d bytes allocated per request (client, both hops and the app)", perReq)
	if perReq >= 64<<10 {
		t.Fatalf("%d bytes allocated per request: a copy buffer per hop", perReq)
	}
}
