package udproute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
	"sigs.k8s.io/yaml"
)

const (
	listener     = "udp-capture~" + namespace + "~" + client
	witnessRec   = "each backend's own record (rigs/node echo backend)"
	witnessBoth  = "the backends' records and the proxy's counters"
	dropTimeout  = 200 * time.Millisecond
	applyTimeout = 15 * time.Second
)

var l4 = constants.ProxyL4OutboundPort

// backendOf is the pod behind each UDPRoute-backed service of the scenario.
func backendOf(svc string) string {
	s := strings.TrimPrefix(svc, "svc-")
	if s == "a" || s == "b" {
		return s + "-0"
	}
	return "s" + s + "-0"
}

func twenty() []string {
	out := []string{"svc-a", "svc-b"}
	for i := 3; i <= 20; i++ {
		out = append(out, fmt.Sprintf("svc-%02d", i))
	}
	return out
}

func vip(c cluster.Cluster, svc string) (netip.Addr, error) { return c.ServiceVIP(namespace, svc) }

// proxyCounter reads one counter family from node-a's proxy, summed over
// samples carrying labels.
func proxyCounter(ctx context.Context, c cluster.Cluster, name string, labels map[string]string) (float64, error) {
	body, err := c.Metrics(ctx, "node-a", cluster.Proxy)
	if err != nil {
		return 0, err
	}
	v, _ := node.Metric(body, name, labels)
	return v, nil
}

const (
	mRx      = "aether_proxy_udp_downstream_rx_datagrams_total"
	mDropped = "aether_proxy_udp_dropped_total"
	mTCPConn = "aether_proxy_tcp_connections_total"
)

// selection sends perService datagrams to svc-a and svc-b, tagged with the
// case's name, and reports where each service's datagrams landed.
func selection(ctx context.Context, r *rig, mode constants.CaptureMode, name string) (redgreen.Observation, error) {
	ev := flows{}
	obs := redgreen.Observation{Witness: witnessRec, Evidence: ev}
	c, err := r.cluster(ctx, mode)
	if err != nil {
		return obs, err
	}
	var parts []string
	for _, svc := range []string{"svc-a", "svc-b"} {
		ip, err := vip(c, svc)
		if err != nil {
			return obs, err
		}
		tag := fmt.Sprintf("%s-%s", name, svc)
		s, err := sendUDP(ctx, c, ip, l4, tag, perService)
		if err != nil {
			return obs, err
		}
		settle()
		d, err := delivered(ctx, c, tag)
		if err != nil {
			return obs, err
		}
		ev[svc] = svcFlow{Sent: s.Datagrams, Delivered: d.ByPod, Replies: s.Replies}
		parts = append(parts, fmt.Sprintf("%s -> %s (%d/%d replies)", svc, d, s.replied(), s.Datagrams))
	}
	obs.Summary = strings.Join(parts, "; ")
	return obs, c.Check(ctx)
}

// svcFlow is what one service's datagrams did: how many were sent, where
// they were delivered and who answered, by pod.
type svcFlow struct {
	Sent      int            `json:"sent"`
	Delivered map[string]int `json:"delivered"`
	Replies   map[string]int `json:"replies"`
}

// flows is a selection case's evidence: each service's delivery, by name.
type flows map[string]svcFlow

func facts(o redgreen.Observation, svc string) (delivered map[string]int, replies map[string]int, sentN int, err error) {
	var ev flows
	if t, ok := o.Evidence.(*twentyFlows); ok {
		ev = t.Flows
	} else if ev, err = redgreen.EvidenceOf[flows](o); err != nil {
		return nil, nil, 0, err
	}
	f, ok := ev[svc]
	if !ok {
		return nil, nil, 0, fmt.Errorf("no observation for %s", svc)
	}
	return f.Delivered, f.Replies, f.Sent, nil
}

// checkCollapse is the control's signature: every datagram of both
// services delivered, all at one backend, which is the other service's for
// one of them.
func checkCollapse(o redgreen.Observation) error {
	var winner string
	crossed := false
	for _, svc := range []string{"svc-a", "svc-b"} {
		d, _, n, err := facts(o, svc)
		if err != nil {
			return err
		}
		total := 0
		for _, c := range d {
			total += c
		}
		if total != n || n == 0 {
			return fmt.Errorf("%s: %d of %d datagrams delivered; the control must deliver all of them (to the wrong place)", svc, total, n)
		}
		if len(d) != 1 {
			return fmt.Errorf("%s's datagrams were spread over %v; REDIRECT sends all to one cluster", svc, d)
		}
		for pod := range d {
			if winner != "" && pod != winner {
				return fmt.Errorf("the services landed on different backends (%s, %s): selection worked under REDIRECT", winner, pod)
			}
			winner = pod
			if pod != backendOf(svc) {
				crossed = true
			}
		}
	}
	if !crossed {
		return errors.New("every service reached its own backend: no collapse seen")
	}
	return nil
}

// checkOwn: every datagram at its own backend, and every reply back from
// VIP:18082 carrying that backend's name.
func checkOwn(o redgreen.Observation, svcs ...string) error {
	for _, svc := range svcs {
		d, rep, n, err := facts(o, svc)
		if err != nil {
			return err
		}
		own := backendOf(svc)
		if n == 0 || d[own] != n || len(d) != 1 {
			return fmt.Errorf("%s: sent %d, delivered %v; want all %d at %s", svc, n, d, n, own)
		}
		if rep[own] != n || len(rep) != 1 {
			return fmt.Errorf("%s: replies %v on a socket connected to VIP:%d; want %d from %s", svc, rep, l4, n, own)
		}
	}
	return nil
}

// selectionControl is the suite's control, measured under capture mode
// mode: the suite gives it REDIRECT, which must collapse both services onto
// one backend; the broken-rig spec gives it the subject's TPROXY and must
// see the suite call the rig broken.
func selectionControl(r *rig, mode constants.CaptureMode) redgreen.Case {
	name := "selection-redirect"
	return redgreen.Case{
		Name: name, Role: redgreen.Control,
		Description: fmt.Sprintf("svc-a and svc-b on one node, %s capture in aether-cni and the agent", mode),
		Expect:      "both services' datagrams at one backend, the tie-break winner's (svc-a, route weight 2)",
		Run: func(ctx context.Context) (redgreen.Observation, error) {
			obs, err := selection(ctx, r, mode, fmt.Sprintf("%s-%s", name, mode))
			// The control's cluster is done with: free it for the subject.
			return obs, errors.Join(err, r.close(mode))
		},
		Check: checkCollapse,
	}
}

func cases(r *rig) []redgreen.Case {
	return []redgreen.Case{
		selectionControl(r, constants.CaptureRedirect),
		{
			Name: "selection-tproxy", Role: redgreen.Subject,
			Description: "svc-a and svc-b on one node, TPROXY mark-and-divert capture",
			Expect:      "every datagram at its own service's backend; every reply from VIP:18082",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return selection(ctx, r, constants.CaptureTProxy, "selection-tproxy")
			},
			Check: func(o redgreen.Observation) error { return checkOwn(o, "svc-a", "svc-b") },
		},
		{
			Name: "twenty-services", Role: redgreen.Subject,
			Description: "20 UDPRoute-backed services behind the client pod's one udp-capture listener",
			Expect:      "each of 20 services' datagrams at its own backend, all through one listener",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runTwenty(ctx, r) },
			Check:       checkTwenty,
		},
		{
			Name: "no-udproute-dropped", Role: redgreen.Subject,
			Description: "datagrams to the ClusterIP of a UDP service no UDPRoute names",
			Expect:      "received by the listener, delivered nowhere, counted as dropped",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runNoRoute(ctx, r) },
			Check:       checkNoRoute,
		},
		{
			Name: "plaintext-18008-not-udp-proxy", Role: redgreen.Subject,
			Description: "plaintext UDP to VIP:18008 beside the same to VIP:18082 (R5)",
			Expect:      "the udp_proxy listener counts only the 18082 datagrams; no backend sees an 18008 one",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runInbound(ctx, r) },
			Check:       checkInbound,
		},
		{
			Name: "tcp-and-udp-share-clusterip", Role: redgreen.Subject,
			Description: "svc-dual: one ClusterIP, UDP and TCP both dialled on 18082",
			Expect:      "UDP at the backend's UDP port, TCP at its TCP port, through tcp:svc-dual.demo",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runDual(ctx, r) },
			Check:       checkDual,
		},
		{
			Name: "weight-zero-drains", Role: redgreen.Subject,
			Description: "svc-w's route over blue and green (equal weights, blue wins by name); blue set to weight 0 live",
			Expect:      "before: all at w-blue-0; after: all at w-green-0, none at blue",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runDrain(ctx, r) },
			Check:       checkDrain,
		},
		{
			Name: "add-and-remove-live", Role: redgreen.Subject,
			Description: "svc-new added and svc-20 removed through the watched registry file while a session to svc-a flows",
			Expect:      "svc-new reaches spare-0, svc-20 reaches nobody, the svc-a session loses nothing and keeps its proxy session",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runAddRemove(ctx, r) },
			Check:       checkAddRemove,
		},
	}
}

// twentyFlows is the twenty-services case's evidence: each service's
// delivery and the receive counters of the client's listener and of all of them.
// Its facts are one object: the services by name beside the counters.
type twentyFlows struct {
	Flows            flows
	RxAllListeners   float64
	RxClientListener float64
	Expected         float64
}

func (t twentyFlows) MarshalJSON() ([]byte, error) {
	m := map[string]any{"rx_all_listeners": t.RxAllListeners, "rx_client_listener": t.RxClientListener, "expected": t.Expected}
	for svc, f := range t.Flows {
		m[svc] = f
	}
	return json.Marshal(m)
}

func runTwenty(ctx context.Context, r *rig) (redgreen.Observation, error) {
	ev := &twentyFlows{Flows: flows{}}
	obs := redgreen.Observation{Witness: witnessBoth, Evidence: ev}
	c, err := r.cluster(ctx, constants.CaptureTProxy)
	if err != nil {
		return obs, err
	}
	before, err := proxyCounter(ctx, c, mRx, nil)
	if err != nil {
		return obs, err
	}
	beforeL, err := proxyCounter(ctx, c, mRx, map[string]string{"listener": listener})
	if err != nil {
		return obs, err
	}
	const n = 5
	own := 0
	for _, svc := range twenty() {
		ip, err := vip(c, svc)
		if err != nil {
			return obs, err
		}
		tag := "twenty-" + svc
		s, err := sendUDP(ctx, c, ip, l4, tag, n)
		if err != nil {
			return obs, err
		}
		settle()
		d, err := delivered(ctx, c, tag)
		if err != nil {
			return obs, err
		}
		ev.Flows[svc] = svcFlow{Sent: s.Datagrams, Delivered: d.ByPod, Replies: s.Replies}
		if d.ByPod[backendOf(svc)] == n && len(d.ByPod) == 1 {
			own++
		}
	}
	after, err := proxyCounter(ctx, c, mRx, nil)
	if err != nil {
		return obs, err
	}
	afterL, err := proxyCounter(ctx, c, mRx, map[string]string{"listener": listener})
	if err != nil {
		return obs, err
	}
	ev.RxAllListeners = after - before
	ev.RxClientListener = afterL - beforeL
	ev.Expected = float64(n * len(twenty()))
	obs.Summary = fmt.Sprintf("%d/20 services at their own backend; %s rx +%.0f (all listeners +%.0f)", own, listener, afterL-beforeL, after-before)
	return obs, c.Check(ctx)
}

func checkTwenty(o redgreen.Observation) error {
	if err := checkOwn(o, twenty()...); err != nil {
		return err
	}
	ev, err := redgreen.EvidenceOf[*twentyFlows](o)
	if err != nil {
		return err
	}
	want := ev.Expected
	if got := ev.RxClientListener; got != want {
		return fmt.Errorf("the client's listener counted %.0f datagrams, want %.0f", got, want)
	}
	if got := ev.RxAllListeners; got != want {
		return fmt.Errorf("all listeners together counted %.0f datagrams, want %.0f: another listener took part", got, want)
	}
	return nil
}

func runNoRoute(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessBoth}
	c, err := r.cluster(ctx, constants.CaptureTProxy)
	if err != nil {
		return obs, err
	}
	ip, err := vip(c, "svc-noroute")
	if err != nil {
		return obs, err
	}
	lbl := map[string]string{"listener": listener}
	rx0, err := proxyCounter(ctx, c, mRx, lbl)
	if err != nil {
		return obs, err
	}
	drop0, err := proxyCounter(ctx, c, mDropped, lbl)
	if err != nil {
		return obs, err
	}
	const n = 10
	saved := replyTimeout
	replyTimeout = dropTimeout
	s, err := sendUDP(ctx, c, ip, l4, "noroute", n)
	replyTimeout = saved
	if err != nil {
		return obs, err
	}
	settle()
	d, err := delivered(ctx, c, "noroute")
	if err != nil {
		return obs, err
	}
	rx1, err := proxyCounter(ctx, c, mRx, lbl)
	if err != nil {
		return obs, err
	}
	drop1, err := proxyCounter(ctx, c, mDropped, lbl)
	if err != nil {
		return obs, err
	}
	obs.Evidence = dropped{Sent: s.Datagrams, Replies: s.replied(), Delivered: d.total(), ByPod: d.ByPod,
		Rx: rx1 - rx0, Dropped: drop1 - drop0}
	obs.Summary = fmt.Sprintf("sent %d: listener rx +%.0f, dropped +%.0f, delivered to %s, %d replies", s.Datagrams, rx1-rx0, drop1-drop0, d, s.replied())
	return obs, c.Check(ctx)
}

// dropped is the no-route case's evidence: what was sent, what the
// backends and the client saw of it, and what node-a's proxy counted.
type dropped struct {
	Sent      int            `json:"sent"`
	Replies   int            `json:"replies"`
	Delivered int            `json:"delivered"`
	ByPod     map[string]int `json:"by_pod"`
	Rx        float64        `json:"rx"`
	Dropped   float64        `json:"dropped"`
}

func checkNoRoute(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[dropped](o)
	if err != nil {
		return err
	}
	n := float64(f.Sent)
	switch {
	case n == 0:
		return errors.New("nothing sent")
	case f.Rx != n:
		return fmt.Errorf("the listener received %.0f of %.0f: the drop was not the proxy's", f.Rx, n)
	case f.Delivered != 0:
		return fmt.Errorf("delivered to %v", f.ByPod)
	case f.Replies != 0:
		return fmt.Errorf("%d replies came back", f.Replies)
	case f.Dropped != n:
		return fmt.Errorf("dropped counter rose by %.0f, want %.0f", f.Dropped, n)
	}
	return nil
}

func runInbound(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessBoth}
	c, err := r.cluster(ctx, constants.CaptureTProxy)
	if err != nil {
		return obs, err
	}
	ip, err := vip(c, "svc-a")
	if err != nil {
		return obs, err
	}
	rx0, err := proxyCounter(ctx, c, mRx, nil)
	if err != nil {
		return obs, err
	}
	const n = 10
	saved := replyTimeout
	replyTimeout = dropTimeout
	s8, err := sendUDP(ctx, c, ip, constants.InboundPort, "inbound-18008", n)
	replyTimeout = saved
	if err != nil {
		return obs, err
	}
	s2, err := sendUDP(ctx, c, ip, l4, "inbound-18082", n)
	if err != nil {
		return obs, err
	}
	settle()
	d8, err := delivered(ctx, c, "inbound-18008")
	if err != nil {
		return obs, err
	}
	d2, err := delivered(ctx, c, "inbound-18082")
	if err != nil {
		return obs, err
	}
	rx1, err := proxyCounter(ctx, c, mRx, nil)
	if err != nil {
		return obs, err
	}
	obs.Evidence = inbound{Sent18008: s8.Datagrams, Sent18082: s2.Datagrams, Rx: rx1 - rx0,
		Delivered18008: d8.total(), Delivered18082: d2.ByPod, Replies18008: s8.replied()}
	obs.Summary = fmt.Sprintf("udp_proxy rx +%.0f for %d to :18082 and %d to :18008; :18008 delivered to %s, :18082 to %s",
		rx1-rx0, s2.Datagrams, s8.Datagrams, d8, d2)
	return obs, c.Check(ctx)
}

// inbound is the plaintext-18008 case's evidence: the datagrams sent to
// each port, where they were delivered, and udp_proxy's receive count.
type inbound struct {
	Sent18008      int            `json:"sent_18008"`
	Sent18082      int            `json:"sent_18082"`
	Rx             float64        `json:"rx"`
	Delivered18008 int            `json:"delivered_18008"`
	Delivered18082 map[string]int `json:"delivered_18082"`
	Replies18008   int            `json:"replies_18008"`
}

func checkInbound(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[inbound](o)
	if err != nil {
		return err
	}
	n2, n8 := f.Sent18082, f.Sent18008
	if n2 == 0 || n8 == 0 {
		return errors.New("nothing sent")
	}
	// The 18082 half is the positive control inside the case: the counter
	// moves, so its not moving for 18008 means something.
	if d := f.Delivered18082; d["a-0"] != n2 {
		return fmt.Errorf(":18082 datagrams delivered %v, want %d at a-0", d, n2)
	}
	if rx := f.Rx; rx != float64(n2) {
		return fmt.Errorf("udp_proxy listeners counted %.0f datagrams, want exactly the %d sent to :18082", rx, n2)
	}
	if d := f.Delivered18008; d != 0 || f.Replies18008 != 0 {
		return fmt.Errorf(":18008 datagrams reached a backend (%d) or were answered", d)
	}
	return nil
}

func runDual(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessBoth}
	c, err := r.cluster(ctx, constants.CaptureTProxy)
	if err != nil {
		return obs, err
	}
	ip, err := vip(c, "svc-dual")
	if err != nil {
		return obs, err
	}
	lbl := map[string]string{"cluster": "tcp:svc-dual.demo"}
	t0, err := proxyCounter(ctx, c, mTCPConn, lbl)
	if err != nil {
		return obs, err
	}
	s, err := sendUDP(ctx, c, ip, l4, "dual-udp", perService)
	if err != nil {
		return obs, err
	}
	const conns = 5
	tcpReplies := map[string]int{}
	for i := range conns {
		rep, err := sendTCP(ctx, c, ip, l4, fmt.Sprintf("dual-tcp/%d", i))
		if err != nil {
			return obs, err
		}
		tcpReplies[rep]++
	}
	settle()
	du, err := delivered(ctx, c, "dual-udp")
	if err != nil {
		return obs, err
	}
	dt, err := delivered(ctx, c, "dual-tcp")
	if err != nil {
		return obs, err
	}
	t1, err := proxyCounter(ctx, c, mTCPConn, lbl)
	if err != nil {
		return obs, err
	}
	obs.Evidence = dual{UDPSent: s.Datagrams, UDPPorts: du.ByPort, UDPReplies: s.Replies,
		TCPSent: conns, TCPPorts: dt.ByPort, TCPReplies: tcpReplies, TCPClusterConns: t1 - t0}
	obs.Summary = fmt.Sprintf("udp -> %v; tcp -> %v; tcp:svc-dual.demo connections +%.0f", du.ByPort, dt.ByPort, t1-t0)
	return obs, c.Check(ctx)
}

// dual is the shared-ClusterIP case's evidence: each protocol's sends,
// where they were delivered (pod, then port) and who answered, and the
// connections node-a's proxy handed to the TCP cluster.
type dual struct {
	UDPSent         int                       `json:"udp_sent"`
	UDPPorts        map[string]map[string]int `json:"udp_ports"`
	UDPReplies      map[string]int            `json:"udp_replies"`
	TCPSent         int                       `json:"tcp_sent"`
	TCPPorts        map[string]map[string]int `json:"tcp_ports"`
	TCPReplies      map[string]int            `json:"tcp_replies"`
	TCPClusterConns float64                   `json:"tcp_cluster_conns"`
}

func checkDual(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[dual](o)
	if err != nil {
		return err
	}
	nu, nt := f.UDPSent, f.TCPSent
	up, tp := f.UDPPorts, f.TCPPorts
	if len(up) != 1 || len(up["dual-0"]) != 1 || up["dual-0"]["udp/7000"] != nu {
		return fmt.Errorf("UDP delivered %v, want %d at dual-0 udp/7000", up, nu)
	}
	if len(tp) != 1 || len(tp["dual-0"]) != 1 || tp["dual-0"]["tcp/7100"] != nt {
		return fmt.Errorf("TCP delivered %v, want %d at dual-0 tcp/7100", tp, nt)
	}
	if r := f.UDPReplies; r["dual-0"] != nu {
		return fmt.Errorf("UDP replies %v, want %d from dual-0", r, nu)
	}
	if r := f.TCPReplies; r["dual-0"] != nt {
		return fmt.Errorf("TCP replies %v, want %d from dual-0", r, nt)
	}
	if got := f.TCPClusterConns; got != float64(nt) {
		return fmt.Errorf("the proxy handed %.0f connections to tcp:svc-dual.demo, want %d", got, nt)
	}
	return nil
}

// applied is when a change reached the data plane, measured from the
// moment the suite began writing it: after the last probe sent that
// missed, by the first probe sent that landed. A probe round trip (a
// socket in the client pod, the backend's record read back) is the
// resolution, so the time is the pair, not a point.
type applied struct{ after, by time.Duration }

func (a applied) String() string {
	return fmt.Sprintf("reached the data plane %s–%s after the write", a.after.Round(time.Millisecond), a.by.Round(time.Millisecond))
}

// awaitDelivery probes svc from fresh sockets until a probe lands at pod,
// which is how the suite knows the agent and proxy applied a change
// written at since.
func awaitDelivery(ctx context.Context, c cluster.Cluster, ip netip.Addr, tag, pod string, since time.Time) (applied, error) {
	saved := replyTimeout
	replyTimeout = dropTimeout
	defer func() { replyTimeout = saved }()
	var a applied
	deadline := time.Now().Add(applyTimeout)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := ctx.Err(); err != nil {
			return a, err
		}
		sentAt := time.Since(since)
		if _, err := sendUDP(ctx, c, ip, l4, fmt.Sprintf("%s-%d", tag, i), 1); err != nil {
			return a, err
		}
		settle()
		d, err := delivered(ctx, c, fmt.Sprintf("%s-%d", tag, i))
		if err != nil {
			return a, err
		}
		if d.ByPod[pod] > 0 {
			a.by = sentAt
			return a, nil
		}
		a.after = sentAt
	}
	return a, fmt.Errorf("the change was not applied within %s: %s never reached %s", applyTimeout, ip, pod)
}

func runDrain(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessRec}
	c, err := r.cluster(ctx, constants.CaptureTProxy)
	if err != nil {
		return obs, err
	}
	ip, err := vip(c, "svc-w")
	if err != nil {
		return obs, err
	}
	if _, err := sendUDP(ctx, c, ip, l4, "drain-before", perService); err != nil {
		return obs, err
	}
	settle()
	before, err := delivered(ctx, c, "drain-before")
	if err != nil {
		return obs, err
	}
	zero := int32(0)
	written := time.Now()
	err = c.Update(ctx, func(sc *registry.Scenario) {
		for i := range sc.UDPRoutes {
			if sc.UDPRoutes[i].Metadata.Name == "svc-w" {
				sc.UDPRoutes[i].Spec.Rules[0].BackendRefs[0].Weight = &zero
			}
		}
	})
	if err != nil {
		return obs, err
	}
	took, err := awaitDelivery(ctx, c, ip, "drain-probe", "w-green-0", written)
	if err != nil {
		return obs, err
	}
	if _, err := sendUDP(ctx, c, ip, l4, "drain-after", perService); err != nil {
		return obs, err
	}
	settle()
	after, err := delivered(ctx, c, "drain-after")
	if err != nil {
		return obs, err
	}
	obs.Evidence = drain{Sent: perService, Before: before.ByPod, After: after.ByPod, AppliedByMS: took.by.Milliseconds()}
	obs.Summary = fmt.Sprintf("blue weight 1: %s; blue weight 0: %s; the weight %s", before, after, took)
	return obs, c.Check(ctx)
}

// drain is the weight-zero case's evidence: where the datagrams landed
// before and after blue's weight went to 0, and when the change applied.
type drain struct {
	Sent        int            `json:"sent"`
	Before      map[string]int `json:"before"`
	After       map[string]int `json:"after"`
	AppliedByMS int64          `json:"applied_by_ms"`
}

func checkDrain(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[drain](o)
	if err != nil {
		return err
	}
	n, b, a := f.Sent, f.Before, f.After
	if b["w-blue-0"] != n || len(b) != 1 {
		return fmt.Errorf("before the drain %v, want all %d at w-blue-0 (the name tie-break)", b, n)
	}
	if a["w-green-0"] != n || len(a) != 1 {
		return fmt.Errorf("after the drain %v, want all %d at w-green-0", a, n)
	}
	return nil
}

func runAddRemove(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessRec}
	c, err := r.cluster(ctx, constants.CaptureTProxy)
	if err != nil {
		return obs, err
	}
	ipA, err := vip(c, "svc-a")
	if err != nil {
		return obs, err
	}
	ip20, err := vip(c, "svc-20")
	if err != nil {
		return obs, err
	}
	ipNew := netip.MustParseAddr("10.96.2.10")
	f, err := startFlow(ctx, c, ipA, "live-a", 20*time.Millisecond)
	if err != nil {
		return obs, err
	}
	// The session is established once a reply came back through it.
	if ok, err := wait.Until(ctx, 5*time.Second, 20*time.Millisecond, func() (bool, error) { return f.replied() > 0, nil }); !ok {
		_, _ = f.finish()
		return obs, fmt.Errorf("the flow to svc-a had no reply within 5s, so no session was up before the change: %v", err)
	}
	var newSvc registry.ScenarioService
	var newRoute registry.ScenarioUDPRoute
	uerr := errors.Join(
		yaml.UnmarshalStrict([]byte(`{name: svc-new, namespace: demo, clusterIP: `+ipNew.String()+`, selector: {app: spare}, ports: [{name: dgram, port: 5000, targetPort: 7000, protocol: UDP}]}`), &newSvc),
		yaml.UnmarshalStrict([]byte(`{apiVersion: gateway.networking.k8s.io/v1alpha2, kind: UDPRoute, metadata: {name: svc-new, namespace: demo},
  spec: {parentRefs: [{group: "", kind: Service, name: svc-new}], rules: [{backendRefs: [{name: svc-new, port: 5000}]}]}}`), &newRoute))
	written := time.Now()
	if uerr == nil {
		uerr = c.Update(ctx, func(sc *registry.Scenario) {
			var svcs []registry.ScenarioService
			for _, s := range sc.Services {
				if s.Name != "svc-20" {
					svcs = append(svcs, s)
				}
			}
			sc.Services = append(svcs, newSvc)
			var routes []registry.ScenarioUDPRoute
			for _, rt := range sc.UDPRoutes {
				if rt.Metadata.Name != "svc-20" {
					routes = append(routes, rt)
				}
			}
			sc.UDPRoutes = append(routes, newRoute)
		})
	}
	var took applied
	if uerr == nil {
		took, uerr = awaitDelivery(ctx, c, ipNew, "live-new-probe", "spare-0", written)
	}
	var sNew, s20 sent
	if uerr == nil {
		sNew, uerr = sendUDP(ctx, c, ipNew, l4, "live-new", perService)
	}
	if uerr == nil {
		saved := replyTimeout
		replyTimeout = dropTimeout
		s20, uerr = sendUDP(ctx, c, ip20, l4, "live-removed", 10)
		replyTimeout = saved
	}
	// Pacing, not a wait: the flow runs a little past the change.
	time.Sleep(300 * time.Millisecond)
	fs, ferr := f.finish()
	if uerr != nil {
		return obs, uerr
	}
	settle()
	dFlow, err := delivered(ctx, c, "live-a")
	if err != nil {
		return obs, err
	}
	dNew, err := delivered(ctx, c, "live-new")
	if err != nil {
		return obs, err
	}
	d20, err := delivered(ctx, c, "live-removed")
	if err != nil {
		return obs, err
	}
	flowErr := ""
	if ferr != nil {
		flowErr = ferr.Error()
	}
	obs.Evidence = live{
		FlowSent: fs.Datagrams, FlowReplies: fs.replied(), FlowDelivered: dFlow.ByPod, FlowSources: len(dFlow.Sources["a-0"]), FlowError: flowErr,
		NewSent: sNew.Datagrams, NewDelivered: dNew.ByPod, RemovedSent: s20.Datagrams, RemovedDelivered: d20.total(), RemovedReplies: s20.replied(),
		AppliedByMS: took.by.Milliseconds(),
	}
	obs.Summary = fmt.Sprintf("svc-a session: %d sent, %d replies, delivered %s from %d proxy source(s); svc-new -> %s (%s); removed svc-20 -> %s",
		fs.Datagrams, fs.replied(), dFlow, len(dFlow.Sources["a-0"]), dNew, took, d20)
	return obs, c.Check(ctx)
}

// live is the add-and-remove case's evidence: the live session's flow
// through both changes, the added service's and the removed one's.
type live struct {
	FlowSent         int            `json:"flow_sent"`
	FlowReplies      int            `json:"flow_replies"`
	FlowDelivered    map[string]int `json:"flow_delivered"`
	FlowSources      int            `json:"flow_sources"`
	FlowError        string         `json:"flow_error"`
	NewSent          int            `json:"new_sent"`
	NewDelivered     map[string]int `json:"new_delivered"`
	RemovedSent      int            `json:"removed_sent"`
	RemovedDelivered int            `json:"removed_delivered"`
	RemovedReplies   int            `json:"removed_replies"`
	AppliedByMS      int64          `json:"applied_by_ms"`
}

func checkAddRemove(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[live](o)
	if err != nil {
		return err
	}
	n := f.FlowSent
	switch {
	case f.FlowError != "":
		return fmt.Errorf("the live session failed: %s", f.FlowError)
	case n < 10:
		return fmt.Errorf("the live session sent only %d datagrams", n)
	case f.FlowReplies != n:
		return fmt.Errorf("the live session got %d replies for %d datagrams", f.FlowReplies, n)
	case f.FlowDelivered["a-0"] != n || len(f.FlowDelivered) != 1:
		return fmt.Errorf("the live session's datagrams went to %v, want all %d at a-0", f.FlowDelivered, n)
	case f.FlowSources != 1:
		return fmt.Errorf("a-0 saw the live session from %d proxy sources: the session was re-created", f.FlowSources)
	case f.NewSent == 0 || f.NewDelivered["spare-0"] != f.NewSent:
		return fmt.Errorf("svc-new's %d datagrams went to %v, want all at spare-0", f.NewSent, f.NewDelivered)
	case f.RemovedSent == 0 || f.RemovedDelivered != 0 || f.RemovedReplies != 0:
		return fmt.Errorf("the removed svc-20 still delivered %d of %d datagrams", f.RemovedDelivered, f.RemovedSent)
	}
	return nil
}
