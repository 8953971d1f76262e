package h3

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/qpack"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/quic-go/quic-go/quicvarint"

	"github.com/aether-mesh/aether/mesh/proxy/metrics"
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

// h3Attacker is a raw HTTP/3 client over one QUIC connection: it writes
// HEADERS frames of its own making, which http3.Transport would refuse to
// send (it honours the server's SETTINGS_MAX_FIELD_SECTION_SIZE).
type h3Attacker struct {
	conn *quic.Conn
}

func dialH3Attacker(t *testing.T, ctx context.Context, addr string, tc *tls.Config) *h3Attacker {
	t.Helper()
	c, err := quic.DialAddr(ctx, addr, tc, &quic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseWithError(0, "") })
	// The control stream RFC 9114 requires, with empty SETTINGS.
	ctrl, err := c.OpenUniStream()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ctrl.Write([]byte{0x00, 0x04, 0x00}); err != nil {
		t.Fatal(err)
	}
	return &h3Attacker{conn: c}
}

// request sends one HEADERS frame whose field section is block (the
// QPACK prefix included), with the stream's FIN, and returns the
// response's :status, or the stream error that ended it.
func (a *h3Attacker) request(ctx context.Context, block []byte) (string, error) {
	s, err := a.conn.OpenStreamSync(ctx)
	if err != nil {
		return "", err
	}
	frame := quicvarint.Append(quicvarint.Append(nil, 0x01), uint64(len(block)))
	// The server may stop reading part-way (STOP_SENDING), which fails
	// the write: the answer is what is checked.
	_, _ = s.Write(append(frame, block...))
	_ = s.Close()
	r := quicvarint.NewReader(s)
	for {
		typ, err := quicvarint.Read(r)
		if err != nil {
			return "", err
		}
		n, err := quicvarint.Read(r)
		if err != nil {
			return "", err
		}
		payload := make([]byte, n)
		if _, err := io.ReadFull(s, payload); err != nil {
			return "", err
		}
		if typ != 0x01 {
			continue
		}
		dec := qpack.NewDecoder().Decode(payload)
		for {
			hf, err := dec()
			if err != nil {
				return "", fmt.Errorf("response headers: %w", err)
			}
			if hf.Name == ":status" {
				s.CancelRead(0)
				return hf.Value, nil
			}
		}
	}
}

// qpackBlock encodes a GET's pseudo-header fields and extra, behind the
// QPACK prefix (Required Insert Count and Base, both 0).
func qpackBlock(t *testing.T, extra ...qpack.HeaderField) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := qpack.NewEncoder(&b)
	for _, hf := range append([]qpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "https"},
		{Name: ":authority", Value: "backend.demo.mesh.local"}, {Name: ":path", Value: "/"}}, extra...) {
		if err := enc.WriteField(hf); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// Oversized request headers and QPACK bombs on the HTTP/3 inbound, over
// one attacker connection, while a well-behaved client sends its 1000
// requests on a connection of its own:
//   - a 100 KiB literal, 75 KiB Huffman-coded: its HEADERS frame is longer than MaxHeaderBytes,
//     and quic-go answers 431 before reading it;
//   - a reference bomb: 25,000 two-byte references to the static table's
//     largest entry (content-security-policy, 76 bytes), a 49 KiB frame
//     that decodes to 2.6 MiB; quic-go counts each field as it decodes
//     and stops at the first past the limit;
//   - a Huffman bomb: a literal of 40,000 bytes of Huffman code decoding
//     to 64,000 (the shortest code is 5 bits: 8/5 is Huffman's most).
//
// Each is answered 431 and counted once as h3_request_headers_too_large;
// the handler sees none; 50 KiB of headers, under the limit, and a plain
// request after the attacks, on the same connection, are answered 200.
func TestQPACKBombIs431(t *testing.T) {
	p := newPKI(t)
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	reg := metrics.New()
	stats := reg.HTTPListener("in")
	var handled atomic.Int64
	in, err := ServeInbound(conn, InboundOptions{
		TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{tlsCert(p.server)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.roots}, nil
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			handled.Add(1)
			_, _ = io.WriteString(w, "ok")
		}),
		HeadersTooLarge: func() { stats.ProtocolError(metrics.ProtocolH3HeadersTooLarge) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	addr := conn.LocalAddr().String()
	clientTLS := func() *tls.Config {
		return &tls.Config{RootCAs: p.roots, ServerName: "backend.demo.mesh.local", Certificates: []tls.Certificate{tlsCert(p.client)}, NextProtos: []string{http3.NextProtoH3}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rss0, fds0 := procUsage(t)

	// The well-behaved client, alongside the attacks.
	const requests = 1000
	var good atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		tr := &http3.Transport{TLSClientConfig: clientTLS()}
		defer tr.Close()
		for range requests {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
			resp, err := tr.RoundTrip(req)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(b) == "ok" {
				good.Add(1)
			}
		}
	}()

	a := dialH3Attacker(t, ctx, addr, clientTLS())
	oversize := qpackBlock(t, qpack.HeaderField{Name: "x-big", Value: strings.Repeat("h", 100<<10)})
	// The static table's entry 85 is content-security-policy: 0xff 0x16
	// is its indexed field line (6-bit prefix: 63, then 85-63).
	refs := append(qpackBlock(t), bytes.Repeat([]byte{0xff, 85 - 63}, 25000)...)
	// A literal field line without a name reference (001NHxxx, a 3-bit
	// name length): the name "x-h" as is, then the value with its H bit
	// and 7-bit length prefix, 40,000 bytes of 5-bit codes of '0'
	// (00000): 64,000 characters.
	huff := append(qpackBlock(t), 0x23)
	huff = append(huff, "x-h"...)
	huff = append(huff, prefixedInt(0x80, 7, 40000)...)
	huff = append(huff, make([]byte, 40000)...)
	decoded := func(block []byte) int {
		n := 0
		dec := qpack.NewDecoder().Decode(block)
		for {
			hf, err := dec()
			if err != nil {
				return n
			}
			n += len(hf.Name) + len(hf.Value) + 32
		}
	}
	t.Logf("QPACK attacks: oversize frame %d KiB; reference bomb %d KiB decoding to %d KiB; Huffman bomb %d KiB decoding to %d KiB",
		len(oversize)>>10, len(refs)>>10, decoded(refs)>>10, len(huff)>>10, decoded(huff)>>10)

	const each = 32
	attacks := map[string][]byte{"oversize": oversize, "reference bomb": refs, "Huffman bomb": huff}
	refused := 0
	for name, block := range attacks {
		for i := range each {
			st, err := a.request(ctx, block)
			if err != nil {
				t.Fatalf("%s %d: %v", name, i, err)
			}
			if st == "431" {
				refused++
			} else {
				t.Errorf("%s %d: status %s, want 431", name, i, st)
			}
		}
	}
	under := qpackBlock(t, qpack.HeaderField{Name: "x-big", Value: strings.Repeat("u", 50<<10)})
	if st, err := a.request(ctx, under); err != nil || st != "200" {
		t.Errorf("50 KiB of headers, under the limit: status %q (%v), want 200", st, err)
	}
	if st, err := a.request(ctx, qpackBlock(t)); err != nil || st != "200" {
		t.Errorf("a request after the attacks, on their connection: status %q (%v), want 200", st, err)
	}
	<-done

	want := float64(each * len(attacks))
	if v, _ := reg.Value("aether_proxy_http_downstream_protocol_errors_total", map[string]string{"listener": "in", "reason": metrics.ProtocolH3HeadersTooLarge}); v != want {
		t.Errorf("QPACK attacks: %s counted %v, want %v", metrics.ProtocolH3HeadersTooLarge, v, want)
	}
	if n := handled.Load() - good.Load(); n != 2 {
		t.Errorf("QPACK attacks: the handler saw %d of the attacker's requests, want only the 2 under the limit", n)
	}
	rss, fds := procUsage(t)
	t.Logf("QPACK attacks: %d of %v answered 431; well-behaved client %d / %d; RSS %d MiB -> %d MiB, fds %d -> %d",
		refused, want, good.Load(), requests, rss0>>20, rss>>20, fds0, fds)
	if good.Load()*1000 < requests*999 {
		t.Errorf("QPACK attacks: the well-behaved client kept %d of %d requests, under 99.9 %%", good.Load(), requests)
	}
	if d := rss - rss0; d > 64<<20 {
		t.Errorf("QPACK attacks: RSS grew by %d MiB, past 64 MiB", d>>20)
	}
	if d := fds - fds0; d > 16 {
		t.Errorf("QPACK attacks: open fds grew by %d, past 16", d)
	}
}

// prefixedInt is a QPACK (HPACK) prefixed integer: v in the low n
// bits of a first byte whose high bits are flags, continued in 7-bit
// groups.
func prefixedInt(flags byte, n uint, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return []byte{flags | byte(v)}
	}
	out := []byte{flags | byte(max)}
	v -= max
	for v >= 128 {
		out = append(out, byte(v%128)|0x80)
		v /= 128
	}
	return append(out, byte(v))
}
