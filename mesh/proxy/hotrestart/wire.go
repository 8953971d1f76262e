package hotrestart

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// The rendezvous is a SOCK_SEQPACKET unix socket: each message is one
// record, delivered whole and in order, and a descriptor rides with the
// record that names it. A record's first byte says what it holds.
const (
	recControl = 'C' // a JSON message
	recPacket  = 'P' // a QUIC packet forwarded from parent to child
)

// Message types; a request is answered with a message of the same type,
// or of typeError.
const (
	typeHello     = "hello"     // child → parent: its epoch; the reply: the parent's
	typeSocket    = "socket"    // child → parent: Key; the reply: Found and Kind, with the descriptor
	typeAdmin     = "admin"     // child → parent: shut the admin listener
	typeDrain     = "drain"     // child → parent: drain what was handed over
	typeTerminate = "terminate" // child → parent: exit; no reply, the parent closes
	typeError     = "error"
)

type message struct {
	Type  string `json:"type"`
	Epoch uint32 `json:"epoch,omitempty"`
	Key   *Key   `json:"key,omitempty"`
	Found bool   `json:"found,omitempty"`
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
}

// maxRecord bounds a record: a QUIC packet (at most 64 KiB of UDP payload)
// with its key, address and control messages.
const maxRecord = 1<<16 + 4096

func encodeControl(m message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("failed to encode %s message: %w", m.Type, err)
	}
	return append([]byte{recControl}, b...), nil
}

// Packet is one datagram a draining parent read from a handed-over QUIC
// socket and passes to the child: its payload, its sender and the control
// messages the kernel gave with it (IP_PKTINFO, the ECN bits), so that the
// child's quic-go answers it as it would have answered the datagram read
// from the socket itself.
type Packet struct {
	Key     string
	From    netip.AddrPort
	OOB     []byte
	Payload []byte
}

// encodePacket lays out 'P', then key, address and OOB each with a 16-bit
// length, then the payload.
func encodePacket(p Packet) ([]byte, error) {
	addr, err := p.From.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("failed to encode packet source %s: %w", p.From, err)
	}
	if len(p.Key) > 0xffff || len(p.OOB) > 0xffff {
		return nil, fmt.Errorf("packet for %q: key or control messages too long", p.Key)
	}
	b := make([]byte, 0, 1+6+len(p.Key)+len(addr)+len(p.OOB)+len(p.Payload))
	b = append(b, recPacket)
	for _, f := range [][]byte{[]byte(p.Key), addr, p.OOB} {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return append(b, p.Payload...), nil
}

var errShortPacket = errors.New("packet record is truncated")

// decodePacket reads a record encodePacket wrote, after its type byte.
// The packet's slices are copies: the record's buffer is reused.
func decodePacket(b []byte) (Packet, error) {
	var fields [3][]byte
	for i := range fields {
		if len(b) < 2 {
			return Packet{}, errShortPacket
		}
		n := int(binary.BigEndian.Uint16(b))
		if len(b) < 2+n {
			return Packet{}, errShortPacket
		}
		fields[i], b = b[2:2+n], b[2+n:]
	}
	var p Packet
	if err := p.From.UnmarshalBinary(fields[1]); err != nil {
		return Packet{}, fmt.Errorf("packet source: %w", err)
	}
	p.Key = string(fields[0])
	p.OOB = append([]byte(nil), fields[2]...)
	p.Payload = append([]byte(nil), b...)
	return p, nil
}

// conn is one end of a rendezvous connection.
type conn struct {
	c   *net.UnixConn
	buf []byte
	oob []byte
}

func newConn(c *net.UnixConn) *conn {
	return &conn{c: c, buf: make([]byte, maxRecord), oob: make([]byte, unix.CmsgSpace(4))}
}

// send writes one control message, with fd (if not negative) passed along.
func (c *conn) send(m message, fd int) error {
	b, err := encodeControl(m)
	if err != nil {
		return err
	}
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := c.c.WriteMsgUnix(b, oob, nil); err != nil {
		return fmt.Errorf("failed to send %s message on %s: %w", m.Type, c.c.LocalAddr(), err)
	}
	return nil
}

// sendRaw writes one record.
func (c *conn) sendRaw(b []byte) error {
	_, _, err := c.c.WriteMsgUnix(b, nil, nil)
	return err
}

// recv reads one record: its type, its body (valid until the next recv)
// and the descriptor that came with it (-1 if none).
func (c *conn) recv() (byte, []byte, int, error) {
	n, oobn, flags, _, err := c.c.ReadMsgUnix(c.buf, c.oob)
	if err != nil {
		return 0, nil, -1, err
	}
	fd, ferr := passedFD(c.oob[:oobn])
	if flags&(unix.MSG_TRUNC|unix.MSG_CTRUNC) != 0 {
		closeFD(fd)
		return 0, nil, -1, fmt.Errorf("record on %s was truncated (flags %#x)", c.c.LocalAddr(), flags)
	}
	if ferr != nil {
		return 0, nil, -1, ferr
	}
	if n == 0 {
		closeFD(fd)
		return 0, nil, -1, errEOF
	}
	return c.buf[0], c.buf[1:n], fd, nil
}

var errEOF = errors.New("the other end closed the rendezvous")

func passedFD(oob []byte) (int, error) {
	if len(oob) == 0 {
		return -1, nil
	}
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return -1, fmt.Errorf("failed to parse passed descriptor: %w", err)
	}
	fd := -1
	for _, m := range msgs {
		fds, err := unix.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, f := range fds {
			if fd < 0 {
				fd = f
			} else {
				closeFD(f)
			}
		}
	}
	return fd, nil
}

func closeFD(fd int) {
	if fd >= 0 {
		_ = unix.Close(fd)
	}
}

func decodeControl(b []byte) (message, error) {
	var m message
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("malformed control message: %w", err)
	}
	return m, nil
}
