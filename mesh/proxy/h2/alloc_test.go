package h2_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/net/http2"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
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

// TestAccessLogWriteAllocatesNothing: writing a request's access log line
// (the agent's format) allocates nothing: the line is rendered into a
// pooled buffer. Every request of every HTTP listener writes one.
func TestAccessLogWriteAllocatesNothing(t *testing.T) {
	al := inboundAccessLog(t, filepath.Join(t.TempDir(), "access.log"))
	lf := &h2.LogFiles{Err: func(err error) { t.Error(err) }}
	t.Cleanup(func() { lf.Close() })
	r := hcm.Record{PeerURI: id("src"), Cluster: "inbound|8080||", Authority: dstAuthority, Protocol: "HTTP/3.0",
		Status: http.StatusOK, Duration: time.Millisecond, BytesReceived: 100, BytesSent: 2}
	lf.Write(al, r)
	if n := testing.AllocsPerRun(100, func() { lf.Write(al, r) }); n != 0 {
		t.Fatalf("%v allocations per access log line", n)
	}
}

// inboundAccessLog is the access log of the agent's own inbound chain for
// a pod, writing to path, as the proxy compiles it.
func inboundAccessLog(t *testing.T, path string) *hcm.AccessLog {
	t.Helper()
	mc := agentmtls.Mesh{Domain: meshDomain, AccessLog: path}
	dst := agentmtls.Pod{Namespace: ns, Name: "dst-0", ID: id("dst"), IP: netip.MustParseAddr("127.0.0.1"),
		Serves: []agentmtls.Port{{Service: "dst", Namespace: ns, Port: 8080, TargetPort: 7080}}}
	l, _, err := agentmtls.InboundListenerFor(mc, dst)
	if err != nil {
		t.Fatal(err)
	}
	s, err := listener.FromProto(l)
	if err != nil {
		t.Fatal(err)
	}
	al := s.HTTP.Chains[0].HCM.AccessLog
	if al == nil {
		t.Fatal("the agent's inbound chain has no access log")
	}
	return al
}
