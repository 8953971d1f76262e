package h2_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// A drained plain-HTTP listener (a hot restart's parent) closes its
// kept-alive HTTP/1.1 connections once idle, so each client's next request
// goes to a new connection, which the kernel hands to whichever process
// accepts. Without the drain the connection stays open.
func TestDrainClosesIdleConnections(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	keptAlive := func() (net.Conn, *bufio.Reader) {
		t.Helper()
		c, err := net.Dial("tcp", m.outbound["sa-a"].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+dstAuthority+"\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(c)
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Close {
			t.Fatalf("%s, close %v; want 200 on a kept-alive connection", resp.Status, resp.Close)
		}
		return c, r
	}
	// closed waits up to d for the server to close c.
	closed := func(c net.Conn, r *bufio.Reader, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := r.ReadByte()
		return errors.Is(err, io.EOF)
	}

	control, cr := keptAlive()
	if closed(control, cr, 200*time.Millisecond) {
		t.Fatal("broken rig: a kept-alive connection was closed with no drain")
	}
	c, r := keptAlive()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.outbound["sa-a"].Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if !closed(c, r, 10*time.Second) {
		t.Fatal("the drained listener left its idle connection open")
	}
}
