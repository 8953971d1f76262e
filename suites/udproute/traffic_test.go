package udproute

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/suites/cluster"
)

const (
	namespace = "demo"
	client    = "client-0"
	// perService is how many datagrams each service gets in a case.
	perService = 20
)

// replyTimeout bounds the wait for each reply; on a veth it arrives in
// well under a millisecond.
var replyTimeout = 300 * time.Millisecond

// lateReplyWait is how long sendUDP waits, after its last datagram, for
// the replies it has not read yet.
const lateReplyWait = 2 * time.Second

// sent is what a client did; the verdict never rests on it alone.
type sent struct {
	Datagrams int
	// Replies maps each reply's body (a backend's name) to its count. The
	// socket is connected to VIP:18082, so the kernel accepted only replies
	// whose source is exactly VIP:18082.
	Replies map[string]int
}

func (s sent) replied() int {
	n := 0
	for _, c := range s.Replies {
		n += c
	}
	return n
}

var clientPod = cluster.Pod{Namespace: namespace, Name: client}

// sendUDP sends n datagrams tagged tag/i from the client pod over one
// connected socket to vip:port, waiting for each reply (or replyTimeout).
func sendUDP(ctx context.Context, c cluster.Cluster, vip netip.Addr, port uint16, tag string, n int) (sent, error) {
	out := sent{Replies: map[string]int{}}
	conn, err := c.DialUDP(ctx, clientPod, netip.AddrPortFrom(vip, port))
	if err != nil {
		return out, err
	}
	defer conn.Close()
	buf := make([]byte, 512)
	for i := range n {
		if _, err := fmt.Fprintf(conn, "%s/%d", tag, i); err != nil {
			return out, fmt.Errorf("failed to send datagram %d of %s to %s:%d: %w", i, tag, vip, port, err)
		}
		out.Datagrams++
		_ = conn.SetReadDeadline(time.Now().Add(replyTimeout))
		m, err := conn.Read(buf)
		if err != nil {
			continue // a missing reply is counted by its absence
		}
		out.Replies[string(buf[:m])]++
	}
	// A reply later than replyTimeout still counts: on kind the client
	// socket is carried over an exec stream through the API server, which
	// a loaded machine can hold back for over a second, and every reply
	// of a run then arrives after its own read gave up. A lost reply stays
	// lost; only the wait for it is longer. A case that expects no reply
	// (replyTimeout set to dropTimeout) does not wait for late ones.
	wait := lateReplyWait
	if replyTimeout <= dropTimeout {
		wait = 0
	}
	for deadline := time.Now().Add(wait); out.replied() < out.Datagrams && time.Now().Before(deadline); {
		_ = conn.SetReadDeadline(deadline)
		m, err := conn.Read(buf)
		if err != nil {
			break
		}
		out.Replies[string(buf[:m])]++
	}
	return out, nil
}

// sendTCP opens one connection from the client pod to vip:port, sends a
// tagged line and returns the reply line.
func sendTCP(ctx context.Context, c cluster.Cluster, vip netip.Addr, port uint16, tag string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := c.DialTCP(ctx, clientPod, netip.AddrPortFrom(vip, port))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(conn, "%s\n", tag); err != nil {
		return "", fmt.Errorf("failed to send on tcp to %s:%d: %w", vip, port, err)
	}
	buf := make([]byte, 256)
	m, err := conn.Read(buf)
	if err != nil {
		return "", fmt.Errorf("no tcp reply from %s:%d: %w", vip, port, err)
	}
	return strings.TrimSpace(string(buf[:m])), nil
}

// delivery is the backends' own account of a tag: pod -> protocol/port ->
// count, and the distinct sources each pod saw.
type delivery struct {
	ByPod   map[string]int
	ByPort  map[string]map[string]int
	Sources map[string]map[string]bool
}

func (d delivery) total() int {
	n := 0
	for _, c := range d.ByPod {
		n += c
	}
	return n
}

// pods lists the receiving pods, sorted, as "pod=count".
func (d delivery) String() string {
	var s []string
	for p, c := range d.ByPod {
		s = append(s, fmt.Sprintf("%s=%d", p, c))
	}
	sort.Strings(s)
	if len(s) == 0 {
		return "no backend"
	}
	return strings.Join(s, ",")
}

// delivered reads every pod's record for payloads carrying tag.
func delivered(ctx context.Context, c cluster.Cluster, tag string) (delivery, error) {
	d := delivery{ByPod: map[string]int{}, ByPort: map[string]map[string]int{}, Sources: map[string]map[string]bool{}}
	for _, p := range c.Pods() {
		recs, err := c.Records(ctx, p)
		if err != nil {
			return d, err
		}
		for _, r := range recs {
			if r.Payload != tag && !strings.HasPrefix(r.Payload, tag+"/") {
				continue
			}
			d.ByPod[p.Name]++
			if d.ByPort[p.Name] == nil {
				d.ByPort[p.Name] = map[string]int{}
				d.Sources[p.Name] = map[string]bool{}
			}
			d.ByPort[p.Name][fmt.Sprintf("%s/%d", r.Event, r.Port)]++
			d.Sources[p.Name][r.Src] = true
		}
	}
	return d, nil
}

// settle gives in-flight datagrams a moment to land in a record: the
// client's last reply can overtake nothing, but a datagram whose reply was
// lost may still be on its way.
func settle() { time.Sleep(100 * time.Millisecond) }

// flow sends a datagram every interval on one connected socket until
// stopped: a live session that must survive configuration changes.
type flow struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	sent sent
	err  error
}

func startFlow(ctx context.Context, c cluster.Cluster, vip netip.Addr, tag string, interval time.Duration) (*flow, error) {
	conn, err := c.DialUDP(ctx, clientPod, netip.AddrPortFrom(vip, constants.ProxyL4OutboundPort))
	if err != nil {
		return nil, err
	}
	f := &flow{stop: make(chan struct{}), sent: sent{Replies: map[string]int{}}}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		defer conn.Close()
		buf := make([]byte, 512)
		for i := 0; ; i++ {
			select {
			case <-f.stop:
				f.drain(conn, buf)
				return
			default:
			}
			if _, err := fmt.Fprintf(conn, "%s/%d", tag, i); err != nil {
				f.mu.Lock()
				f.err = err
				f.mu.Unlock()
				return
			}
			f.mu.Lock()
			f.sent.Datagrams++
			f.mu.Unlock()
			_ = conn.SetReadDeadline(time.Now().Add(interval))
			if m, err := conn.Read(buf); err == nil {
				f.mu.Lock()
				f.sent.Replies[string(buf[:m])]++
				f.mu.Unlock()
				time.Sleep(interval)
			} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
				// ECONNREFUSED from an ICMP error is a lost session too.
				f.mu.Lock()
				f.err = err
				f.mu.Unlock()
				return
			}
		}
	}()
	return f, nil
}

// drain reads the replies still owed when the flow is stopped: under load a
// reply can take longer than one interval, and leaving it unread would count
// a late reply as a lost one. It waits at most two seconds in all.
func (f *flow) drain(conn net.Conn, buf []byte) {
	_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		f.mu.Lock()
		owed := f.sent.Datagrams
		for _, n := range f.sent.Replies {
			owed -= n
		}
		f.mu.Unlock()
		if owed <= 0 {
			return
		}
		m, err := conn.Read(buf)
		if err != nil {
			return
		}
		f.mu.Lock()
		f.sent.Replies[string(buf[:m])]++
		f.mu.Unlock()
	}
}

// replied is how many replies the flow has had so far.
func (f *flow) replied() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent.replied()
}

func (f *flow) finish() (sent, error) {
	close(f.stop)
	f.wg.Wait()
	return f.sent, f.err
}
