package multicluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

const namespace = "demo"

// The fixture's clusters, the pods that call across and the gateways.
const (
	one, two          = "cluster-1", "cluster-2"
	gatewayOne        = "c1-gw"
	gatewayTwo        = "c2-gw"
	nodeOne, nodeTwo  = "c1-a", "c2-b"
	webPod, peerPod   = "web-0", "peer-0"
	mHandshakes       = "aether_proxy_quic_inbound_handshakes_total"
	mTLSRefused       = "aether_proxy_http_tls_refused_total"
	mPassthroughFlows = "aether_proxy_passthrough_flows_total"
	mPassthroughBytes = "aether_proxy_passthrough_bytes_total"
)

// member is one cluster of the run: its entry and its Cluster.
type member struct {
	cluster.Member
	c cluster.Cluster
}

func memberOf(m cluster.Multi, name string) (member, error) {
	mb, c, err := cluster.MemberNamed(m, name)
	return member{mb, c}, err
}

// id is the SPIFFE ID of service account sa of the demo namespace in the
// member's trust domain.
func (m member) id(sa string) string {
	return "spiffe://" + m.TrustDomain + "/ns/" + namespace + "/sa/" + sa
}

// authority is how an app of m names service svc: the mesh spelling in
// m's own mesh domain, whichever cluster serves it.
func (m member) authority(svc string) string { return xdsnames.Authority(svc, namespace, m.MeshDomain) }

// client is a pod app's HTTP/1.1 client for the 18081 spelling: it dials
// the pod's own loopback on 18081, where its outbound listener is bound
// (a remote service has no ClusterIP in the caller's cluster).
func client(c cluster.Cluster, p cluster.Pod) *http.Client {
	to := netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), constants.HTTPOutboundPort)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: false,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.DialTCP(ctx, p, to)
		},
	}}
}

// send sends n requests, one after another, from pod of m to authority,
// tagged /<tag>/<i>, and returns the count of each outcome: the status
// code, or "error" for a request that got no response.
func send(ctx context.Context, m member, pod, authority, tag string, n int) (map[string]int, error) {
	out, _, err := sendTimed(ctx, m, pod, authority, tag, n)
	return out, err
}

// sendTimed is send, also returning each request's latency as the pod's
// client saw it, in order.
func sendTimed(ctx context.Context, m member, pod, authority, tag string, n int) (map[string]int, []time.Duration, error) {
	p, err := cluster.PodNamed(m.c, namespace, pod)
	if err != nil {
		return nil, nil, err
	}
	hc := client(m.c, p)
	defer hc.CloseIdleConnections()
	out := map[string]int{}
	var took []time.Duration
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/%s/%d", authority, tag, i), nil)
		if err != nil {
			return nil, nil, err
		}
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			out["error"]++
			took = append(took, time.Since(start))
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took = append(took, time.Since(start))
		out[strconv.Itoa(resp.StatusCode)]++
	}
	return out, took, nil
}

// arrival is what a destination app recorded of a case's requests: how
// many, and the peer and own IDs their XFCC named.
type arrival struct {
	Saw   int            `json:"saw"`
	Peers map[string]int `json:"peers"`
	By    map[string]int `json:"by"`
}

// arrivals reads pod's app record in m for the requests tagged tag.
func arrivals(ctx context.Context, m member, pod, tag string) (arrival, error) {
	a := arrival{Peers: map[string]int{}, By: map[string]int{}}
	p, err := cluster.PodNamed(m.c, namespace, pod)
	if err != nil {
		return a, err
	}
	recs, err := m.c.Records(ctx, p)
	if err != nil {
		return a, err
	}
	for _, rec := range recs {
		if rec.Event != "http" || !strings.Contains(rec.Payload, "/"+tag+"/") {
			continue
		}
		a.Saw++
		a.Peers[cluster.PeerURI(rec.XFCC)]++
		a.By[xfccBy(rec.XFCC)]++
	}
	return a, nil
}

// xfccBy is the By element of an XFCC value: the identity of the proxy
// that verified the client.
func xfccBy(xfcc string) string {
	for _, part := range strings.Split(xfcc, ";") {
		if v, ok := strings.CutPrefix(part, "By="); ok {
			return v
		}
	}
	return ""
}

// metric sums a counter of node's component in m over samples with labels.
func metric(ctx context.Context, m member, nodeName string, of cluster.Component, family string, labels map[string]string) (float64, error) {
	body, err := m.c.Metrics(ctx, nodeName, of)
	if err != nil {
		return 0, fmt.Errorf("%s %s's %s metrics: %w", m.Name, nodeName, of, err)
	}
	v, _ := node.Metric(body, family, labels)
	return v, nil
}

// gatewayFlows is what gw's passthrough forwarded over protocol (tcp or
// udp), by cluster, for the clusters named.
func gatewayFlows(ctx context.Context, m member, gw, protocol string, clusters ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, cl := range clusters {
		v, err := metric(ctx, m, gw, cluster.Proxy, mPassthroughFlows, map[string]string{"protocol": protocol, "cluster": cl})
		if err != nil {
			return nil, err
		}
		out[cl] = v
	}
	return out, nil
}

// gatewayBytes is what gw's passthrough has passed over protocol, both
// ways.
func gatewayBytes(ctx context.Context, m member, gw, protocol string) (float64, error) {
	return metric(ctx, m, gw, cluster.Proxy, mPassthroughBytes, map[string]string{"protocol": protocol})
}

// inboundLog counts the lines pod's inbound (its destination clusters,
// inbound:<ns>~<pod>:<port>) wrote to its node's proxy's access log, by
// the peer ID its handshake verified (the line's source).
func inboundLog(ctx context.Context, m member, pod string) (map[string]int, error) {
	p, err := cluster.PodNamed(m.c, namespace, pod)
	if err != nil {
		return nil, err
	}
	body, err := m.c.AccessLog(ctx, p.Node)
	if err != nil {
		return nil, fmt.Errorf("%s %s's access log: %w", m.Name, p.Node, err)
	}
	out := map[string]int{}
	prefix := xdsnames.InboundClusterPrefix + namespace + "~" + pod + ":"
	for _, line := range bytes.Split(body, []byte("\n")) {
		var l struct{ Source, Destination string }
		if len(bytes.TrimSpace(line)) == 0 || json.Unmarshal(line, &l) != nil {
			continue
		}
		if strings.HasPrefix(l.Destination, prefix) {
			out[l.Source]++
		}
	}
	return out, nil
}

func deltaCount(after, before map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func delta(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// waitReady waits until the run serves: each source reaches its own
// cluster's service (its proxies have their listeners and secrets), and
// in a federated setup each reaches the other cluster's (the bundles are
// exchanged, the exports read).
func waitReady(ctx context.Context, m cluster.Multi, s setup) error {
	c1, err := memberOf(m, one)
	if err != nil {
		return err
	}
	c2, err := memberOf(m, two)
	if err != nil {
		return err
	}
	type probe struct {
		m         member
		pod, auth string
	}
	probes := []probe{{c1, webPod, c1.authority("back")}, {c2, peerPod, c2.authority("dst-a")}}
	if s == federated || s == federatedQUIC {
		probes = append(probes, probe{c1, webPod, c1.authority("dst-a")}, probe{c2, peerPod, c2.authority("back")})
	}
	for _, p := range probes {
		var last map[string]int
		ok, err := wait.Until(ctx, 90*time.Second, 250*time.Millisecond, func() (bool, error) {
			var err error
			last, err = send(ctx, p.m, p.pod, p.auth, "ready", 1)
			return last["200"] == 1, err
		})
		if !ok {
			return fmt.Errorf("%s's %s never reached %s within 90s (last %v): %v", p.m.Name, p.pod, p.auth, last, err)
		}
	}
	return nil
}
