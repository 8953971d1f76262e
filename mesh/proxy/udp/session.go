package udp

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// maxPendingBytes bounds the payload a session queues while its upstream
// socket is being made; at least one datagram of any size fits.
const maxPendingBytes = maxDatagram

type session struct {
	key       Key
	cluster   string
	host      netip.AddrPort
	replyOOB  []byte
	replyAddr *net.UDPAddr
	lastSeen  atomic.Int64
	cstats    *metrics.Cluster
	bounds    *metrics.UDPBounds
	// release returns the session's circuit breaker connection.
	release func()

	// up is set once the upstream socket is made and the datagrams queued
	// meanwhile are sent; the serve loop sends directly from then on.
	up atomic.Pointer[upstream]

	mu           sync.Mutex
	pending      [][]byte
	pendingBytes int
	closed       bool
	// dialFailed: the upstream socket could not be made; what still
	// arrives for the session is an upstream error, as the queue was.
	dialFailed bool
}

type upstream struct {
	conn *net.UDPConn
	pc   batchWriter
	// plain is set once the route refused a segmented send.
	plain atomic.Bool
}

// batchWriter is sendmmsg: *ipv4.PacketConn, or a test's fake.
type batchWriter interface {
	WriteBatch(ms []ipv4.Message, flags int) (int, error)
}

func (s *session) touch() { s.lastSeen.Store(time.Now().UnixNano()) }

// close closes the upstream socket (or makes sure one still being made is
// closed once it exists), counts the queued datagrams it discards and
// releases the breaker; it is idempotent.
func (s *session) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.bounds.DialQueue.Add(float64(len(s.pending)))
	s.pending = nil
	s.mu.Unlock()
	if up := s.up.Load(); up != nil {
		_ = up.conn.Close()
	}
	s.release()
}

// start publishes the dialed socket after sending what was queued, under
// s.mu, so the queue goes out before anything the serve loop sends
// directly. It reports false if the session was closed meanwhile.
func (s *session) start(l *Listener, conn *net.UDPConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	up := &upstream{conn: conn, pc: ipv4.NewPacketConn(conn)}
	out := make([]ipv4.Message, len(s.pending))
	for i, p := range s.pending {
		out[i].Buffers = [][]byte{p}
	}
	l.sendUp(s, up, out)
	s.pending, s.pendingBytes = nil, 0
	s.up.Store(up)
	return true
}

// forward sends one batch's datagrams for s upstream, or queues copies of
// them while the upstream socket is being made.
func (l *Listener) forward(s *session, out []ipv4.Message) {
	if up := s.up.Load(); up != nil {
		l.sendUp(s, up, out)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if up := s.up.Load(); up != nil {
		l.sendUp(s, up, out)
		return
	}
	for _, m := range out {
		b := m.Buffers[0]
		switch {
		case s.dialFailed:
			l.stats.UpstreamError.Inc()
		case s.closed || (len(s.pending) > 0 && s.pendingBytes+len(b) > maxPendingBytes):
			l.bounds.DialQueue.Inc()
		default:
			s.pending = append(s.pending, append([]byte(nil), b...))
			s.pendingBytes += len(b)
		}
	}
}

// run makes the session's upstream socket off the serve loop, then relays
// the host's replies until the session closes.
func (l *Listener) run(s *session) {
	defer l.wg.Done()
	l.dials <- struct{}{}
	conn, err := transparent.DialUDP(l.opts.UpstreamNetns, netip.AddrPort{}, s.host, transparent.Options{Mark: l.opts.Mark})
	<-l.dials
	if err != nil {
		s.cstats.Errors.Inc()
		if ok, held := l.dialLog.allow(time.Now()); ok {
			l.opts.Log.Warn("upstream socket failed", "listener", l.name, "cluster", s.cluster, "host", s.host, "err", err, "unlogged_failures", held)
		}
		s.mu.Lock()
		s.dialFailed = true
		l.stats.UpstreamError.Add(float64(len(s.pending)))
		s.pending = nil
		s.mu.Unlock()
		l.remove(s)
		return
	}
	if !s.start(l, conn) {
		_ = conn.Close()
		return
	}
	l.replies(s, conn)
}

func (l *Listener) sendUp(s *session, up *upstream, out []ipv4.Message) {
	var err error
	sent := 0
	if len(out) == 1 {
		_, err = up.conn.Write(out[0].Buffers[0])
		if err == nil {
			sent = 1
		}
	} else {
		sent, err = up.sendBatch(out)
	}
	for i := range sent {
		s.cstats.Tx.Inc()
		s.cstats.TxBytes.Add(float64(len(out[i].Buffers[0])))
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		// ECONNREFUSED from an earlier ICMP is the host's answer, not ours
		// to act on: Envoy counts it and keeps the session until idle.
		s.cstats.Errors.Inc()
		l.stats.UpstreamError.Add(float64(len(out) - sent))
	}
}

// sendBatch sends out with as few packets through the stack as
// UDP_SEGMENT allows and returns how many datagrams went. The kernel
// refuses a segmented send with EIO on a route through IPsec (xfrm), and
// before Linux 6.11 also through a device without transmit checksum
// offload; the session then sends plainly from there on.
func (up *upstream) sendBatch(out []ipv4.Message) (int, error) {
	if up.plain.Load() {
		return writeAll(up.pc, out, nil)
	}
	msgs, counts := packGSO(out)
	sent, err := writeAll(up.pc, msgs, counts)
	if errors.Is(err, unix.EIO) {
		up.plain.Store(true)
		n, err := writeAll(up.pc, out[sent:], nil)
		return sent + n, err
	}
	return sent, err
}

// writeAll writes msgs until done or an error; counts[i], when given, is
// how many datagrams msgs[i] carries. It returns the datagrams sent.
func writeAll(pc batchWriter, msgs []ipv4.Message, counts []int) (int, error) {
	sent := 0
	for i := 0; i < len(msgs); {
		k, err := pc.WriteBatch(msgs[i:], 0)
		for j := i; j < i+k; j++ {
			if counts == nil {
				sent++
			} else {
				sent += counts[j]
			}
		}
		i += k
		if err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// packGSO packs each run of equal-size datagrams into one message whose
// UDP_SEGMENT control message has the kernel split it into those
// datagrams, so the run crosses the stack as one packet. counts[i] is how
// many datagrams msgs[i] carries.
func packGSO(out []ipv4.Message) (msgs []ipv4.Message, counts []int) {
	for i := 0; i < len(out); {
		size := len(out[i].Buffers[0])
		j, total := i+1, size
		for j < len(out) && size > 0 && len(out[j].Buffers[0]) == size && total+size <= maxGSOBytes && j-i < maxGSOSegments {
			total += size
			j++
		}
		m := ipv4.Message{Buffers: make([][]byte, 0, j-i)}
		for _, o := range out[i:j] {
			m.Buffers = append(m.Buffers, o.Buffers[0])
		}
		if j-i > 1 {
			m.OOB = segmentCmsg(size)
		}
		msgs, counts = append(msgs, m), append(counts, j-i)
		i = j
	}
	return msgs, counts
}

// The most one UDP_SEGMENT send may carry: its payload, and its segments
// (UDP_MAX_SEGMENTS, 64 before Linux 5.5 and 128 since). Empty datagrams
// are never packed: a segment size of 0 means no segmentation.
const (
	maxGSOBytes    = 65507
	maxGSOSegments = 64
)

func segmentCmsg(size int) []byte {
	b := make([]byte, unix.CmsgSpace(2))
	h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.CmsgLen(2))
	*(*uint16)(unsafe.Pointer(&b[unix.CmsgLen(0)])) = uint16(size)
	return b
}

// replies forwards datagrams from the session's host back to the client,
// from the listener socket, with the original destination as source. It
// waits for readability holding no buffer and takes buffers from the
// shared pool only for the burst it then reads.
func (l *Listener) replies(s *session, conn *net.UDPConn) {
	rc, err := conn.SyscallConn()
	if err != nil {
		l.remove(s)
		return
	}
	n := min(l.opts.Batch, 8)
	bufs := make([]*[]byte, n)
	lens := make([]int, n)
	back := make([]ipv4.Message, n)
	for i := range back {
		back[i].OOB, back[i].Addr = s.replyOOB, s.replyAddr
	}
	for {
		var got int
		var rerr error
		err := rc.Read(func(fd uintptr) bool {
			got, rerr = recvBurst(int(fd), bufs, lens)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		if err != nil {
			// The socket was closed: the session ended.
			return
		}
		if got == 0 {
			// ECONNREFUSED (ICMP port unreachable from the host) surfaces
			// here; the session lives on, as in Envoy.
			s.cstats.Errors.Inc()
			continue
		}
		s.touch()
		for i := range got {
			s.cstats.Rx.Inc()
			s.cstats.RxBytes.Add(float64(lens[i]))
			back[i].Buffers = [][]byte{(*bufs[i])[:lens[i]]}
		}
		l.sendDown(s, back[:got])
		for i := range got {
			back[i].Buffers = nil
			replyBufs.put(bufs[i])
			bufs[i] = nil
		}
	}
}

// recvBurst reads up to len(bufs) datagrams without blocking, taking each
// buffer from the pool as it is needed (waiting only for the first) and
// returning an unused one. It returns EAGAIN only when nothing was read,
// so the caller waits.
func recvBurst(fd int, bufs []*[]byte, lens []int) (int, error) {
	got := 0
	for got < len(bufs) {
		var b *[]byte
		if got == 0 {
			b = replyBufs.get()
		} else if b, _ = replyBufs.tryGet(); b == nil {
			return got, nil
		}
		k, _, _, _, err := unix.Recvmsg(fd, *b, nil, unix.MSG_DONTWAIT)
		if err != nil {
			replyBufs.put(b)
			if got > 0 && errors.Is(err, unix.EAGAIN) {
				return got, nil
			}
			return got, err
		}
		bufs[got], lens[got] = b, k
		got++
	}
	return got, nil
}

// sendDown writes replies to the client from the listener socket.
func (l *Listener) sendDown(s *session, back []ipv4.Message) {
	var err error
	sent := 0
	if len(back) == 1 {
		_, _, err = l.conn.WriteMsgUDPAddrPort(back[0].Buffers[0], s.replyOOB, s.key.Src)
		if err == nil {
			sent = 1
		}
	} else {
		for sent < len(back) && err == nil {
			var k int
			k, err = l.pc.WriteBatch(back[sent:], 0)
			sent += k
		}
	}
	for i := range sent {
		l.stats.Tx.Inc()
		l.stats.TxBytes.Add(float64(len(back[i].Buffers[0])))
	}
	if err != nil && !errors.Is(err, net.ErrClosed) {
		l.opts.Log.Warn("reply to downstream failed", "listener", l.name, "client", s.key.Src, "from", s.key.Dst, "err", err)
	}
}
