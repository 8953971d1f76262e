package passthrough

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/sni"
)

// The QUIC forwarder's default bounds.
const (
	// DefaultMaxFlows is Envoy's default max_connections circuit
	// breaker, which udp_proxy counts sessions against.
	DefaultMaxFlows = 1024
	// DefaultMaxPendingFlows caps flows still waiting for their whole
	// ClientHello: what a spray of forged (but valid) Initials can hold.
	DefaultMaxPendingFlows = 256
	// DefaultMaxPendingBytes caps the datagrams one pending flow holds:
	// a post-quantum ClientHello's two or three Initials and the 0-RTT
	// packets sent with them.
	DefaultMaxPendingBytes = 32 << 10
	// DefaultIdleTimeout is udp_proxy's idle_timeout default.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultPendingTimeout bounds how long a ClientHello may take, as
	// listener_filters_timeout does for TCP.
	DefaultPendingTimeout = DefaultInspectTimeout
	// DefaultMaxCIDsPerFlow bounds the connection IDs one flow is found
	// by: the client's first DCID, the server's SCIDs (Retry's and the
	// handshake's), and DCIDs a client switched to on a known address.
	DefaultMaxCIDsPerFlow = 8
)

// maxDatagram is the largest UDP payload over IPv4.
const maxDatagram = 65535

// QUICOptions tune the QUIC forwarder; zero values are the defaults.
type QUICOptions struct {
	// Name is the listener's, for counters and logs.
	Name            string
	MaxFlows        int
	MaxPendingFlows int
	MaxPendingBytes int
	// MaxClientHello bounds the CRYPTO bytes reassembled per pending
	// flow (sni.DefaultMaxClientHello).
	MaxClientHello int
	IdleTimeout    time.Duration
	PendingTimeout time.Duration
	MaxCIDsPerFlow int
	// DialUpstream makes a flow's connected socket to its upstream; nil
	// is a plain one in the process's own netns. The proxy makes it in
	// its upstream netns, with its mark.
	DialUpstream func(addr netip.AddrPort) (*net.UDPConn, error)
	Metrics      *Metrics
	Log          *slog.Logger
}

// QUIC is QUIC passthrough by SNI on one UDP socket.
//
// A datagram from an address no flow holds must open as a client Initial
// (sni.InitialReader): it starts a pending flow, which holds that
// client's datagrams (more Initials, 0-RTT) until the ClientHello is
// whole, within MaxPendingBytes. Then the filter chain for its SNI picks
// the upstream; the flow gets its own connected socket to it, the held
// datagrams are sent in their order, and from then on datagrams are
// relayed both ways untouched: the server sees the flow's socket as its
// client, whatever address the client has.
//
// A flow is found by the client's address, and else by connection ID: the
// client's first DCID (long headers), and each SCID the server puts in a
// long-header reply (Retry, Initial, Handshake), which the client then
// uses as its DCID, so a short-header packet from a new address is
// matched by the prefix of a learned CID's length, and the flow moves to
// that address (NAT rebinding). A short header on a flow's address with
// a DCID not yet learned is learned too: clients move to a CID the server
// issued in an (encrypted) NEW_CONNECTION_ID, quic-go right after the
// handshake, and a rebinding after the first packet with it is followed.
// A client that rebinds before it ever used its new CID from a known
// address, or migrates on purpose to a fresh CID, cannot be followed by
// any forwarder without the server's help (a CID scheme such as QUIC-LB's
// that encodes the route). Like any NAT, a packet spoofed with a flow's CID moves
// its replies until the real client speaks again; the server's path
// validation is what protects the connection.
//
// Everything else for no known flow is dropped and counted by reason:
// plaintext, short headers, long headers other than Initial, Initials in
// small datagrams or that do not open; an unsupported version is answered
// with a Version Negotiation (v1, v2). Versions the server negotiates,
// and its Retry, pass through as any datagram of the flow.
type QUIC struct {
	conn  *net.UDPConn
	table table
	opts  QUICOptions
	lm    *listenerMetrics
	now   func() time.Time

	mu       sync.Mutex
	byAddr   map[netip.AddrPort]*flow
	byCID    map[string]*flow
	cidLens  map[int]int
	lens     []int // cidLens' keys, for short-header lookups
	flows    map[*flow]struct{}
	active   int
	pending  int
	closed   bool
	done     chan struct{}
	wg       sync.WaitGroup
	vnUnused byte

	// noCIDRouting turns routing by connection ID off: this package's
	// tests' control for a forwarder that routes by 4-tuple only.
	noCIDRouting bool
}

type flowState uint8

const (
	statePending flowState = iota
	stateRejected
	stateActive
)

type flow struct {
	// client is where replies go; it moves when the flow is found by CID
	// at a new address.
	client atomic.Pointer[netip.AddrPort]
	// last is when a datagram last moved either way (UnixNano).
	last atomic.Int64
	// cidLen is the length of the server's CIDs, 0 until one is learned.
	cidLen atomic.Int32

	// Guarded by QUIC.mu.
	state   flowState
	reason  string
	created time.Time
	cids    [][]byte
	reader  *sni.InitialReader
	queue   [][]byte
	queued  int
	up      *net.UDPConn
	cluster string

	// lastDCID is the serve loop's: the last short-header DCID seen.
	lastDCID []byte
}

// NewQUIC forwards QUIC datagrams received on conn by routes to upstreams.
func NewQUIC(conn *net.UDPConn, routes *Routes, upstreams Upstreams, o QUICOptions) *QUIC {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxFlows, DefaultMaxFlows)
	def(&o.MaxPendingFlows, DefaultMaxPendingFlows)
	def(&o.MaxPendingBytes, DefaultMaxPendingBytes)
	def(&o.MaxClientHello, sni.DefaultMaxClientHello)
	def(&o.MaxCIDsPerFlow, DefaultMaxCIDsPerFlow)
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.PendingTimeout <= 0 {
		o.PendingTimeout = DefaultPendingTimeout
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.DialUpstream == nil {
		o.DialUpstream = func(addr netip.AddrPort) (*net.UDPConn, error) {
			return net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(addr))
		}
	}
	q := &QUIC{
		conn: conn, opts: o, lm: o.Metrics.listener(o.Name, "udp"), now: time.Now,
		byAddr: map[netip.AddrPort]*flow{}, byCID: map[string]*flow{}, cidLens: map[int]int{},
		flows: map[*flow]struct{}{}, done: make(chan struct{}),
	}
	q.table.set(routes, upstreams)
	return q
}

// SetRoutes replaces the routes and upstreams for new flows; flows already
// routed keep their upstream, as udp_proxy sessions keep their host.
func (q *QUIC) SetRoutes(r *Routes, u Upstreams) { q.table.set(r, u) }

// Addr is the listening address.
func (q *QUIC) Addr() net.Addr { return q.conn.LocalAddr() }

// Flows is how many flows are routed and how many wait for a ClientHello.
func (q *QUIC) Flows() (active, pending int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.active, q.pending
}

// Serve reads the socket until Close.
func (q *QUIC) Serve() error {
	q.wg.Add(1)
	go q.sweep()
	buf := make([]byte, maxDatagram)
	for {
		n, addr, err := q.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			q.mu.Lock()
			closed := q.closed
			q.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return nil
			}
			q.opts.Log.Warn("quic passthrough read", "listener", q.opts.Name, "err", err)
			continue
		}
		if n == 0 {
			q.lm.drop(DropNotQUIC)
			continue
		}
		q.handle(buf[:n], netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()))
	}
}

// Close stops the forwarder and closes every flow.
func (q *QUIC) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.done)
	for f := range q.flows {
		q.removeLocked(f)
	}
	q.mu.Unlock()
	err := q.conn.Close()
	q.wg.Wait()
	return err
}

func (q *QUIC) handle(b []byte, addr netip.AddrPort) {
	q.mu.Lock()
	f := q.byAddr[addr]
	if f == nil && !q.noCIDRouting {
		if f = q.lookupCIDLocked(b); f != nil {
			q.moveLocked(f, addr)
		}
	}
	if f != nil && f.state == stateActive {
		q.mu.Unlock()
		q.fromClient(f, b)
		return
	}
	defer q.mu.Unlock()
	switch {
	case q.closed:
		// Close has taken every flow; make no new one.
	case f == nil:
		q.newFlowLocked(b, addr)
	case f.state == stateRejected:
		q.lm.drop(f.reason)
	default:
		q.feedLocked(f, b)
	}
}

// lookupCIDLocked finds the flow b's DCID names: a long header's DCID, or
// a short header's DCID prefix of each learned length.
func (q *QUIC) lookupCIDLocked(b []byte) *flow {
	if sni.IsLongHeader(b[0]) {
		if len(b) < 6 || int(b[5]) > len(b)-6 {
			return nil
		}
		return q.byCID[string(b[6:6+int(b[5])])]
	}
	for _, l := range q.lens {
		if len(b) > l {
			if f := q.byCID[string(b[1:1+l])]; f != nil {
				return f
			}
		}
	}
	return nil
}

func (q *QUIC) moveLocked(f *flow, addr netip.AddrPort) {
	if old := f.client.Load(); old != nil && q.byAddr[*old] == f {
		delete(q.byAddr, *old)
	}
	if other := q.byAddr[addr]; other != nil && other != f {
		// The address belonged to another flow (a reused port): the
		// newer claim wins, the other flow keeps its CIDs.
		delete(q.byAddr, addr)
	}
	q.byAddr[addr] = f
	f.client.Store(&addr)
	q.lm.migrated.Inc()
}

// fromClient relays an established flow's datagram upstream.
func (q *QUIC) fromClient(f *flow, b []byte) {
	if !sni.IsLongHeader(b[0]) {
		if l := int(f.cidLen.Load()); l > 0 && len(b) > l && !bytes.Equal(b[1:1+l], f.lastDCID) {
			f.lastDCID = append(f.lastDCID[:0], b[1:1+l]...)
			q.mu.Lock()
			q.learnLocked(f, f.lastDCID)
			q.mu.Unlock()
		}
	}
	f.last.Store(q.now().UnixNano())
	if _, err := f.up.Write(b); err != nil {
		q.lm.drop(DropUpstreamError)
		return
	}
	q.lm.rx.Add(float64(len(b)))
}

func (q *QUIC) newFlowLocked(b []byte, addr netip.AddrPort) {
	if !sni.IsLongHeader(b[0]) {
		q.lm.drop(DropNotQUIC)
		return
	}
	h, err := sni.ParseLongHeader(b)
	switch {
	case errors.Is(err, sni.ErrUnsupportedVersion):
		if len(b) >= sni.MinInitialDatagram {
			q.vnUnused++
			vn := sni.AppendVersionNegotiation(nil, q.vnUnused&0x7f, h.DCID, h.SCID, sni.Version1, sni.Version2)
			q.conn.WriteToUDPAddrPort(vn, addr)
		}
		q.lm.drop(DropVersion)
		return
	case err != nil:
		q.lm.drop(DropNotQUIC)
		return
	case h.Type != sni.Initial:
		q.lm.drop(DropNotInitial)
		return
	case len(b) < sni.MinInitialDatagram:
		q.lm.drop(DropSmallInitial)
		return
	case q.pending >= q.opts.MaxPendingFlows:
		q.lm.drop(DropPendingOverflow)
		return
	case len(b) > q.opts.MaxPendingBytes:
		q.lm.drop(DropPendingBytes)
		return
	}
	r := sni.NewInitialReader(q.opts.MaxClientHello)
	hello, done, err := r.Read(b)
	if err != nil {
		q.lm.drop(readDropReason(err))
		return
	}
	f := &flow{state: statePending, created: q.now(), reader: r}
	f.client.Store(&addr)
	f.last.Store(f.created.UnixNano())
	q.flows[f] = struct{}{}
	q.byAddr[addr] = f
	q.pending++
	q.lm.pending.Inc()
	q.learnLocked(f, r.DCID())
	f.queue, f.queued = [][]byte{bytes.Clone(b)}, len(b)
	if done {
		q.establishLocked(f, hello)
	}
}

func readDropReason(err error) string {
	switch {
	case errors.Is(err, sni.ErrDecrypt), errors.Is(err, sni.ErrHeader):
		return DropUndecryptable
	case errors.Is(err, sni.ErrShortHeader):
		return DropNotQUIC
	case errors.Is(err, sni.ErrNotInitial):
		return DropNotInitial
	}
	return DropMalformed
}

// feedLocked takes a pending flow's next datagram: Initials go to its
// reader; 0-RTT (and any long header that is not an Initial) is held
// as is, for the server once the flow is routed.
func (q *QUIC) feedLocked(f *flow, b []byte) {
	if f.queued+len(b) > q.opts.MaxPendingBytes {
		q.lm.drop(DropPendingBytes)
		return
	}
	if !sni.IsLongHeader(b[0]) {
		q.lm.drop(DropNotQUIC)
		return
	}
	hello, done, err := f.reader.Read(b)
	if err != nil && !errors.Is(err, sni.ErrNotInitial) {
		q.lm.drop(readDropReason(err))
		return
	}
	f.queue = append(f.queue, bytes.Clone(b))
	f.queued += len(b)
	if errors.Is(err, sni.ErrNotInitial) {
		q.lm.event(EventHeld)
	}
	if done {
		q.establishLocked(f, hello)
	}
}

func (q *QUIC) establishLocked(f *flow, hello sni.ClientHello) {
	chain, addr, reason := q.table.route(hello.ServerName)
	if reason == "" && q.active >= q.opts.MaxFlows {
		reason = DropFlowOverflow
	}
	var up *net.UDPConn
	if reason == "" {
		var err error
		if up, err = q.opts.DialUpstream(addr); err != nil {
			reason = DropUpstreamError
			q.opts.Log.Debug("quic passthrough dial", "listener", q.opts.Name, "cluster", chain.Cluster, "err", err)
		}
	}
	queue := f.queue
	f.queue, f.queued, f.reader = nil, 0, nil
	if reason != "" {
		// The flow stays, rejected, until PendingTimeout: the rest of
		// its Initials are dropped without being opened again.
		f.state, f.reason = stateRejected, reason
		for range queue {
			q.lm.drop(reason)
		}
		q.opts.Log.Debug("quic passthrough refused", "listener", q.opts.Name, "sni", hello.ServerName, "reason", reason)
		return
	}
	f.state, f.up, f.cluster = stateActive, up, chain.Cluster
	q.pending--
	q.active++
	q.lm.pending.Dec()
	q.lm.active.Inc()
	q.lm.flow(chain.Cluster)
	for _, d := range queue {
		if _, err := up.Write(d); err != nil {
			q.lm.drop(DropUpstreamError)
			continue
		}
		q.lm.rx.Add(float64(len(d)))
	}
	q.wg.Add(1)
	go q.fromUpstream(f)
}

// fromUpstream relays the server's datagrams to the flow's client,
// learning the SCIDs of its long headers.
func (q *QUIC) fromUpstream(f *flow) {
	defer q.wg.Done()
	buf := make([]byte, maxDatagram)
	var lastSCID []byte
	for {
		n, err := f.up.Read(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				q.opts.Log.Debug("quic passthrough upstream read", "listener", q.opts.Name, "err", err)
			}
			return
		}
		d := buf[:n]
		if n > 0 && sni.IsLongHeader(d[0]) {
			if h, err := sni.ParseLongHeader(d); err == nil && h.Version != 0 && len(h.SCID) > 0 && !bytes.Equal(h.SCID, lastSCID) {
				lastSCID = append(lastSCID[:0], h.SCID...)
				q.mu.Lock()
				q.learnLocked(f, lastSCID)
				if f.cidLen.Load() == 0 {
					f.cidLen.Store(int32(len(lastSCID)))
				}
				q.mu.Unlock()
			}
		}
		f.last.Store(q.now().UnixNano())
		if _, err := q.conn.WriteToUDPAddrPort(d, *f.client.Load()); err != nil {
			q.lm.drop(DropUpstreamError)
			continue
		}
		q.lm.tx.Add(float64(n))
	}
}

// learnLocked routes cid to f, within MaxCIDsPerFlow (the oldest goes). A
// CID another flow holds stays that flow's.
func (q *QUIC) learnLocked(f *flow, cid []byte) {
	if len(cid) == 0 {
		return
	}
	if other, ok := q.byCID[string(cid)]; ok {
		_ = other
		return
	}
	if len(f.cids) >= q.opts.MaxCIDsPerFlow {
		q.forgetLocked(f, f.cids[0])
		f.cids = f.cids[1:]
	}
	c := bytes.Clone(cid)
	f.cids = append(f.cids, c)
	q.byCID[string(c)] = f
	if q.cidLens[len(c)]++; q.cidLens[len(c)] == 1 {
		q.lens = append(q.lens, len(c))
		slices.Sort(q.lens)
	}
	q.lm.cidLn.Inc()
}

func (q *QUIC) forgetLocked(f *flow, cid []byte) {
	if q.byCID[string(cid)] != f {
		return
	}
	delete(q.byCID, string(cid))
	if q.cidLens[len(cid)]--; q.cidLens[len(cid)] == 0 {
		delete(q.cidLens, len(cid))
		q.lens = slices.DeleteFunc(q.lens, func(l int) bool { return l == len(cid) })
	}
}

func (q *QUIC) removeLocked(f *flow) {
	if _, ok := q.flows[f]; !ok {
		return
	}
	delete(q.flows, f)
	if a := f.client.Load(); a != nil && q.byAddr[*a] == f {
		delete(q.byAddr, *a)
	}
	for _, c := range f.cids {
		q.forgetLocked(f, c)
	}
	f.cids = nil
	if f.state == stateActive {
		q.active--
		q.lm.active.Dec()
		f.up.Close()
	} else {
		q.pending--
		q.lm.pending.Dec()
	}
}

// sweep expires idle flows and stale pending ones.
func (q *QUIC) sweep() {
	defer q.wg.Done()
	every := min(q.opts.IdleTimeout, q.opts.PendingTimeout) / 4
	t := time.NewTicker(max(every, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-q.done:
			return
		case <-t.C:
			q.expire(q.now())
		}
	}
}

// expire closes flows idle for IdleTimeout and drops flows that have not
// been routed within PendingTimeout of their first Initial.
func (q *QUIC) expire(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for f := range q.flows {
		switch {
		case f.state == stateActive && now.Sub(time.Unix(0, f.last.Load())) >= q.opts.IdleTimeout:
			q.removeLocked(f)
			q.lm.expired.Inc()
		case f.state != stateActive && now.Sub(f.created) >= q.opts.PendingTimeout:
			q.removeLocked(f)
			q.lm.pendExpired.Inc()
		}
	}
}
