package h2_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
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

// awaitRig polls cond until it holds, failing the test after a minute: a
// wait on the rig, not a bound on the listener's speed.
func awaitRig(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("broken rig: %s did not happen within a minute", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A connection the drained listener accepted before its drain began is
// served to its end, as Envoy drains: a request that arrives on it after
// the drain began (a prober's fresh connection racing a hot restart's
// take-over) is answered 200 with Connection: close, and reaches the app.
// A drain that shut the connection's server down instead dropped such a
// request unanswered: the client read EOF, and the app saw nothing.
func TestDrainAnswersAcceptedConnections(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	l := m.outbound["sa-a"]
	const n = 8
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	awaitRig(t, fmt.Sprintf("the listener holding the %d connections", n), func() bool { return l.Held() == n })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	lost := map[string]int{}
	for _, c := range conns {
		// A deadline for the rig: an unanswered request fails here
		// instead of hanging until the drain's end.
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if err := askOnce(c); err != nil {
			lost[err.Error()]++
		}
	}
	if len(lost) != 0 {
		t.Errorf("requests on connections accepted before the drain went unanswered: %v", lost)
	}
	if got := m.app.count(); got != n {
		t.Errorf("the app saw %d requests, want %d", got, n)
	}
}

// askOnce sends one HTTP/1.1 request on c and wants it answered 200 with
// Connection: close, and c closed after.
func askOnce(c net.Conn) error {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: "+dstAuthority+"\r\n\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || !resp.Close {
		return fmt.Errorf("%s, close %v; want 200 and Connection: close", resp.Status, resp.Close)
	}
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the response: %v, want the connection closed", err)
	}
	return nil
}

// A chain of hot restarts under clients that open a connection per
// request (as suites/lifecycle's prober does) loses no request: each
// round drains the serving listener while another listener, on a
// duplicate of its socket (a child's), takes over the accept queue. Every
// request is answered 200 and reaches the app.
func TestDrainRaceLosesNothing(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	serving := m.outbound["sa-a"]
	spec := m.specs[serving.Name()]
	addr := serving.Addr().String()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	const clients, rounds, perRound = 8, 10, 40
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	t.Cleanup(hc.CloseIdleConnections)
	var sent atomic.Int64
	var mu sync.Mutex
	lost := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				if err := getFresh(hc, addr); err != nil {
					mu.Lock()
					lost[lastClause(err)]++
					mu.Unlock()
				}
			}
		})
	}
	for round := range rounds {
		awaitRig(t, fmt.Sprintf("round %d's requests", round), func() bool { return sent.Load() >= int64(perRound*(round+1)) })
		child := m.takeOver(t, spec, serving)
		if err := serving.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		serving = child
	}
	awaitRig(t, "the last child's requests", func() bool { return sent.Load() >= int64(perRound*(rounds+1)) })
	close(stop)
	wg.Wait()
	total := sent.Load()
	t.Logf("%d requests on fresh connections across %d drains; lost %v", total, rounds, lost)
	if len(lost) != 0 {
		t.Errorf("requests lost across the drains: %v", lost)
	}
	if got := m.app.count(); int64(got) != total {
		t.Errorf("the app saw %d of the %d requests", got, total)
	}
}

// takeOver serves spec on a duplicate of l's listening socket, as a hot
// restart's child serves the socket its parent handed over.
func (m *mesh) takeOver(t *testing.T, spec *listener.Spec, l *h2.Listener) *h2.Listener {
	t.Helper()
	rc, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	fd, dupErr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, dupErr = syscall.Dup(int(s)) }); err != nil || dupErr != nil {
		t.Fatal(errors.Join(err, dupErr))
	}
	f := os.NewFile(uintptr(fd), "handed-over")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		t.Fatal(err)
	}
	child := h2.Serve(spec, ln, m, m.opts)
	t.Cleanup(func() { child.Close() })
	return child
}

// getFresh sends one request on a new connection and wants 200.
func getFresh(hc *http.Client, addr string) error {
	req, err := http.NewRequest("GET", "http://"+addr+"/", nil)
	if err != nil {
		return err
	}
	req.Host = dstAuthority
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}

// lastClause is an error's last clause, which says what happened without
// the per-request addresses before it.
func lastClause(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

// An HTTP/2 connection the drained listener accepted before the drain
// began, but whose preface came after it (its TLS handshake or h2c
// preface under way as Drain sent GOAWAY to the connections it serves),
// gets GOAWAY too: its client opens its next streams on a new connection,
// which a hot restart's child accepts, instead of losing them when the
// drain's end closes this one.
func TestDrainSendsGOAWAYToLateHTTP2(t *testing.T) {
	m := newMesh(t, meshConfig{}, "sa-a")
	l := m.outbound["sa-a"]
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	awaitRig(t, "the listener holding the connection", func() bool { return l.Held() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := l.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	cc, err := (&http2.Transport{AllowHTTP: true}).NewClientConn(c)
	if err != nil {
		t.Fatal(err)
	}
	// A minute is the rig's patience, not a bound on the listener.
	for deadline := time.Now().Add(time.Minute); !cc.State().Closing; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no GOAWAY within a minute on the h2c connection whose preface came after the drain began: it serves on until the drain's end closes it")
		}
	}
}
