// Package udp is udp_proxy on a capture listener: one transparent socket in
// a pod's netns receives every captured datagram; per datagram the matcher
// picks a cluster from the destination (ipi_addr, the ClusterIP under
// mark-and-divert); a session per downstream 5-tuple holds a connected
// upstream socket in the proxy's own (node) netns, with no SO_MARK unless
// Options.Mark sets one (ARCHITECTURE.md, "The pinned numbers and marks":
// in the node netns kube-proxy's KUBE-FIREWALL drops 0xae7e); replies go
// back from the listener socket with ipi_spec_dst = the original
// destination, so a connected client accepts them (ARCHITECTURE.md, "The
// data path").
//
// Sessions follow Envoy's udp_proxy: the host is picked once per session,
// the idle timer is reset by traffic in either direction, a session whose
// cluster disappears or whose host leaves the cluster is closed, and a
// listener update keeps every session whose route is unchanged.
//
// What one peer can take is bounded: the cluster's max_connections circuit
// breaker caps its sessions (Breakers) and the overflow is counted; the
// upstream socket is made off the serve loop, with the datagrams that
// arrive meanwhile queued in order up to a bound; reply buffers come from
// a shared pool; failed reads back off.
//
// Datagrams move in batches: recvmmsg on the capture socket, which has
// UDP_GRO so a client's segmented send is read whole (and split), and
// UDP_SEGMENT runs on the upstream socket (BenchmarkUDPOverload).
package udp

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
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
	// Mark is SO_MARK on upstream sockets; zero, the default, sets none
	// (aether-proxy --mark, checked against the node netns's marks).
	Mark uint32
	// Batch is how many datagrams one recvmmsg/sendmmsg moves; 1 uses
	// plain recvmsg/sendmsg.
	Batch int
	// UpstreamNetns is where upstream sockets are made; empty is the
	// proxy's own namespace (the node's: the proxy is hostNetwork).
	UpstreamNetns string
	// Breakers counts sessions against each cluster's max_connections;
	// a proxy passes one to all its listeners. Nil: the listener's own.
	Breakers *Breakers
	Log      *slog.Logger
	Metrics  *metrics.Metrics
	// From is the socket a hot restart's previous process handed over for
	// this address; nil binds a new one.
	From *os.File

	// hooks are set by this package's tests only.
	hooks hooks
}

// hooks let tests force an interleaving or a fault.
type hooks struct {
	// beforeInsert runs after a new session is routed and before it takes
	// l.mu to insert: the window an update can land in.
	beforeInsert func(l *Listener, key Key)
	// read replaces the capture socket read.
	read func(msgs []ipv4.Message) (int, error)
}

// captureRecvBuf is the capture socket's receive buffer. The kernel's
// default (rmem_default, 208 KiB) holds about 90 datagrams of 1,200 bytes,
// so any pause of the serve loop longer than about 3 ms at 300 Mb/s drops
// datagrams (RcvbufErrors in the pod netns). 16 MiB rides out pauses of
// about 200 ms at that rate; the memory is taken only while datagrams
// queue, and net.ipv4.udp_mem bounds all UDP sockets together.
// BenchmarkUDPOverload measures the difference (mesh/README.md).
const captureRecvBuf = 16 << 20

// dialWorkers bounds how many upstream sockets a listener makes at once;
// in a netns each holds an OS thread while it does.
const dialWorkers = 4

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
	bounds   *metrics.UDPBounds
	dials    chan struct{}
	dialLog  logLimit

	mu       sync.Mutex
	sessions map[Key]*session
	closed   bool
	// resume is non-nil while reading is paused (Drain), closed to resume.
	resume chan struct{}

	done chan struct{}
	wg   sync.WaitGroup
}

// Listen opens the listener's socket (in its netns, transparent, with
// IP_PKTINFO, IP_RECVORIGDSTADDR, UDP_GRO and a captureRecvBuf receive
// buffer) and starts serving.
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
	if o.Breakers == nil {
		o.Breakers = NewBreakers()
	}
	c, err := transparent.ListenUDP(spec.Socket.NetnsPath, spec.Socket.Addr, transparent.Options{Transparent: spec.Socket.Transparent, ReuseAddr: true, RecvBuf: captureRecvBuf, GRO: true, From: o.From})
	if err != nil {
		return nil, fmt.Errorf("listener %q: %w", spec.Name, err)
	}
	l := &Listener{
		name: spec.Name, conn: c, pc: ipv4.NewPacketConn(c.UDPConn), clusters: clusters, opts: o,
		stats: o.Metrics.UDPListener(spec.Name), bounds: o.Metrics.UDPBounds(spec.Name),
		dials: make(chan struct{}, dialWorkers), sessions: map[Key]*session{}, done: make(chan struct{}),
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

// Drain stops reading the capture socket, leaving it open (a hot
// restart's child reads it) and every session running: replies still
// reach their clients, and datagrams the kernel queues meanwhile wait for
// whichever process reads next.
func (l *Listener) Drain() error {
	l.mu.Lock()
	if l.resume == nil && !l.closed {
		l.resume = make(chan struct{})
	}
	l.mu.Unlock()
	// A deadline ends the read in progress without taking a datagram.
	return l.conn.SetReadDeadline(time.Now())
}

// Resume reads again after Drain.
func (l *Listener) Resume() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.resume == nil {
		return nil
	}
	err := l.conn.SetReadDeadline(time.Time{})
	close(l.resume)
	l.resume = nil
	return err
}

// paused waits while reading is paused; it reports whether it was, and
// false for open once the listener closed.
func (l *Listener) paused() (was, open bool) {
	l.mu.Lock()
	r := l.resume
	l.mu.Unlock()
	if r == nil {
		return false, true
	}
	select {
	case <-r:
		return true, true
	case <-l.done:
		return true, false
	}
}

// SyscallConn is the capture socket's, to hand it over.
func (l *Listener) SyscallConn() (syscall.RawConn, error) { return l.conn.SyscallConn() }

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

// remove closes s if the map still holds it.
func (l *Listener) remove(s *session) {
	l.mu.Lock()
	held := l.sessions[s.key] == s
	if held {
		delete(l.sessions, s.key)
	}
	l.mu.Unlock()
	if held {
		s.close()
		l.stats.Active.Dec()
	}
}

// serve reads downstream datagrams, in batches when configured, until the
// listener closes.
func (l *Listener) serve() {
	defer l.wg.Done()
	msgs := make([]ipv4.Message, l.opts.Batch)
	for i := range msgs {
		msgs[i].Buffers = [][]byte{make([]byte, maxDatagram)}
		msgs[i].OOB = make([]byte, transparent.ControlLen)
	}
	read := l.opts.hooks.read
	if read == nil {
		read = l.read
	}
	var retry backoff
	var out []ipv4.Message
	for {
		got, err := read(msgs)
		if err != nil {
			if was, open := l.paused(); was {
				if !open {
					return
				}
				continue
			}
			if l.isClosed() || !l.backOff(&retry, err) {
				return
			}
			continue
		}
		retry.succeeded()
		out = l.dispatch(msgs[:got], out[:0])
	}
}

// dispatch routes one batch's datagrams and sends them upstream, grouped
// per session so a client's burst costs one sendmmsg; out is scratch
// space, returned for reuse.
func (l *Listener) dispatch(msgs []ipv4.Message, out []ipv4.Message) []ipv4.Message {
	var prev *session
	for i := range msgs {
		m := &msgs[i]
		key, step, ok := l.classify(m)
		if !ok {
			continue
		}
		// A UDP_GRO buffer holds several datagrams; each is routed and
		// counted as the client sent it.
		b := m.Buffers[0][:m.N]
		for off := 0; off < max(len(b), 1); off += step {
			d := b[off:min(off+step, len(b))]
			s := l.route(key, len(d))
			if s == nil {
				continue
			}
			if prev != nil && s != prev {
				l.forward(prev, out)
				out = out[:0]
			}
			prev = s
			out = append(out, ipv4.Message{Buffers: [][]byte{d}})
		}
	}
	if prev != nil {
		l.forward(prev, out)
	}
	return out
}

// read is one recvmsg, or one recvmmsg when batching.
func (l *Listener) read(msgs []ipv4.Message) (int, error) {
	if len(msgs) > 1 {
		return l.pc.ReadBatch(msgs, 0)
	}
	n, oobn, _, src, err := l.conn.ReadMsgUDPAddrPort(msgs[0].Buffers[0], msgs[0].OOB)
	msgs[0].N, msgs[0].NN, msgs[0].Addr = n, oobn, net.UDPAddrFromAddrPort(src)
	return 1, err
}

// backOff counts a failed read, logs it within the rate limit and waits
// before the next; it reports false if the listener closed meanwhile.
func (l *Listener) backOff(b *backoff, err error) bool {
	l.bounds.RxErrors.Inc()
	wait, log, unlogged := b.failed(time.Now())
	if log {
		l.opts.Log.Warn("udp listener read failed; backing off", "listener", l.name, "err", err, "wait", wait, "unlogged_failures", unlogged)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-l.done:
		return false
	case <-t.C:
		return true
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

// classify reads a received buffer's control messages: the session key
// and the size of the datagrams the buffer holds (its length unless
// UDP_GRO joined several). A buffer without a destination is dropped and
// counted.
func (l *Listener) classify(m *ipv4.Message) (key Key, step int, ok bool) {
	meta, err := transparent.ParseControl(m.OOB[:m.NN])
	if err != nil || !meta.Dst.IsValid() {
		l.stats.Rx.Inc()
		l.stats.RxBytes.Add(float64(m.N))
		l.stats.NoOriginalDst.Inc()
		return Key{}, 0, false
	}
	src := m.Addr.(*net.UDPAddr).AddrPort()
	dport := meta.OrigDst.Port()
	if dport == 0 {
		dport = l.LocalAddr().Port()
	}
	// An empty datagram is one datagram too.
	step = max(m.N, 1)
	if meta.SegmentSize > 0 && meta.SegmentSize < m.N {
		step = meta.SegmentSize
	}
	return Key{Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Dst: netip.AddrPortFrom(meta.Dst.Unmap(), dport)}, step, true
}

// route accounts for one downstream datagram of n bytes and returns its
// session, creating it when needed; nil means the datagram is dropped (and
// counted).
func (l *Listener) route(key Key, n int) *session {
	l.stats.Rx.Inc()
	l.stats.RxBytes.Add(float64(n))
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
// landed between its route and its insert; each retry needs another
// update in that window.
const staleRetries = 3

func (l *Listener) newSession(key Key) *session {
	for range staleRetries {
		s, stale := l.tryNewSession(key)
		if !stale {
			return s
		}
	}
	// Updates kept landing; the client's next datagram retries.
	l.stats.NoRoute.Inc()
	return nil
}

// tryNewSession routes key with the current configuration, takes one of
// the cluster's connections, and inserts the session only if that route
// still holds under l.mu. An Update or ClustersChanged that scanned the map
// in between did not see the session, so without the re-check it would
// outlive its route until idle; stale reports that case, and the caller
// routes again. The upstream socket is made afterwards, off the serve loop
// (run); datagrams that arrive meanwhile queue on the session in order.
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
	if !l.opts.Breakers.acquire(name, c.Spec.MaxConnections) {
		l.bounds.Overflow.Inc()
		l.opts.Metrics.ClusterOverflow(name).Inc()
		return nil, false
	}
	s = &session{
		key: key, cluster: name, host: host, cstats: cs, bounds: l.bounds,
		replyOOB: transparent.PktinfoFrom(key.Dst.Addr()), replyAddr: net.UDPAddrFromAddrPort(key.Src),
		release: func() { l.opts.Breakers.release(name) },
	}
	s.touch()
	if h := l.opts.hooks.beforeInsert; h != nil {
		h(l, key)
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
	go l.run(s)
	return s, false
}
