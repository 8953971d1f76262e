// Package relay carries a pod's client socket over a byte stream: a test
// process outside the pod (on kind, at the other end of a `kubectl exec`
// stream) drives a socket that lives inside the pod's netns, so the pod's
// capture rules see the traffic exactly as they would see the pod's own.
//
// UDP keeps its datagram boundaries on the stream as frames: a two-byte
// big-endian length, then the payload. TCP is the byte stream itself.
package relay

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// MaxDatagram is the largest payload a frame carries.
const MaxDatagram = 65535

// WriteFrame writes one datagram as a frame.
func WriteFrame(w io.Writer, payload []byte) error {
	if len(payload) > MaxDatagram {
		return fmt.Errorf("datagram of %d bytes exceeds the frame limit of %d", len(payload), MaxDatagram)
	}
	buf := make([]byte, 2+len(payload))
	binary.BigEndian.PutUint16(buf, uint16(len(payload)))
	copy(buf[2:], payload)
	_, err := w.Write(buf)
	return err
}

// ReadFrame reads one frame into buf and returns the payload's length. A
// stream that ends between frames returns io.EOF; one that ends inside a
// frame returns io.ErrUnexpectedEOF.
func ReadFrame(r io.Reader, buf []byte) (int, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(hdr[:]))
	if n > len(buf) {
		return 0, fmt.Errorf("frame of %d bytes does not fit a %d-byte buffer", n, len(buf))
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	return n, nil
}

// ServeUDP sends every frame read from in as a datagram on conn and writes
// every datagram conn receives to out as a frame, until in ends (the
// driver is done) or conn fails.
func ServeUDP(in io.Reader, out io.Writer, conn net.Conn) error {
	errc := make(chan error, 2)
	go func() {
		buf := make([]byte, MaxDatagram)
		w := bufio.NewWriter(out)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				errc <- fmt.Errorf("failed to receive from %s: %w", conn.RemoteAddr(), err)
				return
			}
			if err := WriteFrame(w, buf[:n]); err != nil {
				errc <- fmt.Errorf("failed to relay a datagram from %s: %w", conn.RemoteAddr(), err)
				return
			}
			if err := w.Flush(); err != nil {
				errc <- fmt.Errorf("failed to relay a datagram from %s: %w", conn.RemoteAddr(), err)
				return
			}
		}
	}()
	go func() {
		r := bufio.NewReader(in)
		buf := make([]byte, MaxDatagram)
		for {
			n, err := ReadFrame(r, buf)
			if errors.Is(err, io.EOF) {
				errc <- nil
				return
			}
			if err != nil {
				errc <- fmt.Errorf("failed to read a frame from the driver: %w", err)
				return
			}
			// A refused send (ECONNREFUSED from an earlier ICMP error) is
			// the traffic's fate, not the relay's: the driver sees the
			// missing reply.
			if _, err := conn.Write(buf[:n]); err != nil && !isRefused(err) {
				errc <- fmt.Errorf("failed to send to %s: %w", conn.RemoteAddr(), err)
				return
			}
		}
	}()
	return <-errc
}

func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
