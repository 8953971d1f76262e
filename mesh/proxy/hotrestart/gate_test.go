package hotrestart

import (
	"net"
	"os"
	"testing"
	"time"

	"golang.org/x/net/ipv4"
)

func batch(n int) []ipv4.Message {
	ms := make([]ipv4.Message, n)
	for i := range ms {
		ms[i].Buffers = [][]byte{make([]byte, 1500)}
		ms[i].OOB = make([]byte, 128)
	}
	return ms
}

// shortHeader is a 1-RTT packet for connection ID cid.
func shortHeader(cid []byte, body string) []byte {
	return append(append([]byte{0x40}, cid...), body...)
}

func readOne(t *testing.T, g *Gate) string {
	t.Helper()
	_ = g.SetReadDeadline(time.Now().Add(5 * time.Second))
	ms := batch(1)
	n, err := g.ReadBatch(ms, 0)
	if err != nil || n != 1 {
		t.Fatalf("ReadBatch = %d, %v", n, err)
	}
	return string(ms[0].Buffers[0][1+ConnectionIDLen : ms[0].N])
}

// Across a drain, every packet reaches exactly one process: the parent
// keeps those for its own connections and forwards the rest to the child,
// which reads nothing from the socket while the parent lives and reads it
// once the parent is gone.
func TestGateSplitsPacketsBetweenParentAndChild(t *testing.T) {
	sock, k := loopbackUDP(t)
	parentIDs := NewConnectionIDs(0)
	childIDs := NewConnectionIDs(1)
	pg := NewGate(sock, k, parentIDs)
	ls := &gateListeners{fakeListeners: fakeListeners{sock: sock, key: k}, gate: pg}
	path := SocketPath(t.TempDir()+"/hr", 0, 0)
	parent, err := Listen(path, 0, ls, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	child, err := Connect(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	f, _, err := child.Socket(k)
	if err != nil || f == nil {
		t.Fatal(f, err)
	}
	pc, err := net.FilePacketConn(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	cg := NewGate(pc.(*net.UDPConn), k, childIDs)
	child.Hold(k, cg)
	if err := child.Drain(); err != nil {
		t.Fatal(err)
	}

	client, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(k.Addr))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	mine, _ := parentIDs.GenerateConnectionID()
	theirs, _ := childIDs.GenerateConnectionID()
	send := func(cid []byte, body string) {
		if _, err := client.Write(shortHeader(cid, body)); err != nil {
			t.Fatal(err)
		}
	}
	send(theirs.Bytes(), "for the child")
	initial := append([]byte{0xc0, 0, 0, 0, 1, 8}, "randomid"...)
	if _, err := client.Write(append(initial, "a new connection"...)); err != nil {
		t.Fatal(err)
	}
	send(mine.Bytes(), "for the parent")
	// The parent's quic-go reads through its gate: it sees its own packet
	// only, the other two went to the child.
	if got := readOne(t, pg); got != "for the parent" {
		t.Fatalf("parent read %q", got)
	}
	if got := readOne(t, cg); got != "for the child" {
		t.Fatalf("child read %q first", got)
	}
	_ = cg.SetReadDeadline(time.Now().Add(5 * time.Second))
	ms := batch(4)
	if n, err := cg.ReadBatch(ms, 0); err != nil || n != 1 || string(ms[0].Buffers[0][6+8:ms[0].N]) != "a new connection" {
		t.Fatalf("child read %d, %v: %q; want the new connection's Initial", n, err, ms[0].Buffers[0][:ms[0].N])
	}
	if pg.Forwarded() != 2 {
		t.Errorf("parent forwarded %d packets, want 2", pg.Forwarded())
	}
	if ms[0].Addr.String() != client.LocalAddr().String() {
		t.Errorf("forwarded packet's source %s, want the client %s", ms[0].Addr, client.LocalAddr())
	}

	// Held, the child's read times out rather than take the socket.
	_ = cg.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := cg.ReadBatch(batch(1), 0); !os.IsTimeout(err) {
		t.Fatalf("held child read: %v, want a timeout", err)
	}

	// The parent goes; the child reads the socket.
	if err := child.Terminate(); err != nil {
		t.Fatal(err)
	}
	<-parent.Terminated()
	parent.Close()
	<-child.ParentGone()
	send(theirs.Bytes(), "after the parent")
	if got := readOne(t, cg); got != "after the parent" {
		t.Fatalf("child read %q after the parent left", got)
	}
}

// gateListeners drains by turning the gate to forwarding.
type gateListeners struct {
	fakeListeners
	gate *Gate
}

func (g *gateListeners) Drain(ks []Key, fwd func(Packet) error) {
	g.fakeListeners.Drain(ks, fwd)
	g.gate.Forward(fwd)
}
