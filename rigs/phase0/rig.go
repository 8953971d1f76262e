package phase0

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

// Delivery on a veth or loopback inside one host takes microseconds. A case
// expecting a datagram waits up to deliveryWindow (and returns as soon as it
// arrives); a case expecting silence listens for quietWindow, long enough
// that a scheduler stall does not turn a late delivery into "nothing".
const (
	deliveryWindow = 2 * time.Second
	quietWindow    = 300 * time.Millisecond
)

var (
	podPrefix  = netip.MustParsePrefix("10.244.0.2/24")
	nodePrefix = netip.MustParsePrefix("10.244.0.1/24")
)

// Rig runs Phase 0 scenarios. Each capture case gets a fresh pod netns with
// a veth to its own node netns; the MARK cases share one pair so each
// control and its subject use the same socket.
type Rig struct {
	mu      sync.Mutex
	mark    *markFixture
	markErr error
}

// New returns a rig; Close removes whatever it still holds.
func New() *Rig { return &Rig{} }

// Close tears down the shared MARK fixture.
func (r *Rig) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mark == nil {
		return nil
	}
	err := r.mark.close()
	r.mark = nil
	return err
}

// Suite turns scenarios into a red-then-green suite.
func (r *Rig) Suite(scs []Scenario) redgreen.Suite {
	s := redgreen.Suite{
		Name:    SuiteName,
		Subject: "038 Phase 0: a transparent socket created in a pod netns sees the pre-divert destination",
	}
	for _, sc := range scs {
		s.Cases = append(s.Cases, r.caseFor(sc))
	}
	return s
}

// Run measures scenarios with a fresh rig and tears it down.
func Run(ctx context.Context, scs []Scenario) (redgreen.Result, error) {
	r := New()
	res := redgreen.Run(ctx, r.Suite(scs))
	return res, r.Close()
}

func (r *Rig) caseFor(sc Scenario) redgreen.Case {
	witnessName := "the listener's IP_PKTINFO"
	switch {
	case sc.Kind == KindMarkEgress:
		witnessName = "the receiver's IP_PKTINFO, kube-proxy's and the capture chain's counters, the node's arrival counters"
	case sc.Capture == CaptureNone:
		witnessName = "the listener's IP_PKTINFO and the node's arrival counters"
	case sc.Reply != ReplyNone:
		witnessName = "the listener's IP_PKTINFO, then the connected client's socket"
	}
	return redgreen.Case{
		Name:        sc.Name,
		Role:        sc.Role,
		Description: sc.Description,
		Expect:      sc.Expect.Text,
		Run: func(ctx context.Context) (redgreen.Observation, error) {
			var w witness
			var err error
			if sc.Kind == KindMarkEgress {
				w, err = r.probeMark(sc)
			} else {
				w, err = r.probeCapture(sc)
			}
			obs := redgreen.Observation{Witness: witnessName}
			if err == nil {
				obs.Summary = w.summary(sc)
				obs.Evidence = evidence{scenario: sc, witness: w}
			}
			return obs, err
		},
		Check: func(o redgreen.Observation) error { return sc.check(o) },
	}
}

// check reads o's evidence back and judges it by sc's expectation;
// evidence another scenario measured is refused, not judged.
func (sc Scenario) check(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[evidence](o)
	if err != nil {
		return err
	}
	if ev.scenario.Name != sc.Name {
		return fmt.Errorf("the evidence is %s's, not %s's", ev.scenario.Name, sc.Name)
	}
	return sc.Expect.Check(ev.witness)
}

var pairSeq atomic.Int64

// pair is a pod netns with eth0 10.244.0.2/24 and a default route via its
// node netns (10.244.0.1): the normal route lookup must succeed before a
// mark can re-route anything, since the route chain only re-routes a packet
// that already has a route.
type pair struct {
	pod, node *netns.NS
}

func newPair(name string) (p *pair, err error) {
	tag := fmt.Sprintf("p0-%d-%s", pairSeq.Add(1), strings.ToLower(name))
	p = &pair{}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.close())
		}
	}()
	if p.pod, err = netns.Create(tag + "-pod"); err != nil {
		return p, err
	}
	if p.node, err = netns.Create(tag + "-node"); err != nil {
		return p, err
	}
	if err = netns.Veth(p.pod, "eth0", p.node, "vpod"); err != nil {
		return p, err
	}
	if err = netns.AddAddr(p.pod, "eth0", podPrefix); err != nil {
		return p, err
	}
	if err = netns.AddAddr(p.node, "vpod", nodePrefix); err != nil {
		return p, err
	}
	err = netns.AddRoute(p.pod, netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: nodePrefix.Addr(), Dev: "eth0"})
	return p, err
}

func (p *pair) close() error {
	var errs []error
	for _, n := range []*netns.NS{p.pod, p.node} {
		if n != nil {
			errs = append(errs, n.Delete())
		}
	}
	return errors.Join(errs...)
}

// installCapture installs sc's capture in the pod netns, verified by
// listing it back, and the arrival counters in the node netns. It returns
// the counters the case reads.
func installCapture(p *pair, c Capture) ([]counter, error) {
	peer := PeerRuleset()
	if err := Install(p.node, peer); err != nil {
		return nil, err
	}
	ctrs := []counter{{ctrArrivedPlain, p.node, chainArrivedPlain, 0}, {ctrArrivedMarked, p.node, chainArrivedMarked, 0}}
	switch c {
	case CaptureNone:
		// C3 must really have no rule: an inherited or leftover table would
		// make it a copy of C1 or C2.
		return ctrs, errors.Join(VerifyNoTable(p.pod, rigTable), VerifyNoDivertRoute(p.pod))
	case CaptureDivert:
		rs := DivertRuleset(DialPort)
		if err := Install(p.pod, rs); err != nil {
			return nil, err
		}
		// Rule 0 is the passthrough return; rule 1 counts captures.
		return append(ctrs, counter{ctrCapture, p.pod, rs.Chains[0].Name, 1}), InstallDivertRoute(p.pod)
	case CaptureRedirect:
		rs := RedirectRuleset(DialPort)
		return append(ctrs, counter{ctrCapture, p.pod, rs.Chains[0].Name, 0}), Install(p.pod, rs)
	}
	return nil, fmt.Errorf("unknown capture %v", c)
}

// counter names one rule's counter in a rig namespace's table.
type counter struct {
	name  string
	ns    *netns.NS
	chain string
	rule  int
}

// readCounters reads each named counter.
func readCounters(cs []counter) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, c := range cs {
		v, err := Packets(c.ns, rigTable, c.chain)
		if err != nil {
			return nil, err
		}
		if c.rule >= len(v) {
			return nil, fmt.Errorf("chain %q in netns %q has %d rule(s), no rule %d to read %s from", c.chain, c.ns.Name, len(v), c.rule, c.name)
		}
		out[c.name] = v[c.rule]
	}
	return out, nil
}

// deltas is after - before, per counter.
func deltas(before, after map[string]uint64) map[string]uint64 {
	out := map[string]uint64{}
	for name, v := range after {
		out[name] = v - before[name]
	}
	return out
}

func (r *Rig) probeCapture(sc Scenario) (w witness, err error) {
	p, err := newPair(sc.Name)
	if err != nil {
		return w, err
	}
	defer func() { err = errors.Join(err, p.close()) }()
	ctrs, err := installCapture(p, sc.Capture)
	if err != nil {
		return w, err
	}
	before, err := readCounters(ctrs)
	if err != nil {
		return w, err
	}
	if w.PodNetns, err = p.pod.Inode(); err != nil {
		return w, err
	}

	listen := netip.AddrPortFrom(netip.IPv4Unspecified(), sc.ListenPort)
	opts := transparent.Options{Transparent: true}
	var ln *transparent.UDPConn
	if sc.ReadFromRoot {
		ln, err = transparent.ListenUDP(p.pod.Path, listen, opts)
	} else {
		err = p.pod.Do(func() (e error) {
			ln, e = transparent.ListenUDP("", listen, opts)
			return e
		})
	}
	if err != nil {
		return w, err
	}
	defer ln.Close()
	if w.SocketNetns, err = socketNetns(ln.UDPConn); err != nil {
		return w, err
	}
	if w.SocketNetns != w.PodNetns {
		return w, fmt.Errorf("the listener socket lives in netns inode %d, not the pod's (%d)", w.SocketNetns, w.PodNetns)
	}

	client, err := transparent.DialUDP(p.pod.Path, netip.AddrPort{}, netip.AddrPortFrom(VIP, DialPort), transparent.Options{})
	if err != nil {
		return w, err
	}
	defer client.Close()

	noPorts0, err := udpNoPorts(p.pod)
	if err != nil {
		return w, err
	}
	payload := fmt.Sprintf("phase0 %s %d", sc.Name, time.Now().UnixNano())
	if _, err := client.Write([]byte(payload)); err != nil {
		return w, fmt.Errorf("client in netns %q failed to send to %s:%d: %w", p.pod.Name, VIP, DialPort, err)
	}
	w.Window = quietWindow
	if sc.Expect.delivers {
		w.Window = deliveryWindow
	}
	var m transparent.Meta
	read := func() (e error) {
		w.ReaderNetns, e = threadNetns()
		if e != nil {
			return e
		}
		w.Delivered, m, e = readPayload(ln, payload, w.Window)
		return e
	}
	if sc.ReadFromRoot {
		runtime.LockOSThread()
		err = read()
		runtime.UnlockOSThread()
		if err == nil && w.ReaderNetns == w.PodNetns {
			err = errors.New("MAIN read from inside the pod netns; it would not test setns")
		}
	} else {
		err = p.pod.Do(read)
		if err == nil && w.ReaderNetns != w.PodNetns {
			err = fmt.Errorf("%s read from netns inode %d, not the pod's", sc.Name, w.ReaderNetns)
		}
	}
	if err != nil {
		return w, err
	}
	w.Dst, w.OrigDst, w.Src = m.Dst, m.OrigDst, m.Src

	if w.Delivered && sc.Reply != ReplyNone {
		if err := reply(&w, sc, ln, client, m); err != nil {
			return w, err
		}
	}
	noPorts1, err := udpNoPorts(p.pod)
	if err != nil {
		return w, err
	}
	w.NoPorts = noPorts1 - noPorts0
	after, err := readCounters(ctrs)
	if err != nil {
		return w, err
	}
	w.Counters = deltas(before, after)
	return w, nil
}

func reply(w *witness, sc Scenario, ln *transparent.UDPConn, client *net.UDPConn, m transparent.Meta) error {
	var src netip.Addr
	if sc.Reply == ReplyPktinfo {
		src = m.Dst
	}
	payload := "reply " + sc.Name
	if err := ln.WriteFrom([]byte(payload), src, m.Src); err != nil {
		return fmt.Errorf("listener failed to reply: %w", err)
	}
	w.ReplySent = true
	window := quietWindow
	if sc.Expect.replyDelivers {
		window = deliveryWindow
	}
	if err := client.SetReadDeadline(time.Now().Add(window)); err != nil {
		return fmt.Errorf("failed to set the client's read deadline: %w", err)
	}
	buf := make([]byte, 256)
	for {
		n, from, err := client.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("client failed to read the reply: %w", err)
		}
		if string(buf[:n]) == payload {
			w.ReplyDelivered, w.ReplySrc = true, netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
			return nil
		}
	}
}

// readPayload waits up to window for the datagram carrying payload and
// returns its metadata. Anything else arriving is ignored: in a fresh
// namespace nothing else should, and it must not be mistaken for ours.
func readPayload(ln *transparent.UDPConn, payload string, window time.Duration) (bool, transparent.Meta, error) {
	if err := ln.SetReadDeadline(time.Now().Add(window)); err != nil {
		return false, transparent.Meta{}, fmt.Errorf("failed to set the listener's read deadline: %w", err)
	}
	buf := make([]byte, 256)
	for {
		n, m, err := ln.ReadDatagram(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return false, transparent.Meta{}, nil
		}
		if err != nil {
			return false, m, fmt.Errorf("listener failed to read: %w", err)
		}
		if string(buf[:n]) == payload {
			return true, m, nil
		}
	}
}

// socketNetns returns the inode of the netns a socket belongs to, asked of
// the socket itself (SIOCGSKNS), so the rig does not take on trust where
// the socket was created.
func socketNetns(c *net.UDPConn) (uint64, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("failed to reach the socket: %w", err)
	}
	var ino uint64
	var ierr error
	err = rc.Control(func(fd uintptr) {
		nsfd, e := unix.IoctlRetInt(int(fd), unix.SIOCGSKNS)
		if e != nil {
			ierr = fmt.Errorf("SIOCGSKNS failed: %w", e)
			return
		}
		defer unix.Close(nsfd)
		var st unix.Stat_t
		if e := unix.Fstat(nsfd, &st); e != nil {
			ierr = fmt.Errorf("failed to stat the socket's netns: %w", e)
			return
		}
		ino = st.Ino
	})
	return ino, errors.Join(err, ierr)
}

// threadNetns is the netns inode of the calling (locked) thread.
func threadNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("failed to stat this thread's netns: %w", err)
	}
	return st.Ino, nil
}

// udpNoPorts reads Udp NoPorts from the namespace's /proc/net/snmp: the
// datagrams that reached UDP and found no socket.
func udpNoPorts(n *netns.NS) (uint64, error) {
	var v uint64
	err := n.Do(func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return fmt.Errorf("failed to open snmp counters: %w", err)
		}
		defer f.Close()
		var header []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != "Udp:" {
				continue
			}
			if header == nil {
				header = fields
				continue
			}
			for i, h := range header {
				if h == "NoPorts" && i < len(fields) {
					v, err = strconv.ParseUint(fields[i], 10, 64)
					return err
				}
			}
		}
		return errors.New("no Udp NoPorts counter in /proc/net/snmp")
	})
	if err != nil {
		return 0, fmt.Errorf("failed to read UdpNoPorts in netns %q: %w", n.Name, err)
	}
	return v, nil
}

// markFixture is the MARK cases' pair: the node netns runs kube-proxy's
// rules and counts arrivals at its listener; the pod netns runs the capture
// chain. Each side has one sender toward the other's receiver, so a control
// and its subject use the same socket and differ only in its mark.
type markFixture struct {
	p        *pair
	rx       map[constants.Netns]*transparent.UDPConn // keyed by the sender's netns
	tx       map[constants.Netns]*net.UDPConn
	counters []counter
}

func (f *markFixture) close() error {
	var errs []error
	for _, c := range f.tx {
		errs = append(errs, c.Close())
	}
	for _, c := range f.rx {
		errs = append(errs, c.Close())
	}
	return errors.Join(append(errs, f.p.close())...)
}

func (r *Rig) markFixture() (*markFixture, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mark != nil || r.markErr != nil {
		return r.mark, r.markErr
	}
	f, err := newMarkFixture()
	r.mark, r.markErr = f, err
	return f, err
}

// The node's listener is on a captured port, so the pod-side sender's
// datagram is the capture chain's to judge; the pod's is the inbound port,
// where the proxy's upstream egress goes.
var (
	nodeListen = netip.AddrPortFrom(nodePrefix.Addr(), DialPort)
	podListen  = netip.AddrPortFrom(podPrefix.Addr(), constants.InboundPort)
)

func newMarkFixture() (f *markFixture, err error) {
	p, err := newPair("mark")
	if err != nil {
		return nil, err
	}
	f = &markFixture{p: p, rx: map[constants.Netns]*transparent.UDPConn{}, tx: map[constants.Netns]*net.UDPConn{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.close())
			f = nil
		}
	}()
	divert := DivertRuleset(DialPort)
	if err = Install(p.node, NodeRuleset(nodeListen)); err != nil {
		return f, err
	}
	if err = Install(p.pod, divert); err != nil {
		return f, err
	}
	if err = InstallDivertRoute(p.pod); err != nil {
		return f, err
	}
	f.counters = []counter{
		{ctrFirewallOutput, p.node, chainFirewallOutput, 0},
		{ctrFirewallInput, p.node, chainFirewallInput, 0},
		{ctrArrivedPlain, p.node, chainArrivedPlain, 0},
		{ctrArrivedMarked, p.node, chainArrivedMarked, 0},
		{ctrPassthrough, p.pod, divert.Chains[0].Name, 0},
		{ctrDivert, p.pod, divert.Chains[0].Name, 1},
	}
	for _, side := range []struct {
		from     constants.Netns
		tx, rx   *netns.NS
		listenOn netip.AddrPort
	}{
		{constants.NodeNetns, p.node, p.pod, podListen},
		{constants.PodNetns, p.pod, p.node, nodeListen},
	} {
		if f.rx[side.from], err = transparent.ListenUDP(side.rx.Path, side.listenOn, transparent.Options{}); err != nil {
			return f, err
		}
		if f.tx[side.from], err = transparent.DialUDP(side.tx.Path, netip.AddrPort{}, side.listenOn, transparent.Options{}); err != nil {
			return f, err
		}
	}
	return f, nil
}

func (r *Rig) probeMark(sc Scenario) (w witness, err error) {
	f, err := r.markFixture()
	if err != nil {
		return w, err
	}
	tx, rx := f.tx[sc.Sender], f.rx[sc.Sender]
	if tx == nil {
		return w, fmt.Errorf("%s: no sender in the %q netns", sc.Name, sc.Sender)
	}
	if w.SoMark, err = setMark(tx, sc.EgressMark); err != nil {
		return w, err
	}
	if w.SoMark != sc.EgressMark {
		return w, fmt.Errorf("sender's SO_MARK reads back %#x, want %#x", w.SoMark, sc.EgressMark)
	}
	before, err := readCounters(f.counters)
	if err != nil {
		return w, err
	}
	payload := fmt.Sprintf("phase0 %s %d", sc.Name, time.Now().UnixNano())
	// A local output drop surfaces to the sender as EPERM. That is the
	// sender's claim and only recorded; the verdict is the receiver's and
	// the counters'.
	if _, err := tx.Write([]byte(payload)); err != nil {
		if !errors.Is(err, unix.EPERM) {
			return w, fmt.Errorf("%s sender failed to send: %w", sc.Sender, err)
		}
		w.SendErr = "EPERM"
	}
	w.Window = quietWindow
	if sc.Expect.delivers {
		w.Window = deliveryWindow
	}
	var m transparent.Meta
	if w.Delivered, m, err = readPayload(rx, payload, w.Window); err != nil {
		return w, err
	}
	w.Dst, w.OrigDst, w.Src = m.Dst, m.OrigDst, m.Src
	after, err := readCounters(f.counters)
	if err != nil {
		return w, err
	}
	w.Counters = deltas(before, after)
	return w, nil
}

// setMark sets SO_MARK on the socket and reads it back.
func setMark(c *net.UDPConn, mark uint32) (uint32, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("failed to reach the sender socket: %w", err)
	}
	var got int
	var serr error
	err = rc.Control(func(fd uintptr) {
		if serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)); serr != nil {
			serr = fmt.Errorf("failed to set SO_MARK %#x: %w", mark, serr)
			return
		}
		got, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK)
		if serr != nil {
			serr = fmt.Errorf("failed to read SO_MARK back: %w", serr)
		}
	})
	return uint32(got), errors.Join(err, serr)
}
