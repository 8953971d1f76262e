package mtlspool

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// meshClient is a pod app's HTTP/1.1 client for the 18081 spelling: it
// dials the ClusterIP on 18081, which the capture diverts to the pod's
// outbound listener. Each client keeps its own connections.
func meshClient(c cluster.Cluster, p cluster.Pod) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, err
			}
			return c.DialTCP(ctx, p, ap)
		},
	}}
}

// meshGet sends one request for path to svc with client and returns its
// status and body.
func meshGet(ctx context.Context, c cluster.Cluster, client *http.Client, svc, path string) (int, string, error) {
	vip, err := c.ServiceVIP(namespace, svc)
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s%s", netip.AddrPortFrom(vip, constants.HTTPOutboundPort), path), nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = xdsnames.Authority(svc, namespace, meshDomain)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body)), nil
}

// sendFrom sends n requests to svc from each pod at once, tagged
// /<tag>/<pod>/<i>, and counts the answers by status.
func sendFrom(ctx context.Context, c cluster.Cluster, svc, tag string, n int, pods ...string) (map[int]int, error) {
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		first error
		wg    sync.WaitGroup
	)
	for _, name := range pods {
		p, err := cluster.PodNamed(c, namespace, name)
		if err != nil {
			return nil, err
		}
		client := meshClient(c, p)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, err := meshGet(ctx, c, client, svc, fmt.Sprintf("/%s/%s/%d", tag, name, i))
				mu.Lock()
				defer mu.Unlock()
				if err != nil && first == nil {
					first = fmt.Errorf("request %d from %s to %s: %w", i, name, svc, err)
				}
				codes[code]++
			}()
		}
	}
	wg.Wait()
	return codes, first
}

// appXFCC reads pod's app record: per peer URI in the XFCC, the requests
// whose path starts with /<tag>/.
func appXFCC(ctx context.Context, c cluster.Cluster, pod, svc, tag string) (map[string]int, error) {
	return cluster.AppXFCC(ctx, c, namespace, pod, xdsnames.Authority(svc, namespace, meshDomain)+"/"+tag+"/")
}

// counters are one family's samples, by the value of one label.
type counters map[string]float64

// inboundView is what a pod's QUIC inbound counted: the connections it
// began, its handshakes by peer (a resumed one as "<peer> resumed"), its
// refusals and drops by reason.
type inboundView struct {
	Started  float64  `json:"started"`
	Accepted counters `json:"accepted"`
	Refused  counters `json:"refused"`
	Dropped  counters `json:"dropped"`
}

// readInbound reads pod's QUIC inbound on node's proxy.
func readInbound(ctx context.Context, c cluster.Cluster, nodeName, pod string) (inboundView, error) {
	body, err := c.Metrics(ctx, nodeName, cluster.Proxy)
	if err != nil {
		return inboundView{}, err
	}
	l := xdsnames.QuicInboundListener(namespace, pod)
	v := inboundView{Accepted: counters{}, Refused: counters{}, Dropped: counters{}}
	v.Started, _ = node.Metric(body, "aether_proxy_quic_inbound_connections_started_total", map[string]string{"listener": l})
	for _, f := range []struct {
		family, key string
		into        counters
	}{
		{"aether_proxy_quic_inbound_handshakes_total", "peer", v.Accepted},
		{"aether_proxy_quic_inbound_refused_total", "reason", v.Refused},
		{"aether_proxy_quic_inbound_dropped_datagrams_total", "reason", v.Dropped},
	} {
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, f.family+"{") || !strings.Contains(line, `listener="`+l+`"`) {
				continue
			}
			_, rest, _ := strings.Cut(line, f.key+`="`)
			val, _, _ := strings.Cut(rest, `"`)
			if strings.Contains(line, `resumed="true"`) {
				// Resumed handshakes are kept apart: a peer's full
				// handshakes are its connections' count.
				val += " resumed"
			}
			n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return v, fmt.Errorf("%s: %q: %w", f.family, line, err)
			}
			f.into[val] += n
		}
	}
	return v, nil
}

// since is b − a, for the counters that moved.
func (b inboundView) since(a inboundView) inboundView {
	d := inboundView{Started: b.Started - a.Started, Accepted: counters{}, Refused: counters{}, Dropped: counters{}}
	for _, p := range []struct{ a, b, d counters }{{a.Accepted, b.Accepted, d.Accepted}, {a.Refused, b.Refused, d.Refused}, {a.Dropped, b.Dropped, d.Dropped}} {
		for k, v := range p.b {
			if v != p.a[k] {
				p.d[k] = v - p.a[k]
			}
		}
	}
	return d
}

// settled reads the inbound until two reads a short while apart agree,
// or 3 s pass, and returns what it read last: the proxy counts a refusal
// once the handshake ends.
func settled(ctx context.Context, c cluster.Cluster, nodeName, pod string) (inboundView, error) {
	var last inboundView
	reads := 0
	_, err := wait.Until(ctx, 3*time.Second, 150*time.Millisecond, func() (bool, error) {
		v, err := readInbound(ctx, c, nodeName, pod)
		if err != nil {
			return false, fmt.Errorf("%s's QUIC inbound on %s: %w", pod, nodeName, err)
		}
		agree := reads > 0 && toJSON(v) == toJSON(last)
		last, reads = v, reads+1
		return agree, nil
	})
	return last, err
}

// udpNoPorts is the kernel's UdpNoPorts counter in the netns of conn's
// socket (SIOCGSKNS): datagrams delivered locally that no socket took.
func udpNoPorts(conn net.Conn) (uint64, error) {
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, err
	}
	nsfd := -1
	var ierr error
	if err := raw.Control(func(fd uintptr) { nsfd, ierr = unix.IoctlRetInt(int(fd), unix.SIOCGSKNS) }); err != nil {
		return 0, err
	}
	if ierr != nil {
		return 0, fmt.Errorf("SIOCGSKNS: %w", ierr)
	}
	defer unix.Close(nsfd)
	type result struct {
		v   uint64
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread enters the socket's netns and is never unlocked: it
		// ends with the goroutine rather than return to the pool there.
		runtime.LockOSThread()
		if err := unix.Setns(nsfd, unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns: %w", err)}
			return
		}
		v, err := readNoPorts("/proc/thread-self/net/snmp")
		done <- result{v, err}
	}()
	r := <-done
	return r.v, r.err
}

func readNoPorts(path string) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
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
				return strconv.ParseUint(fields[i], 10, 64)
			}
		}
	}
	return 0, errors.New("no Udp NoPorts in " + path)
}

// waitListeners waits for the east-west path: the HTTP listeners on both
// nodes, then one request of batch-0 to api answering 200 (503 where the
// twins' handshakes fail by design).
func waitListeners(ctx context.Context, c cluster.Cluster, handshakesFail bool) error {
	want := map[string][]string{
		"node-a": {xdsnames.OutboundListener(namespace, "web-0"), xdsnames.OutboundListener(namespace, "batch-0")},
		"node-b": {xdsnames.QuicInboundListener(namespace, "api-0"), xdsnames.QuicInboundListener(namespace, "cart-0")},
	}
	var last error
	// A listener not served yet or a failed warm-up is what the path not
	// being up looks like: it is kept as the reason, and the wait goes on.
	up, err := wait.Until(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		if last = cluster.ListenersServed(ctx, c, want); last != nil {
			return false, nil
		}
		codes, err := sendFrom(ctx, c, "api", "warmup", 1, "batch-0")
		switch {
		case err != nil:
			last = err
		case codes[http.StatusOK] == 1 || handshakesFail && codes[http.StatusServiceUnavailable] == 1:
			return true, nil
		default:
			last = fmt.Errorf("warm-up answered %v", codes)
		}
		return false, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the east-west path (last seen: %v): %w", last, err)
	case !up:
		return fmt.Errorf("the east-west path did not come up in 60 s: %w", last)
	}
	return nil
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
