package multicluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

const (
	witnessApps    = "the destination apps' own records of each request's XFCC, and the gateway's passthrough counters"
	witnessRefusal = "the destination proxy's refused handshakes, the gateway's passthrough counters and the destination app's record"
	witnessQUIC    = "the destination proxy's QUIC handshakes by peer ID, the gateway's UDP passthrough counters and the app's record"
	perCase        = 10
)

// crossing is one source's requests to one service of the other cluster:
// the outcomes its client got, what each destination app recorded of
// them, and what the gateway forwarded meanwhile, by cluster.
type crossing struct {
	From     string             `json:"from"`
	To       string             `json:"to"`
	Sent     int                `json:"sent"`
	Outcomes map[string]int     `json:"outcomes"`
	Apps     map[string]arrival `json:"apps"`
	// Gateway is the gateway's flows by cluster during the case, except
	// for the subjects: a source's pool keeps the connection it opened
	// while the run came up, so there it is the flows since bring-up.
	// GatewayBytes is the bytes the gateway counted during the case: a
	// TCP flow's when it ends (so often none while the pool holds it), a
	// UDP flow's as its datagrams pass.
	Gateway      map[string]float64  `json:"gateway_flows"`
	GatewayBytes float64             `json:"gateway_bytes,omitempty"`
	Refused      float64             `json:"refused_handshakes,omitempty"`
	QUIC         map[string]float64  `json:"quic_handshakes,omitempty"`
	UDP          map[string]float64  `json:"gateway_udp_flows,omitempty"`
	Expected     map[string][]string `json:"expected_ids,omitempty"`
	// FirstMs is the case's first request's latency as the source's app
	// saw it, and RestP50Ms the median of the others', in milliseconds:
	// a measurement reported, not judged. The first request to a service
	// the run has not called yet opens the source proxy's connection
	// through the gateway, its end-to-end handshake included.
	// Inbound is the lines the destination pod's inbound wrote to its
	// proxy's access log during the case, by the peer ID (the URI SAN its
	// handshake verified).
	Inbound   map[string]int `json:"inbound_log"`
	FirstMs   float64        `json:"first_ms,omitempty"`
	RestP50Ms float64        `json:"rest_p50_ms,omitempty"`
}

// latencies sets x's first and median-of-the-rest latencies.
func (x *crossing) latencies(took []time.Duration) {
	if len(took) == 0 {
		return
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	x.FirstMs = ms(took[0])
	if rest := slices.Clone(took[1:]); len(rest) > 0 {
		slices.Sort(rest)
		x.RestP50Ms = ms(rest[len(rest)/2])
	}
}

// crossings is a case's evidence: its crossings, by "<from> -> <to>".
type crossings map[string]*crossing

func cases(r *rig) []redgreen.Case {
	return append([]redgreen.Case{
		{
			Name: "gateway-first-service", Role: redgreen.Control,
			Description: "cluster-2's gateway forwards every SNI to its first exposed service (dst-a); web-0 of cluster-1 calls dst-b",
			Expect:      "delivered to the wrong pod: the gateway forwards dst-b's session to dst-a's pod, the source's end-to-end TLS refuses it, dst-b's app sees nothing",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runMisrouted(ctx, r, gatewayFirst) },
			Check:       checkMisrouted,
		},
		{
			Name: "unfederated", Role: redgreen.Control,
			Description: "the two clusters without the bundle exchange; web-0 of cluster-1 calls dst-a",
			Expect:      "handshakes refused and counted at dst-a's proxy after the gateway forwarded them; dst-a's app sees nothing",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runUnfederated(ctx, r) },
			Check:       checkUnfederated,
		},
		{
			Name: "cross-cluster-h2", Role: redgreen.Subject,
			Description: "federated, HTTP/2: web-0 of cluster-1 calls dst-a and dst-b of cluster-2 through cluster-2's gateway",
			Expect:      "every request answered 200 by its own destination, whose app sees cluster-1's web ID in its XFCC; the gateway forwarded each service's sessions to its own pods",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return runCrossing(ctx, r, federated, one, webPod, "web", two, gatewayTwo, "dst-a", "dst-b")
			},
			Check: checkDelivered,
		},
		{
			Name: "reverse-h2", Role: redgreen.Subject,
			Description: "federated, HTTP/2: peer-0 of cluster-2 calls back of cluster-1 through cluster-1's gateway",
			Expect:      "every request answered 200 by back-0, whose app sees cluster-2's peer ID in its XFCC",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return runCrossing(ctx, r, federated, two, peerPod, "peer", one, gatewayOne, "back")
			},
			Check: checkDelivered,
		},
		{
			Name: "unexposed-stays-inside", Role: redgreen.Subject,
			Description: "federated: web-0 of cluster-1 calls internal, a service of cluster-2 its gateway does not expose",
			Expect:      "answered 404 by web-0's own proxy (no export names it); internal's app sees nothing and the gateway forwards nothing for it",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runUnexposed(ctx, r) },
			Check:       checkUnexposed,
		},
		{
			Name: "cross-cluster-h3", Role: redgreen.Subject,
			Description: "federated, east-west QUIC: web-0 of cluster-1 calls dst-a over its twin, whose endpoint is cluster-2's gateway on UDP 18009",
			Expect:      "every request answered 200; dst-a's proxy accepted QUIC handshakes from cluster-1's web ID, the gateway forwarded UDP flows to dst-a's pods, the app sees cluster-1's web ID",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runQUIC(ctx, r) },
			Check:       checkQUIC,
		},
	}, gatewayCases(r)...)
}

// cross sends perCase requests from pod of src to each of svcs, served by
// pods <svc>-0 of dst behind gateway gw, and measures a crossing for each.
func cross(ctx context.Context, src member, pod, tag string, dst member, gw string, svcs ...string) (crossings, error) {
	ev := crossings{}
	var gwClusters []string
	for _, s := range svcs {
		gwClusters = append(gwClusters, xdsnames.GatewayCluster(s, namespace))
	}
	for _, s := range svcs {
		before, err := gatewayFlows(ctx, dst, gw, "tcp", gwClusters...)
		if err != nil {
			return ev, err
		}
		log0, err := inboundLog(ctx, dst, s+"-0")
		if err != nil {
			return ev, err
		}
		out, took, err := sendTimed(ctx, src, pod, src.authority(s), tag+"-"+s, perCase)
		if err != nil {
			return ev, err
		}
		// The inbound writes its line as the stream ends, which may be
		// just after the source read the response.
		var inbound map[string]int
		if _, err := wait.Until(ctx, 2*time.Second, 20*time.Millisecond, func() (bool, error) {
			log1, err := inboundLog(ctx, dst, s+"-0")
			inbound = deltaCount(log1, log0)
			n := 0
			for _, v := range inbound {
				n += v
			}
			return n >= out["200"], err
		}); err != nil && ctx.Err() != nil {
			return ev, err
		}
		after, err := gatewayFlows(ctx, dst, gw, "tcp", gwClusters...)
		if err != nil {
			return ev, err
		}
		x := &crossing{From: src.Name + "/" + pod, To: dst.Name + "/" + s, Sent: perCase, Outcomes: out,
			Apps: map[string]arrival{}, Gateway: delta(after, before)}
		x.latencies(took)
		x.Inbound = inbound
		for _, other := range svcs {
			a, err := arrivals(ctx, dst, other+"-0", tag+"-"+s)
			if err != nil {
				return ev, err
			}
			x.Apps[other] = a
		}
		ev[src.Name+"/"+pod+" -> "+dst.Name+"/"+s] = x
	}
	return ev, nil
}

func (ev crossings) summary() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(ev)) {
		x := ev[k]
		var apps []string
		for _, a := range slices.Sorted(maps.Keys(x.Apps)) {
			apps = append(apps, fmt.Sprintf("%s saw %d %v", a, x.Apps[a].Saw, x.Apps[a].Peers))
		}
		parts = append(parts, fmt.Sprintf("%s: %v; %s; inbound logged %v; gateway %v; first %.1f ms, then p50 %.1f ms", k, x.Outcomes, strings.Join(apps, ", "), x.Inbound, x.Gateway, x.FirstMs, x.RestP50Ms))
	}
	return strings.Join(parts, " | ")
}

// bothClusters brings setup s up and returns cluster-1, the source side
// of every case but reverse-h2, and cluster-2.
func bothClusters(ctx context.Context, r *rig, s setup) (member, member, error) {
	return clusterPair(ctx, r, s, one, two)
}

// clusterPair brings setup s up and returns its members from and to.
func clusterPair(ctx context.Context, r *rig, s setup, from, to string) (member, member, error) {
	m, err := r.clusters(ctx, s)
	if err != nil {
		return member{}, member{}, err
	}
	src, err := memberOf(m, from)
	if err != nil {
		return member{}, member{}, err
	}
	dst, err := memberOf(m, to)
	return src, dst, err
}

// crossingOf is the crossing from cluster-1's web pod to cluster-2's
// service svc in o's evidence.
func crossingOf(o redgreen.Observation, svc string) (*crossing, error) {
	ev, err := redgreen.EvidenceOf[crossings](o)
	if err != nil {
		return nil, err
	}
	x := ev[one+"/"+webPod+" -> "+two+"/"+svc]
	if x == nil {
		return nil, fmt.Errorf("no crossing to %s measured", svc)
	}
	return x, nil
}

func runCrossing(ctx context.Context, r *rig, s setup, from, pod, sa, to, gw string, svcs ...string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessApps}
	src, dst, err := clusterPair(ctx, r, s, from, to)
	if err != nil {
		return obs, err
	}
	b0, err := gatewayBytes(ctx, dst, gw, "tcp")
	if err != nil {
		return obs, err
	}
	ev, err := cross(ctx, src, pod, string(s), dst, gw, svcs...)
	if err != nil {
		obs.Evidence = ev
		return obs, err
	}
	b1, err := gatewayBytes(ctx, dst, gw, "tcp")
	if err != nil {
		return obs, err
	}
	for _, x := range ev {
		svc := strings.TrimPrefix(x.To, dst.Name+"/")
		x.Expected = map[string][]string{"peer": {src.id(sa)}, "by": {dst.id(svc)}}
		if x.Gateway, err = gatewayFlows(ctx, dst, gw, "tcp", xdsnames.GatewayCluster(svc, namespace)); err != nil {
			return obs, err
		}
		// One figure for the case's crossings together: they ran one
		// after another through the one gateway.
		x.GatewayBytes = b1 - b0
	}
	obs.Evidence, obs.Summary = ev, ev.summary()
	return obs, err
}

// checkDelivered: every request 200, each seen once by its own
// destination's app with the source's own remote ID as peer and the
// destination's own ID as By, none by another, and the gateway forwarded
// the service's sessions to its own cluster only.
func checkDelivered(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[crossings](o)
	if err != nil {
		return err
	}
	if len(ev) == 0 {
		return errors.New("no crossing measured")
	}
	for k, x := range ev {
		svc := x.To[strings.LastIndex(x.To, "/")+1:]
		if x.Outcomes["200"] != x.Sent {
			return fmt.Errorf("%s: %v of %d requests, want all 200", k, x.Outcomes, x.Sent)
		}
		for name, a := range x.Apps {
			if name != svc && a.Saw != 0 {
				return fmt.Errorf("%s: %s's app saw %d of the requests for %s", k, name, a.Saw, svc)
			}
		}
		a := x.Apps[svc]
		peer, by := x.Expected["peer"], x.Expected["by"]
		if len(peer) != 1 || len(by) != 1 {
			return fmt.Errorf("%s: no expected identities recorded", k)
		}
		if a.Saw != x.Sent || a.Peers[peer[0]] != x.Sent || a.By[by[0]] != x.Sent {
			return fmt.Errorf("%s: %s's app saw %d requests, peers %v, by %v; want %d from %s verified by %s", k, svc, a.Saw, a.Peers, a.By, x.Sent, peer[0], by[0])
		}
		if x.Inbound[peer[0]] != x.Sent || len(x.Inbound) != 1 {
			return fmt.Errorf("%s: %s-0's inbound logged %v, want %d lines all from %s", k, svc, x.Inbound, x.Sent, peer[0])
		}
		own := xdsnames.GatewayCluster(svc, namespace)
		if x.Gateway[own] < 1 {
			return fmt.Errorf("%s: the gateway never forwarded a flow to %s (%v): the requests did not cross it", k, own, x.Gateway)
		}

	}
	return nil
}

// misroutedControl is the gateway-first-service control run on setup s:
// on any other setup than gatewayFirst it must not show its signature.
func misroutedControl(r *rig, s setup) redgreen.Case {
	c := cases(r)[0]
	c.Run = func(ctx context.Context) (redgreen.Observation, error) { return runMisrouted(ctx, r, s) }
	return c
}

func runMisrouted(ctx context.Context, r *rig, s setup) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessApps}
	src, dst, err := bothClusters(ctx, r, s)
	if err != nil {
		return obs, err
	}
	// dst-b alone is called; the gateway's counters say where its
	// sessions went.
	toA := xdsnames.GatewayCluster("dst-a", namespace)
	before, err := gatewayFlows(ctx, dst, gatewayTwo, "tcp", toA)
	if err != nil {
		return obs, err
	}
	ev, err := cross(ctx, src, webPod, string(s), dst, gatewayTwo, "dst-b")
	if err == nil {
		after, ferr := gatewayFlows(ctx, dst, gatewayTwo, "tcp", toA)
		if ferr != nil {
			return obs, ferr
		}
		for _, x := range ev {
			a, aerr := arrivals(ctx, dst, "dst-a-0", string(s)+"-dst-b")
			if aerr != nil {
				return obs, aerr
			}
			x.Apps["dst-a"] = a
			maps.Copy(x.Gateway, delta(after, before))
		}
	}
	obs.Evidence, obs.Summary = ev, ev.summary()
	return obs, err
}

// checkMisrouted is the control's signature: no request answered 200,
// neither app saw any, and the gateway forwarded dst-b's sessions to
// dst-a's cluster (the positive witness that the wrong pod was reached)
// and none to dst-b's.
func checkMisrouted(o redgreen.Observation) error {
	x, err := crossingOf(o, "dst-b")
	if err != nil {
		return err
	}
	if x.Outcomes["200"] != 0 {
		return fmt.Errorf("%d of %d requests to dst-b were answered 200 (%v): the gateway did not misroute", x.Outcomes["200"], x.Sent, x.Outcomes)
	}
	for _, app := range []string{"dst-a", "dst-b"} {
		if n := x.Apps[app].Saw; n != 0 {
			return fmt.Errorf("%s's app saw %d requests meant for dst-b", app, n)
		}
	}
	if x.Gateway[xdsnames.GatewayCluster("dst-b", namespace)] != 0 {
		return fmt.Errorf("the gateway forwarded %v flow(s) to dst-b's own cluster", x.Gateway[xdsnames.GatewayCluster("dst-b", namespace)])
	}
	if x.Gateway[xdsnames.GatewayCluster("dst-a", namespace)] < 1 {
		return fmt.Errorf("the gateway forwarded no flow to dst-a's pods (%v): the requests failed before the gateway, not by its misroute", x.Gateway)
	}
	return nil
}

func runUnfederated(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessRefusal}
	src, dst, err := bothClusters(ctx, r, unfederated)
	if err != nil {
		return obs, err
	}
	before, err := metric(ctx, dst, nodeTwo, cluster.Proxy, mTLSRefused, nil)
	if err != nil {
		return obs, err
	}
	ev, err := cross(ctx, src, webPod, string(unfederated), dst, gatewayTwo, "dst-a")
	if err == nil {
		after, merr := metric(ctx, dst, nodeTwo, cluster.Proxy, mTLSRefused, nil)
		if merr != nil {
			return obs, merr
		}
		for _, x := range ev {
			x.Refused = after - before
		}
	}
	obs.Evidence, obs.Summary = ev, ev.summary()
	for _, x := range ev {
		obs.Summary += fmt.Sprintf("; %s refused %.0f handshake(s)", nodeTwo, x.Refused)
	}
	return obs, err
}

// checkUnfederated is the control's signature: no request 200, the app saw
// none, the gateway forwarded the sessions (they reached the destination)
// and the destination's proxy refused and counted their handshakes.
func checkUnfederated(o redgreen.Observation) error {
	x, err := crossingOf(o, "dst-a")
	if err != nil {
		return err
	}
	if x.Outcomes["200"] != 0 || x.Apps["dst-a"].Saw != 0 {
		return fmt.Errorf("without federation %d request(s) were answered 200 and the app saw %d", x.Outcomes["200"], x.Apps["dst-a"].Saw)
	}
	if x.Gateway[xdsnames.GatewayCluster("dst-a", namespace)] < 1 {
		return fmt.Errorf("the gateway forwarded no flow (%v): the refusal was not at the handshake", x.Gateway)
	}
	if x.Refused < 1 {
		return errors.New("dst-a's proxy counted no refused handshake: nothing shows the trust domains kept apart")
	}
	return nil
}

func runUnexposed(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessApps}
	src, dst, err := bothClusters(ctx, r, federated)
	if err != nil {
		return obs, err
	}
	ev, err := cross(ctx, src, webPod, "unexposed", dst, gatewayTwo, "internal")
	obs.Evidence, obs.Summary = ev, ev.summary()
	return obs, err
}

// checkUnexposed: every request 404 (web-0's own proxy has no route for
// an authority no export names), internal's app saw none, and the
// gateway has no chain for it (no flow).
func checkUnexposed(o redgreen.Observation) error {
	x, err := crossingOf(o, "internal")
	if err != nil {
		return err
	}
	if x.Outcomes["404"] != x.Sent {
		return fmt.Errorf("requests to internal got %v, want all %d answered 404", x.Outcomes, x.Sent)
	}
	if n := x.Apps["internal"].Saw; n != 0 {
		return fmt.Errorf("internal's app saw %d requests from the other cluster", n)
	}
	for cl, n := range x.Gateway {
		if n != 0 {
			return fmt.Errorf("the gateway forwarded %v flow(s) to %s", n, cl)
		}
	}
	return nil
}

func runQUIC(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessQUIC}
	src, dst, err := bothClusters(ctx, r, federatedQUIC)
	if err != nil {
		return obs, err
	}
	peer := map[string]string{"peer": src.id("web")}
	gwUDP := xdsnames.GatewayCluster("dst-a", namespace)
	b0, err := gatewayBytes(ctx, dst, gatewayTwo, "udp")
	if err != nil {
		return obs, err
	}
	ev, err := cross(ctx, src, webPod, string(federatedQUIC), dst, gatewayTwo, "dst-a")
	if err != nil {
		obs.Evidence = ev
		return obs, err
	}
	// The twin's QUIC connection may be the one the run's readiness
	// probe opened, so the handshakes and flows are those since bring-up
	// (only this source calls dst-a across), and the bytes the case's.
	hs, err := metric(ctx, dst, nodeTwo, cluster.Proxy, mHandshakes, peer)
	if err != nil {
		return obs, err
	}
	udp, err := gatewayFlows(ctx, dst, gatewayTwo, "udp", gwUDP)
	if err != nil {
		return obs, err
	}
	b1, err := gatewayBytes(ctx, dst, gatewayTwo, "udp")
	if err != nil {
		return obs, err
	}
	for _, x := range ev {
		x.Expected = map[string][]string{"peer": {src.id("web")}, "by": {dst.id("dst-a")}}
		x.QUIC = map[string]float64{src.id("web"): hs}
		x.UDP = udp
		// The gateway's TCP flows are the h2 floor's, which a first
		// request may take while its twin is fetched: not this case's
		// subject.
		x.Gateway = map[string]float64{gwUDP: udp[gwUDP]}
		x.GatewayBytes = b1 - b0
	}
	obs.Evidence, obs.Summary = ev, ev.summary()
	for _, x := range ev {
		obs.Summary += fmt.Sprintf("; QUIC handshakes from web %v, gateway UDP flows %v", x.QUIC, x.UDP)
	}
	return obs, nil
}

// checkQUIC: delivered as checkDelivered has it, and over QUIC end to end
// through the gateway: dst-a's proxy accepted a QUIC handshake presenting
// cluster-1's web ID, and the gateway forwarded a UDP flow to dst-a's pods.
func checkQUIC(o redgreen.Observation) error {
	if err := checkDelivered(o); err != nil {
		return err
	}
	ev, _ := redgreen.EvidenceOf[crossings](o)
	for k, x := range ev {
		var n float64
		for _, v := range x.QUIC {
			n += v
		}
		if n < 1 {
			return fmt.Errorf("%s: dst-a's proxy accepted no QUIC handshake from the source's ID (%v): the requests took the h2 floor", k, x.QUIC)
		}
		if x.UDP[xdsnames.GatewayCluster("dst-a", namespace)] < 1 {
			return fmt.Errorf("%s: the gateway forwarded no UDP flow to dst-a (%v)", k, x.UDP)
		}
		if x.GatewayBytes <= 0 {
			return fmt.Errorf("%s: the gateway passed no UDP byte while the requests ran: they did not cross it over QUIC", k)
		}
	}
	return nil
}
