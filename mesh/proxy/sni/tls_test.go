package sni_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/sni"
	"github.com/aether-mesh/aether/mesh/proxy/sni/snitest"
)

func tlsHello(t testing.TB, name string, alpn ...string) []byte {
	t.Helper()
	b, err := snitest.TLSClientHello(name, alpn...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// refragment re-records a ClientHello's handshake bytes in records of at
// most n bytes, as a client or middlebox may.
func refragment(t testing.TB, records []byte, n int) []byte {
	t.Helper()
	msg := records[5:]
	var out []byte
	for len(msg) > 0 {
		k := min(n, len(msg))
		out = append(out, 22, 3, 1, byte(k>>8), byte(k))
		out = append(out, msg[:k]...)
		msg = msg[k:]
	}
	return out
}

func TestReadClientHello(t *testing.T) {
	hello := tlsHello(t, "Echo.NS1.svc.cluster.local.", "h2", "http/1.1")
	tail := []byte("more bytes the client pipelined")
	for _, tc := range []struct {
		name string
		in   []byte
		r    func(io.Reader) io.Reader
	}{
		{"one read", hello, nil},
		{"one byte per segment", hello, iotest.OneByteReader},
		{"100-byte records", refragment(t, hello, 100), nil},
		{"7-byte records, one byte per segment", refragment(t, hello, 7), iotest.OneByteReader},
		{"half segments", hello, iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(append(bytes.Clone(tc.in), tail...))
			if tc.r != nil {
				r = tc.r(r)
			}
			got, read, err := sni.ReadClientHello(r, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got.ServerName != "echo.ns1.svc.cluster.local" {
				t.Errorf("ServerName = %q", got.ServerName)
			}
			if len(got.ALPN) != 2 || got.ALPN[0] != "h2" {
				t.Errorf("ALPN = %q", got.ALPN)
			}
			// Every byte read comes back, for the replay upstream: the
			// records, then whatever the last read took beyond them.
			if !bytes.HasPrefix(read, tc.in) || !bytes.HasPrefix(tail, read[len(tc.in):]) {
				t.Errorf("read %d bytes that are not the stream's prefix", len(read))
			}
		})
	}
}

func TestReadClientHelloRefusals(t *testing.T) {
	hello := tlsHello(t, "a.example")
	t.Run("plaintext falls through", func(t *testing.T) {
		_, read, err := sni.ReadClientHello(bytes.NewReader([]byte("GET / HTTP/1.1\r\n\r\n")), 0)
		if !errors.Is(err, sni.ErrNotTLS) {
			t.Fatalf("err = %v, want ErrNotTLS", err)
		}
		if !bytes.HasPrefix([]byte("GET / HTTP/1.1\r\n\r\n"), read) || len(read) == 0 {
			t.Errorf("read = %q, want the stream's prefix for the replay", read)
		}
	})
	t.Run("too large", func(t *testing.T) {
		_, _, err := sni.ReadClientHello(bytes.NewReader(hello), len(hello)-1)
		if !errors.Is(err, sni.ErrTooLarge) {
			t.Fatalf("err = %v, want ErrTooLarge", err)
		}
	})
	t.Run("truncated", func(t *testing.T) {
		_, _, err := sni.ReadClientHello(bytes.NewReader(hello[:len(hello)-3]), 0)
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("err = %v, want ErrUnexpectedEOF", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		bad := bytes.Clone(hello)
		bad[5] = 2 // ServerHello, not ClientHello
		if _, _, err := sni.ReadClientHello(bytes.NewReader(bad), 0); !errors.Is(err, sni.ErrMalformed) {
			t.Fatalf("err = %v, want ErrMalformed", err)
		}
	})
	t.Run("alert record inside", func(t *testing.T) {
		split := refragment(t, hello, 50)
		split[55] = 21
		if _, _, err := sni.ReadClientHello(bytes.NewReader(split), 0); !errors.Is(err, sni.ErrMalformed) {
			t.Fatalf("err = %v, want ErrMalformed", err)
		}
	})
	t.Run("slow client meets the deadline", func(t *testing.T) {
		client, server := net.Pipe()
		defer client.Close()
		defer server.Close()
		go client.Write(hello[:10]) // and then nothing
		server.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		_, read, err := sni.ReadClientHello(server, 0)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("err = %v, want the deadline's", err)
		}
		if len(read) != 10 {
			t.Errorf("read %d bytes, want the 10 sent", len(read))
		}
	})
}

// FuzzClientHello feeds arbitrary streams to ReadClientHello, whole and
// a byte per read.
func FuzzClientHello(f *testing.F) {
	f.Add(tlsHello(f, "seed.example", "h2"))
	f.Add(refragment(f, tlsHello(f, "x"), 9))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte("PROXY TCP4"))
	f.Fuzz(func(t *testing.T, in []byte) {
		h1, r1, err1 := sni.ReadClientHello(bytes.NewReader(in), 4096)
		h2, r2, err2 := sni.ReadClientHello(iotest.OneByteReader(bytes.NewReader(in)), 4096)
		if (err1 == nil) != (err2 == nil) || h1.ServerName != h2.ServerName {
			t.Fatalf("segmenting changed the result: %q %v / %q %v", h1.ServerName, err1, h2.ServerName, err2)
		}
		if len(r1) > 4096 || !bytes.HasPrefix(in, r1) || !bytes.HasPrefix(in, r2) {
			t.Fatalf("read %d bytes beyond the limit or not the input's prefix", len(r1))
		}
		if err1 == nil && (len(h1.ServerName) > 253 || strings.ContainsAny(h1.ServerName, " \x00")) {
			t.Fatalf("accepted server name %q", h1.ServerName)
		}
	})
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
