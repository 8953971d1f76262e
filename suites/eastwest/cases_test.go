package eastwest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

const (
	// perSourceN requests from each source pod per case.
	perSourceN = 20
	witness    = "node-b's proxy access log (protocol and peer SPIFFE ID at the QUIC or TCP inbound), the destination app's record of the XFCC, node-a's agent counters"
	admitted   = "aether_agent_odcds_admitted_total"
)

func spiffeID(sa string) string { return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + sa }

func cases(r *rig) []redgreen.Case {
	return append([]redgreen.Case{
		{
			Name: "h2-floor", Role: redgreen.Control,
			Description: "the same cluster with aether-agent --mesh-transport h2: no selection route names a twin, every destination is reached over the h2 cluster",
			Expect:      fmt.Sprintf("web-0's and batch-0's %d requests each reach api-0 over HTTP/2.0 as their own SPIFFE IDs; node-a's agent admits no twin", perSourceN),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return crossNode(ctx, r, h2, "api") },
			Check:       func(o redgreen.Observation) error { return checkArrived(o, "HTTP/2.0", 0) },
		},
		{
			Name: "cross-node-http3", Role: redgreen.Subject,
			Description: "web-0 and batch-0 on node-a call api on node-b by authority on 18081; each pair's twin carries its requests to api-0's QUIC inbound",
			Expect:      fmt.Sprintf("each source's %d requests reach api-0 over HTTP/3.0 as its own SPIFFE ID, at the inbound and in the app's XFCC", perSourceN),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return crossNode(ctx, r, auto, "api") },
			Check:       func(o redgreen.Observation) error { return checkArrived(o, "HTTP/3.0", -1) },
		},
		{
			Name: "first-request-pays-once", Role: redgreen.Subject,
			Description: "web-0 and batch-0 call cart, a destination neither has dialled: web's pair is new, batch's is not in its dependencies",
			Expect:      fmt.Sprintf("web-0's %d requests reach cart-0 over HTTP/3.0; node-a's agent admits exactly one twin for them (later requests fetch nothing)", perSourceN),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return firstRequest(ctx, r) },
			Check:       checkOnce,
		},
		{
			Name: "quic-and-plaintext-udp-apart", Role: redgreen.Subject,
			Description: "from web-0: a QUIC Initial to dgram's VIP:18082 (a plaintext UDP service), then plaintext datagrams to api-0's 18008, where its QUIC inbound listens (R5)",
			Expect:      "the Initial is udp_proxy's: node-a's udp_proxy receives it and dgram-0's UDP backend records it; the plaintext datagrams reach no udp_proxy (neither node's receive counter moves) and no backend",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return apart(ctx, r) },
			Check:       checkApart,
		},
	}, onDemandCases(r)...)
}

const mRx = "aether_proxy_udp_downstream_rx_datagrams_total"

// apart sends a QUIC Initial to a plaintext UDP service's VIP:18082 and
// plaintext datagrams to a pod's QUIC port, and reads the udp_proxy
// receive counters of both nodes and the backends' records around each.
func apart(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "both nodes' udp_proxy receive counters and the backends' own records"}
	c, err := r.cluster(ctx, auto)
	if err != nil {
		return obs, err
	}
	web, err := cluster.PodNamed(c, namespace, "web-0")
	if err != nil {
		return obs, err
	}
	api, err := cluster.PodNamed(c, namespace, "api-0")
	if err != nil {
		return obs, err
	}
	vip, err := c.ServiceVIP(namespace, "dgram")
	if err != nil {
		return obs, err
	}
	rx0, err := udpRx(ctx, c)
	if err != nil {
		return obs, err
	}
	dgram0, err := udpRecords(ctx, c, "dgram-0", 5353)
	if err != nil {
		return obs, err
	}
	if err := quicInitial(ctx, c, web, netip.AddrPortFrom(vip, constants.ProxyL4OutboundPort)); err != nil {
		return obs, err
	}
	// The Initial must move node-a's receive counter and reach dgram-0:
	// wait for both, and judge what was seen last once the time is up.
	var rx1 map[string]float64
	var dgram1 int
	if _, err := wait.Until(ctx, 2*time.Second, 50*time.Millisecond, func() (bool, error) {
		var err error
		if rx1, err = udpRx(ctx, c); err != nil {
			return false, err
		}
		if dgram1, err = udpRecords(ctx, c, "dgram-0", 5353); err != nil {
			return false, err
		}
		return rx1["node-a"] > rx0["node-a"] && dgram1 > dgram0, nil
	}); err != nil {
		return obs, fmt.Errorf("waiting for the QUIC Initial at node-a's udp_proxy and dgram-0: %w", err)
	}
	const n = 10
	if err := plaintext(ctx, c, web, netip.AddrPortFrom(api.IP, constants.InboundPort), "plain-18008", n); err != nil {
		return obs, err
	}
	// Pacing, not a poll: the counters must not move, so the case reads
	// them once the datagrams had time to arrive.
	time.Sleep(200 * time.Millisecond)
	rx2, err := udpRx(ctx, c)
	if err != nil {
		return obs, err
	}
	delivered := 0
	for _, p := range c.Pods() {
		recs, err := c.Records(ctx, p)
		if err != nil {
			return obs, err
		}
		for _, rec := range recs {
			if strings.HasPrefix(rec.Payload, "plain-18008/") {
				delivered++
			}
		}
	}
	ev := apartEvidence{
		InitialRx:          map[string]float64{"node-a": rx1["node-a"] - rx0["node-a"], "node-b": rx1["node-b"] - rx0["node-b"]},
		InitialAtDgram:     dgram1 - dgram0,
		PlaintextSent:      n,
		PlaintextRx:        map[string]float64{"node-a": rx2["node-a"] - rx1["node-a"], "node-b": rx2["node-b"] - rx1["node-b"]},
		PlaintextDelivered: delivered,
	}
	obs.Evidence = ev
	obs.Summary = fmt.Sprintf("Initial: udp_proxy rx %s, dgram-0 recorded %d; %d plaintext to api-0:18008: udp_proxy rx %s, delivered to %d backends",
		toJSON(ev.InitialRx), ev.InitialAtDgram, n, toJSON(ev.PlaintextRx), delivered)
	return obs, c.Check(ctx)
}

// apartEvidence is the QUIC-and-plaintext case's evidence: what each
// node's udp_proxy received and dgram-0 recorded of the Initial, and
// what the udp_proxies received and the backends recorded of the
// plaintext datagrams.
type apartEvidence struct {
	InitialRx          map[string]float64 `json:"initial_rx"`
	InitialAtDgram     int                `json:"initial_at_dgram"`
	PlaintextSent      int                `json:"plaintext_sent"`
	PlaintextRx        map[string]float64 `json:"plaintext_rx"`
	PlaintextDelivered int                `json:"plaintext_delivered"`
}

func checkApart(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[apartEvidence](o)
	if err != nil {
		return err
	}
	irx, prx, at, del := f.InitialRx, f.PlaintextRx, f.InitialAtDgram, f.PlaintextDelivered
	if f.PlaintextSent == 0 {
		return errors.New("nothing observed: no plaintext datagram sent")
	}
	// The Initial half is the positive control inside the case: the
	// counters move for it, so their not moving for 18008 means something.
	if irx["node-a"] < 1 || at < 1 {
		return fmt.Errorf("the QUIC Initial to VIP:18082 was not udp_proxy's: node-a rx +%v, dgram-0 recorded %d", irx["node-a"], at)
	}
	if prx["node-a"] != 0 || prx["node-b"] != 0 || del != 0 {
		return fmt.Errorf("plaintext to 18008 reached udp_proxy or a backend: rx %v, delivered %d", prx, del)
	}
	return nil
}

// udpRx is each node's udp_proxy receive counter.
func udpRx(ctx context.Context, c cluster.Cluster) (map[string]float64, error) {
	out := map[string]float64{}
	for _, name := range []string{"node-a", "node-b"} {
		body, err := c.Metrics(ctx, name, cluster.Proxy)
		if err != nil {
			return nil, err
		}
		out[name], _ = node.Metric(body, mRx, nil)
	}
	return out, nil
}

// udpRecords counts pod's backend records of datagrams on port.
func udpRecords(ctx context.Context, c cluster.Cluster, pod string, port int) (int, error) {
	p, err := cluster.PodNamed(c, namespace, pod)
	if err != nil {
		return 0, err
	}
	recs, err := c.Records(ctx, p)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, rec := range recs {
		if rec.Event == "udp" && rec.Port == port {
			n++
		}
	}
	return n, nil
}

// quicInitial starts a QUIC handshake from p to dst and gives up soon:
// only its first flight matters. A handshake that completes means a QUIC
// server answered on a plaintext UDP service, which is an error.
func quicInitial(ctx context.Context, c cluster.Cluster, p cluster.Pod, dst netip.AddrPort) error {
	conn, err := c.DialUDP(ctx, p, dst)
	if err != nil {
		return err
	}
	pc := &connectedPacketConn{Conn: conn, peer: net.UDPAddrFromAddrPort(dst)}
	defer pc.Close()
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	qc, err := tr.Dial(ctx, pc.peer, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h3"}, ServerName: "dgram.demo.mesh.test"}, nil)
	if err == nil {
		_ = qc.CloseWithError(0, "")
		return fmt.Errorf("a QUIC handshake to %s completed; it is a plaintext UDP service", dst)
	}
	return nil
}

// plaintext sends n tagged datagrams from p to dst.
func plaintext(ctx context.Context, c cluster.Cluster, p cluster.Pod, dst netip.AddrPort, tag string, n int) error {
	conn, err := c.DialUDP(ctx, p, dst)
	if err != nil {
		return err
	}
	defer conn.Close()
	for i := range n {
		if _, err := fmt.Fprintf(conn, "%s/%d", tag, i); err != nil {
			return fmt.Errorf("datagram %d to %s: %w", i, dst, err)
		}
	}
	return nil
}

// crossNode sends perSourceN requests from web-0 and batch-0 to svc and
// reads what node-b's inbound and the app saw, and node-a's admissions
// meanwhile.
func crossNode(ctx context.Context, r *rig, v variant, svc string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witness}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	before, err := agentCounter(ctx, c, "node-a", admitted)
	if err != nil {
		return obs, err
	}
	logBefore, err := accessLines(ctx, c)
	if err != nil {
		return obs, err
	}
	tag := "cross-" + string(v)
	if err := sendFrom(ctx, c, svc, tag, perSourceN, "web-0", "batch-0"); err != nil {
		return obs, err
	}
	seen, err := inboundSeen(ctx, c, svc, logBefore)
	if err != nil {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, svc+"-0", svc, tag)
	if err != nil {
		return obs, err
	}
	after, err := agentCounter(ctx, c, "node-a", admitted)
	if err != nil {
		return obs, err
	}
	obs.Evidence = arrival{Inbound: seen, AppXFCC: xfcc, Admitted: after - before}
	obs.Summary = fmt.Sprintf("inbound saw %s; app XFCC %s; twins admitted %v", toJSON(seen), toJSON(xfcc), after-before)
	return obs, c.Check(ctx)
}

// arrival is a cross-node case's evidence: node-b's inbound lines by
// "<protocol> <peer>", the app's requests by XFCC peer, and the twins
// node-a's agent admitted meanwhile.
type arrival struct {
	Inbound  map[string]int `json:"inbound"`
	AppXFCC  map[string]int `json:"app_xfcc"`
	Admitted float64        `json:"admitted"`
}

// checkArrived: every source's requests arrived as itself over proto, at
// the inbound and at the app; wantAdmitted ≥ 0 pins the admissions.
func checkArrived(o redgreen.Observation, proto string, wantAdmitted float64) error {
	f, err := redgreen.EvidenceOf[arrival](o)
	if err != nil {
		return err
	}
	seen, xfcc, adm := f.Inbound, f.AppXFCC, f.Admitted
	for _, sa := range []string{"web", "batch"} {
		if n := seen[proto+" "+spiffeID(sa)]; n != perSourceN {
			return fmt.Errorf("the inbound saw %d of %s's requests over %s, want %d (saw %s)", n, sa, proto, perSourceN, toJSON(seen))
		}
		if n := xfcc[spiffeID(sa)]; n != perSourceN {
			return fmt.Errorf("the app saw %d requests with %s in the XFCC, want %d", n, spiffeID(sa), perSourceN)
		}
	}
	if len(seen) != 2 {
		return fmt.Errorf("the inbound saw other protocols or peers: %s", toJSON(seen))
	}
	if wantAdmitted >= 0 && adm != wantAdmitted {
		return fmt.Errorf("node-a's agent admitted %v twins, want %v", adm, wantAdmitted)
	}
	return nil
}

// firstRequest sends web-0's requests to cart (a pair the warm-up never
// dialled) and counts node-a's admissions around them.
func firstRequest(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witness}
	c, err := r.cluster(ctx, auto)
	if err != nil {
		return obs, err
	}
	before, err := agentCounter(ctx, c, "node-a", admitted)
	if err != nil {
		return obs, err
	}
	logBefore, err := accessLines(ctx, c)
	if err != nil {
		return obs, err
	}
	// The pair's first request alone, then one more alone, each timed at
	// the client: recorded, not asserted (a loaded machine moves them).
	var took [2]time.Duration
	for i := range took {
		start := time.Now()
		if err := sendFrom(ctx, c, "cart", fmt.Sprintf("first%d", i), 1, "web-0"); err != nil {
			return obs, err
		}
		took[i] = time.Since(start)
	}
	if err := sendFrom(ctx, c, "cart", "first", perSourceN-len(took), "web-0"); err != nil {
		return obs, err
	}
	ev := firstPaid{FirstRequestMS: float64(took[0].Microseconds()) / 1000, SecondRequestMS: float64(took[1].Microseconds()) / 1000}
	after, err := agentCounter(ctx, c, "node-a", admitted)
	if err != nil {
		return obs, err
	}
	seen, err := inboundSeen(ctx, c, "cart", logBefore)
	if err != nil {
		return obs, err
	}
	twins, err := agentGauge(ctx, c, "node-a", "aether_agent_twins")
	if err != nil {
		return obs, err
	}
	ev.Admitted, ev.Inbound, ev.Twins = after-before, seen, twins
	obs.Evidence = ev
	obs.Summary = fmt.Sprintf("admitted %v for %d requests; inbound saw %s; node-a serves %v twins; first request %.1f ms, second %.1f ms (client-timed, recorded only)",
		after-before, perSourceN, toJSON(seen), twins, ev.FirstRequestMS, ev.SecondRequestMS)
	return obs, c.Check(ctx)
}

// firstPaid is the first-request case's evidence: the twins node-a's
// agent admitted for a new pair's requests, cart's inbound lines by
// "<protocol> <peer>", the twins node-a serves, and the first two
// requests' client-side times (recorded, never judged).
type firstPaid struct {
	Admitted        float64        `json:"admitted"`
	Inbound         map[string]int `json:"inbound"`
	Twins           float64        `json:"twins"`
	FirstRequestMS  float64        `json:"first_request_ms"`
	SecondRequestMS float64        `json:"second_request_ms"`
}

func checkOnce(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[firstPaid](o)
	if err != nil {
		return err
	}
	adm, seen := f.Admitted, f.Inbound
	if n := seen["HTTP/3.0 "+spiffeID("web")]; n != perSourceN {
		return fmt.Errorf("cart's inbound saw %d of web's requests over HTTP/3.0, want %d (saw %s)", n, perSourceN, toJSON(seen))
	}
	if adm != 1 {
		return fmt.Errorf("node-a's agent admitted %v twins for one new pair, want 1", adm)
	}
	return nil
}

// meshClient is a pod app's HTTP/1.1 client for the 18081 spelling: it
// dials the ClusterIP on 18081, which the capture diverts to the pod's
// outbound listener.
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

// sendFrom sends n requests to svc from each pod, tagged /<tag>/<pod>/<i>,
// and fails unless every one answers 200.
func sendFrom(ctx context.Context, c cluster.Cluster, svc, tag string, n int, pods ...string) error {
	vip, err := c.ServiceVIP(namespace, svc)
	if err != nil {
		return err
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, name := range pods {
		p, err := cluster.PodNamed(c, namespace, name)
		if err != nil {
			return err
		}
		client := meshClient(c, p)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				url := fmt.Sprintf("http://%s/%s/%s/%d", netip.AddrPortFrom(vip, constants.HTTPOutboundPort), tag, name, i)
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err == nil {
					req.Host = xdsnames.Authority(svc, namespace, meshDomain)
					var resp *http.Response
					if resp, err = client.Do(req); err == nil {
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
						}
					}
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("request %d from %s to %s: %w", i, name, svc, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return first
}

// appXFCC reads pod's app record: per peer URI in the XFCC, the requests
// tagged tag.
func appXFCC(ctx context.Context, c cluster.Cluster, pod, svc, tag string) (map[string]int, error) {
	return cluster.AppXFCC(ctx, c, namespace, pod, xdsnames.Authority(svc, namespace, meshDomain)+"/"+tag+"/")
}

// accessLine is the part of a proxy access log line the suite reads.
type accessLine struct {
	Authority string `json:"authority"`
	Protocol  string `json:"protocol"`
	Source    string `json:"source"`
	Status    any    `json:"status"`
}

// accessLines reads node-b's proxy access log.
func accessLines(ctx context.Context, c cluster.Cluster) ([]accessLine, error) {
	b, err := c.AccessLog(ctx, "node-b")
	if err != nil {
		return nil, err
	}
	var out []accessLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var l accessLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("node-b's access log, line %d: %w", len(out)+1, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// inboundSeen counts node-b's access log lines for svc written since
// before, by "<protocol> <peer>". The proxy writes a line once a request
// is done, so it waits a little for the count to settle.
func inboundSeen(ctx context.Context, c cluster.Cluster, svc string, before []accessLine) (map[string]int, error) {
	var out map[string]int
	last := -1
	// A time that is up returns the count seen last: the case judges it.
	_, err := wait.Until(ctx, 2*time.Second, 100*time.Millisecond, func() (bool, error) {
		lines, err := accessLines(ctx, c)
		if err != nil {
			return false, err
		}
		out = map[string]int{}
		for _, l := range lines[len(before):] {
			if strings.HasPrefix(l.Authority, xdsnames.Authority(svc, namespace, meshDomain)) {
				out[l.Protocol+" "+l.Source]++
			}
		}
		settled := len(lines) == last
		last = len(lines)
		return settled, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading node-b's access log for %s: %w", svc, err)
	}
	return out, nil
}

func agentCounter(ctx context.Context, c cluster.Cluster, nodeName, family string) (float64, error) {
	body, err := c.Metrics(ctx, nodeName, cluster.Agent)
	if err != nil {
		return 0, err
	}
	v, found := node.Metric(body, family, nil)
	if !found {
		return 0, fmt.Errorf("node %s's agent has no %s", nodeName, family)
	}
	return v, nil
}

func agentGauge(ctx context.Context, c cluster.Cluster, nodeName, family string) (float64, error) {
	return agentCounter(ctx, c, nodeName, family)
}

// waitListeners waits for the HTTP listeners, then for one request of
// batch-0 to api to answer 200 (the warm-up's pair is not measured by any
// case's admission count). Where every twin stalls (#1008's control) the
// warm-up's answer is the on-demand timeout's 503, which still shows the
// outbound routes it.
func waitListeners(ctx context.Context, c cluster.Cluster, twinsStall bool) error {
	want := map[string][]string{
		"node-a": {xdsnames.OutboundListener(namespace, "web-0"), xdsnames.OutboundListener(namespace, "batch-0")},
		"node-b": {xdsnames.InboundListener(namespace, "api-0"), xdsnames.InboundListener(namespace, "cart-0")},
	}
	var last error
	// A listener not yet served or a warm-up request that fails is
	// retried, not an error: the path is still coming up.
	ok, err := wait.Until(ctx, 60*time.Second, 200*time.Millisecond, func() (bool, error) {
		last = cluster.ListenersServed(ctx, c, want)
		if last == nil {
			last = sendFrom(ctx, c, "api", "warmup", 1, "batch-0")
			if last == nil || twinsStall && strings.Contains(last.Error(), ": 503 ") {
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("waiting for the east-west path: %w", err)
	case !ok:
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

// connectedPacketConn lets a QUIC transport use a pod's connected UDP
// socket (Cluster.DialUDP): every datagram goes to, and comes from, its
// one peer.
type connectedPacketConn struct {
	net.Conn
	peer *net.UDPAddr
}

func (c *connectedPacketConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := c.Read(b)
	return n, c.peer, err
}

func (c *connectedPacketConn) WriteTo(b []byte, _ net.Addr) (int, error) { return c.Write(b) }
