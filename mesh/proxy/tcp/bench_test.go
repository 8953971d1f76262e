package tcp

import (
	"io"
	"net"
	"testing"
	"time"
)

// BenchmarkTCPPipe streams 1 MiB per op from a loopback client through
// the listener to a backend that discards it, and waits for the
// backend's byte count as the reply.
func BenchmarkTCPPipe(b *testing.B) {
	const size = 1 << 20
	cs := backend(b, func(c *net.TCPConn) {
		n, _ := io.Copy(io.Discard, c)
		_, _ = c.Write([]byte{byte(n >> 20)})
	})
	l, err := Listen(spec(time.Hour), cs, Options{Log: quiet()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	buf := make([]byte, size)
	b.SetBytes(size)
	for b.Loop() {
		c, err := net.DialTCP("tcp4", nil, net.TCPAddrFromAddrPort(l.Addr()))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
		_ = c.CloseWrite()
		got, err := io.ReadAll(c)
		if err != nil || len(got) != 1 || got[0] != 1 {
			b.Fatalf("reply %v, %v", got, err)
		}
		_ = c.Close()
	}
}
