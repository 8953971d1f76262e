package hotrestart

import (
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakeListeners is a parent's listeners: one UDP socket, and a record of
// what the child made the parent do.
type fakeListeners struct {
	sock *net.UDPConn
	key  Key

	mu      sync.Mutex
	drained []Key
	resumed []Key
	forward func(Packet) error
}

func (f *fakeListeners) Socket(k Key) (syscall.RawConn, string) {
	if k != f.key {
		return nil, ""
	}
	rc, err := f.sock.SyscallConn()
	if err != nil {
		return nil, ""
	}
	return rc, KindUDP
}

func (f *fakeListeners) Drain(ks []Key, fwd func(Packet) error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drained, f.forward = append(f.drained, ks...), fwd
}

func (f *fakeListeners) Resume(ks []Key) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resumed = append(f.resumed, ks...)
}

type fakeAdmin struct {
	mu             sync.Mutex
	shut, restored int
}

func (a *fakeAdmin) Shutdown() error { a.mu.Lock(); defer a.mu.Unlock(); a.shut++; return nil }
func (a *fakeAdmin) Restore() error  { a.mu.Lock(); defer a.mu.Unlock(); a.restored++; return nil }

func (a *fakeAdmin) counts() (shut, restored int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.shut, a.restored
}

func loopbackUDP(t *testing.T) (*net.UDPConn, Key) {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, Key{Network: "udp", Addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
}

func startParent(t *testing.T, epoch uint32) (*Parent, *fakeListeners, *fakeAdmin, string) {
	t.Helper()
	sock, k := loopbackUDP(t)
	ls := &fakeListeners{sock: sock, key: k}
	admin := &fakeAdmin{}
	path := SocketPath(filepath.Join(t.TempDir(), "hr"), 3, epoch)
	p, err := Listen(path, epoch, ls, admin, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, ls, admin, path
}

// The rendezvous name is Envoy's: ten ids per base id, epochs modulo 3.
func TestSocketPath(t *testing.T) {
	for _, c := range []struct {
		base, epoch uint32
		want        string
	}{{0, 0, "@p_parent_0"}, {0, 4, "@p_parent_1"}, {3, 2, "@p_parent_32"}} {
		if got := SocketPath("@p", c.base, c.epoch); got != c.want {
			t.Errorf("SocketPath(@p, %d, %d) = %s, want %s", c.base, c.epoch, got, c.want)
		}
	}
}

// A child with no parent, or whose epoch does not follow the parent's,
// fails naming the socket and both epochs; a second process of the
// parent's epoch cannot serve its socket.
func TestEpochsAreChecked(t *testing.T) {
	_, _, _, path := startParent(t, 1)
	if _, err := Connect(path, 3); err == nil || !strings.Contains(err.Error(), "epoch 3") || !strings.Contains(err.Error(), "does not follow epoch 1") || !strings.Contains(err.Error(), path) {
		t.Errorf("epoch 3 against parent epoch 1: %v, want an error naming both epochs and %s", err, path)
	}
	gone := SocketPath(filepath.Join(t.TempDir(), "hr"), 0, 0)
	if _, err := Connect(gone, 1); err == nil || !strings.Contains(err.Error(), "no parent (epoch 0) serves "+gone) {
		t.Errorf("epoch 1 with no parent: %v, want an error naming the socket", err)
	}
	if _, err := Listen(path, 1, &fakeListeners{}, nil, nil); err == nil || !strings.Contains(err.Error(), "live process") {
		t.Errorf("a second epoch 1 on the same socket: %v, want refused", err)
	}
	c, err := Connect(path, 2)
	if err != nil {
		t.Fatalf("epoch 2 after epoch 1: %v", err)
	}
	c.Close()
}

// The child gets the parent's very socket: a datagram sent to the address
// is read from the child's descriptor. A key the parent does not hold
// answers none.
func TestSocketIsHandedOver(t *testing.T) {
	_, ls, _, path := startParent(t, 0)
	c, err := Connect(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f, kind, err := c.Socket(ls.key)
	if err != nil || f == nil || kind != KindUDP {
		t.Fatalf("Socket(%s) = %v, %q, %v; want the parent's UDP socket", ls.key, f, kind, err)
	}
	pc, err := net.FilePacketConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if got := pc.LocalAddr().(*net.UDPAddr).AddrPort(); got != ls.key.Addr {
		t.Fatalf("passed socket is bound to %s, want %s", got, ls.key.Addr)
	}
	ls.sock.Close() // the parent lets go; the socket lives on in the child
	send, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(ls.key.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer send.Close()
	if _, err := send.Write([]byte("after the handover")); err != nil {
		t.Fatal(err)
	}
	_ = pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 64)
	n, _, err := pc.ReadFrom(b)
	if err != nil || string(b[:n]) != "after the handover" {
		t.Fatalf("read %q, %v from the child's socket", b[:n], err)
	}
	other := Key{Network: "tcp", Addr: ls.key.Addr}
	if f, _, err := c.Socket(other); f != nil || err != nil {
		t.Errorf("Socket(%s) = %v, %v; want none", other, f, err)
	}
}

// A child that leaves after the drain, without asking the parent to
// exit, leaves the parent serving: what was drained is resumed and the
// admin listener restored. One that asks it to exit ends the parent.
func TestChildLeavingRollsBack(t *testing.T) {
	p, ls, admin, path := startParent(t, 0)
	c, err := Connect(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if f, _, err := c.Socket(ls.key); err != nil || f == nil {
		t.Fatal(f, err)
	} else {
		f.Close()
	}
	if err := c.ShutdownAdmin(); err != nil {
		t.Fatal(err)
	}
	if err := c.Drain(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	waitUntil(t, "the parent to resume", func() bool {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		_, restored := admin.counts()
		return len(ls.resumed) == 1 && restored == 1
	})
	ls.mu.Lock()
	drained, resumed := slices.Clone(ls.drained), slices.Clone(ls.resumed)
	ls.mu.Unlock()
	if shut, _ := admin.counts(); !slices.Equal(drained, []Key{ls.key}) || !slices.Equal(resumed, []Key{ls.key}) || shut != 1 {
		t.Fatalf("drained %v, resumed %v, admin shut %d; want the handed-over key drained then resumed", drained, resumed, shut)
	}
	select {
	case <-p.Terminated():
		t.Fatal("the parent was terminated by a child that left")
	default:
	}

	// The next child takes over for good; a socket it takes after the
	// drain is drained at once.
	c2, err := Connect(path, 1)
	if err != nil {
		t.Fatalf("a second child after a rolled-back one: %v", err)
	}
	if err := c2.Drain(); err != nil {
		t.Fatal(err)
	}
	if f, _, err := c2.Socket(ls.key); err != nil || f == nil {
		t.Fatal(f, err)
	} else {
		f.Close()
	}
	waitUntil(t, "the socket taken after the drain to be drained", func() bool {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		return slices.Equal(ls.drained, []Key{ls.key, ls.key})
	})
	if err := c2.Terminate(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Terminated():
	case <-time.After(5 * time.Second):
		t.Fatal("the parent was not terminated")
	}
	select {
	case <-c2.ParentGone():
		t.Fatal("the child saw the parent gone before it closed")
	default:
	}
	p.Close()
	select {
	case <-c2.ParentGone():
	case <-time.After(5 * time.Second):
		t.Fatal("the child did not see the parent gone")
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if len(ls.resumed) != 1 {
		t.Errorf("resumed %v after a terminate; want nothing more", ls.resumed)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestPacketRoundTrip(t *testing.T) {
	p := Packet{Key: "udp://0.0.0.0:18008", From: netip.MustParseAddrPort("10.244.1.2:40000"), OOB: []byte{1, 2, 3}, Payload: []byte("quic")}
	b, err := encodePacket(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodePacket(b[1:])
	if err != nil || got.Key != p.Key || got.From != p.From || string(got.OOB) != string(p.OOB) || string(got.Payload) != "quic" {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, p)
	}
	for i := range len(b) - 1 {
		if _, err := decodePacket(b[1 : 1+i]); err == nil && i < len(b)-1-len(p.Payload) {
			t.Errorf("a record cut to %d bytes decoded", i)
		}
	}
	if _, err := decodePacket(nil); !errors.Is(err, errShortPacket) {
		t.Errorf("empty record: %v", err)
	}
}

func FuzzDecodePacket(f *testing.F) {
	b, _ := encodePacket(Packet{Key: "k", From: netip.MustParseAddrPort("10.0.0.1:1"), Payload: []byte("x")})
	f.Add(b[1:])
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePacket(b)
		if err != nil {
			return
		}
		again, err := encodePacket(p)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", p, err)
		}
		if q, err := decodePacket(again[1:]); err != nil || q.Key != p.Key || q.From != p.From || string(q.Payload) != string(p.Payload) {
			t.Fatalf("round trip of %+v gave %+v, %v", p, q, err)
		}
	})
}
