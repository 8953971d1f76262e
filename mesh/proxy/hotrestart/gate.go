package hotrestart

import (
	"crypto/rand"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"golang.org/x/net/ipv4"
)

// ConnectionIDLen is the length of the connection IDs a proxy's QUIC
// listeners issue: a 4-byte tag of the process, then 4 random bytes.
const ConnectionIDLen = 8

// ConnectionIDs issues a process's QUIC connection IDs. Their tag tells a
// draining parent, from any packet's destination connection ID alone,
// whether the packet is for one of its connections: it keeps no table of
// them. The tag's last byte is the epoch's, so a parent's and its child's
// tags always differ.
type ConnectionIDs struct{ tag [4]byte }

// NewConnectionIDs returns the issuer of the process of epoch.
func NewConnectionIDs(epoch uint32) *ConnectionIDs {
	var c ConnectionIDs
	// crypto/rand.Read never fails: it crashes the program instead.
	_, _ = rand.Read(c.tag[:3])
	c.tag[3] = byte(epoch)
	return &c
}

// GenerateConnectionID implements quic.ConnectionIDGenerator.
func (c *ConnectionIDs) GenerateConnectionID() (quic.ConnectionID, error) {
	var b [ConnectionIDLen]byte
	copy(b[:], c.tag[:])
	_, _ = rand.Read(b[len(c.tag):])
	return quic.ConnectionIDFromBytes(b[:]), nil
}

// ConnectionIDLen implements quic.ConnectionIDGenerator.
func (c *ConnectionIDs) ConnectionIDLen() int { return ConnectionIDLen }

// Issued reports whether a QUIC packet's destination connection ID is one
// c issued. A long header states the ID's length; a short header's is
// ConnectionIDLen, the one length this process's listeners use.
func (c *ConnectionIDs) Issued(pkt []byte) bool {
	if len(pkt) == 0 {
		return false
	}
	var dcid []byte
	if pkt[0]&0x80 != 0 {
		// Long header: flags, version (4), DCID length, DCID.
		if len(pkt) < 6 || int(pkt[5]) != ConnectionIDLen || len(pkt) < 6+ConnectionIDLen {
			return false
		}
		dcid = pkt[6 : 6+ConnectionIDLen]
	} else {
		if len(pkt) < 1+ConnectionIDLen {
			return false
		}
		dcid = pkt[1 : 1+ConnectionIDLen]
	}
	return [4]byte(dcid[:4]) == c.tag
}

// Gate stands between a QUIC listener's socket and quic-go, which reads
// through it (it is a quic.OOBCapablePacketConn with ReadBatch, so quic-go
// keeps its batched reads, GSO and IP_PKTINFO). It passes everything by
// default. In a draining parent it forwards every packet that is not for
// one of the parent's connections; in a child it holds: quic-go gets only
// what the parent forwards until the parent is gone, and then the socket.
type Gate struct {
	*net.UDPConn
	key  string
	ids  *ConnectionIDs
	pc   *ipv4.PacketConn
	fwdN atomic.Int64

	mu       sync.Mutex
	forward  func(Packet) error
	held     chan Packet
	deadline time.Time
	wake     chan struct{}
}

// heldQueue bounds the forwarded packets waiting for the child's quic-go;
// the parent's sends block beyond it, and the socket's own buffer holds
// what arrives meanwhile.
const heldQueue = 1024

// NewGate wraps the socket of the listener bound at k; ids are the
// process's connection IDs, which its quic.Transport must issue.
func NewGate(c *net.UDPConn, k Key, ids *ConnectionIDs) *Gate {
	return &Gate{UDPConn: c, key: k.String(), ids: ids, pc: ipv4.NewPacketConn(c), wake: make(chan struct{})}
}

// Forward starts passing the packets not for this process's connections
// to fwd; nil stops it. A packet fwd fails on stays here.
func (g *Gate) Forward(fwd func(Packet) error) {
	g.mu.Lock()
	g.forward = fwd
	g.mu.Unlock()
}

// Forwarded counts the packets passed on.
func (g *Gate) Forwarded() int64 { return g.fwdN.Load() }

func (g *Gate) hold() {
	g.mu.Lock()
	g.held = make(chan Packet, heldQueue)
	g.mu.Unlock()
}

// hand queues a packet the parent forwarded.
func (g *Gate) hand(p Packet) {
	g.mu.Lock()
	q := g.held
	g.mu.Unlock()
	if q != nil {
		q <- p
	}
}

// release ends holding: once the queued packets are read, the socket is.
func (g *Gate) release() {
	g.mu.Lock()
	q := g.held
	g.mu.Unlock()
	if q != nil {
		close(q)
	}
}

// SetReadDeadline applies to the socket and to waiting for held packets.
func (g *Gate) SetReadDeadline(t time.Time) error {
	g.mu.Lock()
	g.deadline = t
	close(g.wake)
	g.wake = make(chan struct{})
	g.mu.Unlock()
	return g.UDPConn.SetReadDeadline(t)
}

// SetDeadline sets both deadlines.
func (g *Gate) SetDeadline(t time.Time) error {
	if err := g.SetReadDeadline(t); err != nil {
		return err
	}
	return g.UDPConn.SetWriteDeadline(t)
}

// ReadBatch is quic-go's read.
func (g *Gate) ReadBatch(ms []ipv4.Message, flags int) (int, error) {
	for {
		g.mu.Lock()
		held, fwd := g.held, g.forward
		g.mu.Unlock()
		if held != nil {
			n, err, released := g.readHeld(held, ms)
			if !released || n > 0 {
				return n, err
			}
			continue
		}
		n, err := g.pc.ReadBatch(ms, flags)
		if err != nil || n == 0 || fwd == nil {
			return n, err
		}
		if kept := g.divert(ms[:n], fwd); kept > 0 {
			return kept, nil
		}
	}
}

// divert forwards the packets of ms that are not this process's and
// moves the rest to the front, copying: each message's buffer belongs to
// its slot (quic-go's packet buffers are indexed by slot).
func (g *Gate) divert(ms []ipv4.Message, fwd func(Packet) error) int {
	kept := 0
	for i := range ms {
		m := &ms[i]
		data := m.Buffers[0][:m.N]
		if !g.ids.Issued(data) && g.send(m, data, fwd) {
			continue
		}
		if kept != i {
			moveMessage(&ms[kept], m)
		}
		kept++
	}
	return kept
}

func (g *Gate) send(m *ipv4.Message, data []byte, fwd func(Packet) error) bool {
	ua, ok := m.Addr.(*net.UDPAddr)
	if !ok {
		return false
	}
	if err := fwd(Packet{Key: g.key, From: ua.AddrPort(), OOB: m.OOB[:m.NN], Payload: data}); err != nil {
		return false
	}
	g.fwdN.Add(1)
	return true
}

func moveMessage(dst, src *ipv4.Message) {
	dst.N = copy(dst.Buffers[0][:cap(dst.Buffers[0])], src.Buffers[0][:src.N])
	dst.NN = copy(dst.OOB[:cap(dst.OOB)], src.OOB[:src.NN])
	dst.Addr, dst.Flags = src.Addr, src.Flags
}

// readHeld fills ms from the held queue, waiting for at least one packet
// until the read deadline. released says the queue ended: the parent is
// gone and the socket is to be read.
func (g *Gate) readHeld(held chan Packet, ms []ipv4.Message) (n int, err error, released bool) {
	for {
		g.mu.Lock()
		dl, wake := g.deadline, g.wake
		g.mu.Unlock()
		var expire <-chan time.Time
		if !dl.IsZero() {
			d := time.Until(dl)
			if d <= 0 {
				return 0, os.ErrDeadlineExceeded, false
			}
			t := time.NewTimer(d)
			defer t.Stop()
			expire = t.C
		}
		select {
		case p, ok := <-held:
			if !ok {
				g.mu.Lock()
				if g.held == held {
					g.held = nil
				}
				g.mu.Unlock()
				return 0, nil, true
			}
			putMessage(&ms[0], p)
			return 1 + fillHeld(held, ms[1:]), nil, false
		case <-expire:
			return 0, os.ErrDeadlineExceeded, false
		case <-wake:
		}
	}
}

// fillHeld takes what is queued without waiting.
func fillHeld(held chan Packet, ms []ipv4.Message) int {
	for i := range ms {
		select {
		case p, ok := <-held:
			if !ok {
				return i
			}
			putMessage(&ms[i], p)
		default:
			return i
		}
	}
	return len(ms)
}

func putMessage(m *ipv4.Message, p Packet) {
	m.N = copy(m.Buffers[0][:cap(m.Buffers[0])], p.Payload)
	m.NN = copy(m.OOB[:cap(m.OOB)], p.OOB)
	m.Addr = net.UDPAddrFromAddrPort(p.From)
	m.Flags = 0
}
