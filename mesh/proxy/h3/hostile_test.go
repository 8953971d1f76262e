package h3

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

// procUsage is this process's resident set (bytes) and open fds.
func procUsage(t *testing.T) (rss, fds int64) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			rss = kb << 10
		}
	}
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return rss, int64(len(ents))
}

// A stream flood over one QUIC connection to the HTTP/3 inbound: the
// attacker opens request streams in a loop, each with the start of a
// HEADERS frame that never completes, so the server holds every one.
// It gets MaxIncomingStreams of them and no more (quic-go's credit
// refuses the rest before they leave the client); a well-behaved client
// on its own connection to the same inbound keeps its 1000 requests, and
// the process's RSS and fds stay bounded.
func TestStreamFloodIsBoundedPerConnection(t *testing.T) {
	p := newPKI(t)
	addr := serveOK(t, p)
	clientTLS := func() *tls.Config {
		return &tls.Config{RootCAs: p.roots, ServerName: "backend.demo.mesh.local", Certificates: []tls.Certificate{tlsCert(p.client)}, NextProtos: []string{http3.NextProtoH3}}
	}
	rss0, fds0 := procUsage(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evil, err := quic.DialAddr(ctx, addr, clientTLS(), &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer evil.CloseWithError(0, "")
	const attempts = 10000
	opened := 0
	var limited error
	for range attempts {
		s, err := evil.OpenStream()
		if err != nil {
			limited = err
			break
		}
		// HEADERS (type 0x01) announcing 1000 bytes, and 3 of them.
		if _, err := s.Write([]byte{0x01, 0x43, 0xe8, 0x00, 0x00, 0x00}); err != nil {
			t.Fatalf("stream %d: %v", opened, err)
		}
		opened++
	}
	var sle *quic.StreamLimitReachedError
	if !errors.As(limited, &sle) {
		t.Errorf("stream flood: opening stopped with %v, want quic-go's stream limit", limited)
	}
	if opened != MaxIncomingStreams {
		t.Errorf("stream flood: the attacker opened %d streams, want the bound %d", opened, MaxIncomingStreams)
	}

	tr := &http3.Transport{TLSClientConfig: clientTLS()}
	defer tr.Close()
	const requests = 1000
	ok := 0
	for range requests {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && string(b) == "ok" {
			ok++
		}
	}
	// The flood is still held: the attacker's connection is alive.
	if err := evil.Context().Err(); err != nil {
		t.Errorf("stream flood: the attacker's connection ended before the other client finished: %v", err)
	}
	rss, fds := procUsage(t)
	t.Logf("stream flood: %d of %d streams opened (%v); well-behaved client %d / %d; RSS %d MiB -> %d MiB, fds %d -> %d",
		opened, attempts, limited, ok, requests, rss0>>20, rss>>20, fds0, fds)
	if ok*1000 < requests*999 {
		t.Errorf("stream flood: the well-behaved client kept %d of %d requests, under 99.9 %%", ok, requests)
	}
	if d := rss - rss0; d > 64<<20 {
		t.Errorf("stream flood: RSS grew by %d MiB, past 64 MiB", d>>20)
	}
	if d := fds - fds0; d > 16 {
		t.Errorf("stream flood: open fds grew by %d, past 16", d)
	}
}

// serveOK is an inbound on loopback that requires p's client SVIDs and
// answers "ok" to every request; it returns its address.
func serveOK(t *testing.T, p *pki) string {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	in, err := ServeInbound(conn, InboundOptions{
		TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{tlsCert(p.server)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.roots}, nil
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	return conn.LocalAddr().String()
}
