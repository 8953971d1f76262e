// Package udp is udp_proxy on a capture listener: one transparent socket in
// a pod's netns receives every captured datagram; per datagram the matcher
// picks a cluster from the destination (ipi_addr, the ClusterIP under
// mark-and-divert); a session per downstream 5-tuple holds a connected
// upstream socket in the proxy's own (node) netns carrying the passthrough
// mark; replies go back from the listener socket with ipi_spec_dst = the
// original destination, so a connected client accepts them
// (ARCHITECTURE.md, "The data path").
//
// Sessions follow Envoy's udp_proxy: the host is picked once per session,
// the idle timer is reset by traffic in either direction, a session whose
// cluster disappears or whose host leaves the cluster is closed, and a
// listener update keeps every session whose route is unchanged.
package udp

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/ipv4"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// maxDatagram is the largest UDP payload over IPv4.
const maxDatagram = 65535

// Clusters resolves a cluster name to its active (warm) cluster.
type Clusters interface {
	Active(name string) *cluster.Cluster
}

// Options tune the data path.
type Options struct {
	// Mark is SO_MARK on upstream sockets (CapturePassthroughFwMark).
	Mark uint32
	// Batch is how many datagrams one recvmmsg/sendmmsg moves; 1 uses
	// plain recvmsg/sendmsg.
	Batch int
	// UpstreamNetns is where upstream sockets are made; empty is the
	// proxy's own namespace (the node's: the proxy is hostNetwork).
	UpstreamNetns string
	Log           *slog.Logger
	Metrics       *metrics.Metrics
}

// Key is a session's downstream 5-tuple (the protocol is always UDP).
type Key struct {
	Src netip.AddrPort
	Dst netip.AddrPort
}

// Listener is one running UDP capture listener.
type Listener struct {
	name     string
	conn     *transparent.UDPConn
	pc       *ipv4.PacketConn
	cfg      atomic.Pointer[listener.UDP]
	clusters Clusters
	opts     Options
	stats    *metrics.UDPListener

	mu       sync.Mutex
	sessions map[Key]*session
	closed   bool

	done chan struct{}
	wg   sync.WaitGroup
}

type session struct {
	key       Key
	cluster   string
	host      netip.AddrPort
	up        *net.UDPConn
	upPC      *ipv4.PacketConn
	replyOOB  []byte
	replyAddr *net.UDPAddr
	lastSeen  atomic.Int64
	cstats    *metrics.Cluster
	closeOnce sync.Once
}

// Listen opens the listener's socket (in its netns, transparent, with
// IP_PKTINFO and IP_RECVORIGDSTADDR) and starts serving.
func Listen(spec *listener.Spec, clusters Clusters, o Options) (*Listener, error) {
	if spec.UDP == nil {
		return nil, fmt.Errorf("listener %q is not a UDP listener", spec.Name)
	}
	if o.Batch < 1 {
		o.Batch = 1
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	c, err := transparent.ListenUDP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true})
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", spec.Name, err)
	}
	l := &Listener{
		name: spec.Name, conn: c, pc: ipv4.NewPacketConn(c.UDPConn), clusters: clusters, opts: o,
		stats: o.Metrics.UDPListener(spec.Name), sessions: map[Key]*session{}, done: make(chan struct{}),
	}
	l.cfg.Store(spec.UDP)
	l.wg.Add(2)
	go l.serve()
	go l.janitor()
	return l, nil
}

// Name is the listener's resource name.
func (l *Listener) Name() string { return l.name }

// LocalAddr is the bound address.
func (l *Listener) LocalAddr() netip.AddrPort { return l.conn.LocalAddr().(*net.UDPAddr).AddrPort() }

// Update swaps the udp_proxy configuration in place. The socket stays, and
// so does every session whose destination still routes to its cluster.
func (l *Listener) Update(cfg *listener.UDP) {
	// The store comes before the scan, and newSession re-checks under
	// l.mu, so a session is either seen by the scan or made from cfg.
	l.cfg.Store(cfg)
	l.closeWhere(func(s *session) bool { return !routedBy(cfg, s) })
}

// ClustersChanged closes sessions whose cluster is gone or whose host left
// it, as Envoy's udp_proxy does on cluster removal and host-set updates.
// The caller publishes the clusters before calling it (see Update).
func (l *Listener) ClustersChanged() {
	l.closeWhere(func(s *session) bool { return !l.hostActive(s) })
}

// routedBy reports whether cfg still sends s's destination to s's cluster.
func routedBy(cfg *listener.UDP, s *session) bool {
	c, ok := cfg.Matcher.Cluster(s.key.Dst.Addr())
	return ok && c == s.cluster
}

// hostActive reports whether s's cluster is active and still holds s's host.
func (l *Listener) hostActive(s *session) bool {
	c := l.clusters.Active(s.cluster)
	if c == nil {
		return false
	}
	for _, e := range c.Endpoints() {
		if e.Addr == s.host {
			return true
		}
	}
	return false
}

// Sessions returns the live sessions' keys.
func (l *Listener) Sessions() []Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Key, 0, len(l.sessions))
	for k := range l.sessions {
		out = append(out, k)
	}
	return out
}

// Close stops the listener and closes every session.
func (l *Listener) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()
	err := l.conn.Close()
	l.closeWhere(func(*session) bool { return true })
	l.wg.Wait()
	return err
}

func (l *Listener) closeWhere(pred func(*session) bool) {
	l.mu.Lock()
	var victims []*session
	for k, s := range l.sessions {
		if pred(s) {
			delete(l.sessions, k)
			victims = append(victims, s)
		}
	}
	l.mu.Unlock()
	for _, s := range victims {
		s.close()
		l.stats.Active.Dec()
	}
}

func (s *session) close() { s.closeOnce.Do(func() { _ = s.up.Close() }) }

func (s *session) touch() { s.lastSeen.Store(time.Now().UnixNano()) }

func (l *Listener) janitor() {
	defer l.wg.Done()
	for {
		idle := l.cfg.Load().IdleTimeout
		tick := min(max(idle/4, 10*time.Millisecond), time.Second)
		select {
		case <-l.done:
			return
		case <-time.After(tick):
		}
		cutoff := time.Now().Add(-idle).UnixNano()
		l.closeWhere(func(s *session) bool { return s.lastSeen.Load() < cutoff })
	}
}

// serve reads downstream datagrams, in batches when configured.
func (l *Listener) serve() {
	defer l.wg.Done()
	n := l.opts.Batch
	msgs := make([]ipv4.Message, n)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, maxDatagram)}
		msgs[i].OOB = make([]byte, transparent.ControlLen)
	}
	// Upstream writes are grouped per session within one batch, so a
	// client's burst costs one sendmmsg.
	var out []ipv4.Message
	for {
		var got int
		var err error
		if n == 1 {
			var k, oobn int
			var src netip.AddrPort
			k, oobn, _, src, err = l.conn.ReadMsgUDPAddrPort(msgs[0].Buffers[0], msgs[0].OOB)
			msgs[0].N, msgs[0].NN, msgs[0].Addr = k, oobn, net.UDPAddrFromAddrPort(src)
			got = 1
		} else {
			got, err = l.pc.ReadBatch(msgs, 0)
		}
		if err != nil {
			if l.isClosed() {
				return
			}
			l.opts.Log.Warn("udp listener read failed", "listener", l.name, "err", err)
			continue
		}
		var prev *session
		out = out[:0]
		for i := range got {
			m := &msgs[i]
			s := l.route(m)
			if s == nil {
				continue
			}
			if prev != nil && s != prev {
				l.sendUp(prev, out)
				out = out[:0]
			}
			prev = s
			out = append(out, ipv4.Message{Buffers: [][]byte{m.Buffers[0][:m.N]}})
		}
		if prev != nil {
			l.sendUp(prev, out)
		}
	}
}

func (l *Listener) isClosed() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// route accounts for one downstream datagram and returns its session,
// creating it when needed; nil means the datagram is dropped (and counted).
func (l *Listener) route(m *ipv4.Message) *session {
	l.stats.Rx.Inc()
	l.stats.RxBytes.Add(float64(m.N))
	meta, err := transparent.ParseControl(m.OOB[:m.NN])
	if err != nil || !meta.Dst.IsValid() {
		l.stats.NoOriginalDst.Inc()
		return nil
	}
	src := m.Addr.(*net.UDPAddr).AddrPort()
	dport := meta.OrigDst.Port()
	if dport == 0 {
		dport = l.LocalAddr().Port()
	}
	key := Key{Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Dst: netip.AddrPortFrom(meta.Dst.Unmap(), dport)}
	l.mu.Lock()
	s := l.sessions[key]
	l.mu.Unlock()
	if s != nil {
		s.touch()
		return s
	}
	return l.newSession(key)
}

// staleRetries bounds how often newSession starts over because an update
// landed while it dialed; each retry needs another update in that window.
const staleRetries = 3

// beforeInsert, when set (by tests only), runs after newSession has routed
// and dialed and before it takes l.mu to insert: the window an update can
// land in.
var beforeInsert func(l *Listener, key Key)

func (l *Listener) newSession(key Key) *session {
	for range staleRetries {
		s, stale := l.tryNewSession(key)
		if !stale {
			return s
		}
	}
	// Updates kept landing mid-dial; the client's next datagram retries.
	l.stats.NoRoute.Inc()
	return nil
}

// tryNewSession routes key with the current configuration and inserts the
// session only if that route still holds under l.mu. An Update or
// ClustersChanged that scanned the map while this one dialed did not see
// the session, so without the re-check it would outlive its route until
// idle; stale reports that case, and the caller routes again.
func (l *Listener) tryNewSession(key Key) (s *session, stale bool) {
	cfg := l.cfg.Load()
	name, ok := cfg.Matcher.Cluster(key.Dst.Addr())
	if !ok {
		l.stats.NoRoute.Inc()
		return nil, false
	}
	c := l.clusters.Active(name)
	if c == nil {
		l.stats.NoCluster.Inc()
		return nil, false
	}
	cs := l.opts.Metrics.Cluster(name)
	host, err := c.Pick()
	if err != nil {
		l.stats.NoHealthy.Inc()
		cs.NoneHealthy.Inc()
		return nil, false
	}
	up, err := transparent.DialUDP(l.opts.UpstreamNetns, netip.AddrPort{}, host, transparent.Options{Mark: l.opts.Mark})
	if err != nil {
		l.stats.UpstreamError.Inc()
		cs.Errors.Inc()
		l.opts.Log.Warn("upstream socket failed", "listener", l.name, "cluster", name, "host", host, "err", err)
		return nil, false
	}
	s = &session{
		key: key, cluster: name, host: host, up: up, upPC: ipv4.NewPacketConn(up),
		replyOOB: transparent.PktinfoFrom(key.Dst.Addr()), replyAddr: net.UDPAddrFromAddrPort(key.Src), cstats: cs,
	}
	s.touch()
	if beforeInsert != nil {
		beforeInsert(l, key)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		s.close()
		return nil, false
	}
	if !routedBy(l.cfg.Load(), s) || !l.hostActive(s) {
		l.mu.Unlock()
		s.close()
		return nil, true
	}
	l.sessions[key] = s
	l.mu.Unlock()
	l.stats.Sessions.Inc()
	l.stats.Active.Inc()
	cs.Sessions.Inc()
	l.wg.Add(1)
	go l.replies(s)
	return s, false
}

func (l *Listener) sendUp(s *session, out []ipv4.Message) {
	var err error
	sent := 0
	if len(out) == 1 {
		_, err = s.up.Write(out[0].Buffers[0])
		if err == nil {
			sent = 1
		}
	} else {
		for sent < len(out) && err == nil {
			var k int
			k, err = s.upPC.WriteBatch(out[sent:], 0)
			sent += k
		}
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

// replies forwards datagrams from the session's host back to the client,
// from the listener socket, with the original destination as source.
func (l *Listener) replies(s *session) {
	defer l.wg.Done()
	n := min(l.opts.Batch, 8)
	in := make([]ipv4.Message, n)
	back := make([]ipv4.Message, n)
	for i := range in {
		in[i].Buffers = [][]byte{make([]byte, maxDatagram)}
		back[i].OOB, back[i].Addr = s.replyOOB, s.replyAddr
	}
	for {
		var got int
		var err error
		if n == 1 {
			got = 1
			in[0].N, err = s.up.Read(in[0].Buffers[0])
		} else {
			got, err = s.upPC.ReadBatch(in, 0)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// ECONNREFUSED (ICMP port unreachable from the host) surfaces
			// here; the session lives on, as in Envoy.
			s.cstats.Errors.Inc()
			continue
		}
		s.touch()
		for i := range got {
			s.cstats.Rx.Inc()
			s.cstats.RxBytes.Add(float64(in[i].N))
			back[i].Buffers = [][]byte{in[i].Buffers[0][:in[i].N]}
		}
		if got == 1 {
			_, _, err = l.conn.WriteMsgUDPAddrPort(back[0].Buffers[0], s.replyOOB, s.key.Src)
			if err == nil {
				l.stats.Tx.Inc()
				l.stats.TxBytes.Add(float64(in[0].N))
			}
		} else {
			sent := 0
			for sent < got && err == nil {
				var k int
				k, err = l.pc.WriteBatch(back[sent:got], 0)
				sent += k
			}
			for i := range sent {
				l.stats.Tx.Inc()
				l.stats.TxBytes.Add(float64(in[i].N))
			}
		}
		if err != nil && !errors.Is(err, net.ErrClosed) {
			l.opts.Log.Warn("reply to downstream failed", "listener", l.name, "client", s.key.Src, "from", s.key.Dst, "err", err)
		}
	}
}
