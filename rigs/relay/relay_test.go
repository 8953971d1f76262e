package relay

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	for _, p := range [][]byte{[]byte("a/0"), {}, bytes.Repeat([]byte{7}, MaxDatagram)} {
		if err := WriteFrame(&b, p); err != nil {
			t.Fatal(err)
		}
	}
	buf := make([]byte, MaxDatagram)
	for _, want := range []int{3, 0, MaxDatagram} {
		n, err := ReadFrame(&b, buf)
		if err != nil || n != want {
			t.Fatalf("ReadFrame = %d, %v; want %d", n, err, want)
		}
	}
	if _, err := ReadFrame(&b, buf); !errors.Is(err, io.EOF) {
		t.Fatalf("a stream ending between frames: %v, want io.EOF", err)
	}
	if err := WriteFrame(&b, make([]byte, MaxDatagram+1)); err == nil {
		t.Fatal("an oversized datagram was framed")
	}
	b.Write([]byte{0, 5, 'a', 'b'})
	if _, err := ReadFrame(&b, buf); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a stream ending inside a frame: %v, want io.ErrUnexpectedEOF", err)
	}
}

// A real loopback echo answers each datagram with its reverse: the relay
// must keep every datagram's boundary both ways.
func TestServeUDPKeepsDatagramBoundaries(t *testing.T) {
	echo, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		buf := make([]byte, 1500)
		for {
			n, src, err := echo.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r := make([]byte, n)
			for i := range n {
				r[i] = buf[n-1-i]
			}
			_, _ = echo.WriteToUDP(r, src)
		}
	}()
	conn, err := net.Dial("udp4", echo.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- ServeUDP(inR, outW, conn) }()

	buf := make([]byte, MaxDatagram)
	for _, p := range []string{"abc", "de", "f"} {
		if err := WriteFrame(inW, []byte(p)); err != nil {
			t.Fatal(err)
		}
		n, err := ReadFrame(outR, buf)
		if err != nil {
			t.Fatal(err)
		}
		want := []byte(p)
		for i, j := 0, len(want)-1; i < j; i, j = i+1, j-1 {
			want[i], want[j] = want[j], want[i]
		}
		if got := buf[:n]; !bytes.Equal(got, want) {
			t.Fatalf("relayed reply %q, want %q", got, want)
		}
	}
	inW.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ServeUDP after the driver's end: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeUDP did not return when its input ended")
	}
	conn.Close()
}
