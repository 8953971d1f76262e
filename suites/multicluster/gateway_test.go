package multicluster

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// The gateway's own counters (mesh/proxy/passthrough's metrics.go) and the
// reasons and events this file reads on them.
const (
	mPassthroughDropped = "aether_proxy_passthrough_dropped_total"
	mPassthroughEvents  = "aether_proxy_passthrough_events_total"
	mPassthroughActive  = "aether_proxy_passthrough_active_flows"
	dropNotQUIC         = "not_quic"
	dropNotInitial      = "not_initial"
	dropSmallInitial    = "initial_too_small"
	dropUndecryptable   = "initial_undecryptable"
	dropUnknownSNI      = "unknown_sni"
	eventMigrated       = "migrated"
	eventCIDLearned     = "cid_learned"
	// minInitial is the smallest datagram a client Initial may travel in
	// (RFC 9000 §14.1).
	minInitial = 1200
)

const (
	witnessJunk      = "c2-gw's proxy's drop counters by reason, its UDP flow counters, and the backend records of every pod behind it"
	witnessMigration = "dst-a-0's app record of each request's XFCC, dst-a's proxy's QUIC handshake counter and c2-gw's passthrough events and flows"
	witnessSpray     = "dst-a-0's app record of the flow's requests, c2-gw's proxy's /proc (RSS, fds), its drop counters and its netns's UDP receive errors"
)

func gatewayCases(r *rig) []redgreen.Case {
	return []redgreen.Case{
		{
			Name: "gateway-drops-junk", Role: redgreen.Subject,
			Description: "from c1-a's netns, datagrams that are no QUIC Initial (plaintext, a 3-byte scrap, a short header, a Handshake long header, an Initial under 1200 bytes, a forged Initial) and then a real quic-go Initial whose SNI no chain names, to c2-gw's UDP 18009; subject only: the property is a refusal",
			Expect:      "each kind dropped and counted under its own reason (not_quic, not_initial, initial_too_small, initial_undecryptable; the unknown SNI's datagrams as unknown_sni), no UDP flow made, no record at dst-a-0, dst-b-0 or internal-0",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runJunk(ctx, r) },
			Check:       checkJunk,
		},
		{
			Name: "migration-to-a-fresh-cid", Role: redgreen.Control,
			Description: "the migration case's client, but moving on purpose: quic-go's own path migration (Conn.AddPath, Path.Probe) from a new port under a connection ID the server issued and the client never used from a known address",
			Expect:      "the gateway cannot follow: the probes from the new port are dropped as not_quic, no migration counted, the probe fails; the connection lives on its old path (dst-a-0's app sees its requests as web)",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runMigration(ctx, r, freshCID) },
			Check:       checkFreshCID,
		},
		{
			Name: "migration-through-the-gateway", Role: redgreen.Subject,
			Description: "an HTTP/3 client of its own in c1-a's netns, with an SVID of cluster-1's web account, dials c2-gw's UDP 18009 for dst-a, and its socket moves to a new port under the connection (a NAT rebinding) between its requests; its control is migration-to-a-fresh-cid (a forwarder routing by 4-tuple only is mesh/proxy/passthrough's TestQUICRebind control: no proxy flag reaches it)",
			Expect:      "every request answered on the one connection: dst-a-0's app sees each with cluster-1's web ID, dst-a's proxy accepted one handshake, the gateway made one flow and counted the migration",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runMigration(ctx, r, natRebind) },
			Check:       checkMigration,
		},
		{
			Name: "initial-spray-bounded", Role: redgreen.Subject,
			Description: fmt.Sprintf("%d forged Initials (random DCIDs, full-size v1 long headers) from %d senders in c1-a's netns at c2-gw's UDP 18009, while web-0 calls dst-a across over its QUIC twin; subject only", sprayTotal, spraySenders),
			Expect:      fmt.Sprintf("≥ 99.9%% of the flow's requests reach dst-a-0's app as web; c2-gw's proxy grows its RSS by at most %d MiB and its fds by at most %d; every forged Initial that reached its socket is counted as initial_undecryptable", sprayRSSGrowth>>20, sprayFDGrowth),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return runSpray(ctx, r) },
			Check:       checkSpray,
		},
	}
}

// gatewaySetup is the run the gateway cases use: the QUIC one, on which
// the cross-cluster-h3 case ran just before them, so no bring-up is spent,
// and whose twins cross the gateway's UDP 18009 as the spray's valid flow.
const gatewaySetup = federatedQUIC

// gatewayRun is the run's pieces the gateway cases need: the two
// clusters, c1-a's netns (a node of cluster-1 that reaches the shared
// network through c1-gw) and c2-gw's address on 18009.
type gatewayRun struct {
	src, dst member
	from     *netns.NS
	gw       netip.AddrPort
	gwNode   *node.Node
}

func (r *rig) gatewayRun(ctx context.Context) (gatewayRun, error) {
	var g gatewayRun
	m, err := r.clusters(ctx, gatewaySetup)
	if err != nil {
		return g, err
	}
	if g.src, err = memberOf(m, one); err != nil {
		return g, err
	}
	if g.dst, err = memberOf(m, two); err != nil {
		return g, err
	}
	src, dst := cluster.Embedded(g.src.c), cluster.Embedded(g.dst.c)
	if src == nil || dst == nil {
		return g, errors.New("the gateway cases need the embedded clusters: a netns to send from and the gateway's process to read")
	}
	n := src.Node(nodeOne)
	if n == nil {
		return g, fmt.Errorf("no node %s in %s", nodeOne, one)
	}
	g.from = n.NS
	if g.gwNode = dst.Node(gatewayTwo); g.gwNode == nil {
		return g, fmt.Errorf("no node %s in %s", gatewayTwo, two)
	}
	if !g.dst.Gateway.IsValid() {
		return g, fmt.Errorf("%s has no gateway address", two)
	}
	g.gw = netip.AddrPortFrom(g.dst.Gateway, constants.EastWestTunnelPort)
	return g, nil
}

// listenUDP is a UDP socket bound in ns, on any port.
func listenUDP(ns *netns.NS) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		var err error
		c, err = net.ListenUDP("udp4", &net.UDPAddr{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("a UDP socket in %s: %w", ns.Path, err)
	}
	return c, nil
}

// dialUDP is a UDP socket in ns connected to to.
func dialUDP(ns *netns.NS, to netip.AddrPort) (*net.UDPConn, error) {
	var c *net.UDPConn
	err := ns.Do(func() error {
		var err error
		c, err = net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(to))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("a UDP socket in %s to %s: %w", ns.Path, to, err)
	}
	return c, nil
}

// counters reads family on c2-gw's proxy by label value: for each value
// of key, the sum over the UDP samples carrying it.
func (g gatewayRun) counters(ctx context.Context, family, key string, values ...string) (map[string]float64, error) {
	out := map[string]float64{}
	for _, v := range values {
		n, err := metric(ctx, g.dst, gatewayTwo, cluster.Proxy, family, map[string]string{"protocol": "udp", key: v})
		if err != nil {
			return nil, err
		}
		out[v] = n
	}
	return out, nil
}

// udpTotal is family's UDP samples on c2-gw's proxy, summed.
func (g gatewayRun) udpTotal(ctx context.Context, family string) (float64, error) {
	return metric(ctx, g.dst, gatewayTwo, cluster.Proxy, family, map[string]string{"protocol": "udp"})
}

// backendPods are the pods behind cluster-2's gateway and beside it.
var backendPods = []string{"dst-a-0", "dst-b-0", "internal-0"}

// recordCounts is how many records each of cluster-2's backend pods holds.
func (g gatewayRun) recordCounts(ctx context.Context) (map[string]int, error) {
	out := map[string]int{}
	for _, name := range backendPods {
		p, err := cluster.PodNamed(g.dst.c, namespace, name)
		if err != nil {
			return nil, err
		}
		recs, err := g.dst.c.Records(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("%s's records: %w", name, err)
		}
		out[name] = len(recs)
	}
	return out, nil
}

// junkKind is one kind of datagram no QUIC server may take as a new
// connection, and the reason the gateway must count it under.
type junkKind struct {
	name, reason string
	make         func() []byte
}

// forgedInitial is a full-size v1 client Initial long header under a
// random 8-byte DCID whose payload is random: it parses as an Initial but
// does not open under its DCID's Initial keys.
func forgedInitial() []byte {
	d := make([]byte, minInitial)
	rand.Read(d)
	d[0] = 0xc0 | d[0]&0x0f                                      // long header, fixed bit, Initial
	copy(d[1:], []byte{0, 0, 0, 1, 8})                           // v1, DCID length 8
	d[14], d[15] = 0, 0                                          // no SCID, no token
	d[16], d[17] = 0x40|(minInitial-18)>>8, (minInitial-18)&0xff // Length: the rest
	return d
}

var junkKinds = []junkKind{
	{"plaintext", dropNotQUIC, func() []byte { return []byte("GET / HTTP/1.1\r\nHost: dst-a\r\n\r\n") }},
	{"scrap", dropNotQUIC, func() []byte { return []byte{0x17, 0x03, 0x03} }},
	{"short-header", dropNotQUIC, func() []byte {
		// A 1-RTT packet's shape: fixed bit set, long-header bit clear,
		// a DCID no flow learned.
		d := make([]byte, 64)
		rand.Read(d)
		d[0] = 0x40 | d[0]&0x3f
		return d
	}},
	{"handshake-long-header", dropNotInitial, func() []byte { d := forgedInitial(); d[0] = 0xe0 | d[0]&0x0f; return d }},
	{"small-initial", dropSmallInitial, func() []byte {
		d := forgedInitial()[:600]
		d[16], d[17] = 0x40|(600-18)>>8, (600-18)&0xff
		return d
	}},
	{"forged-initial", dropUndecryptable, forgedInitial},
}

// junkPerKind is how many datagrams of each kind are sent: enough that a
// count off by one kind's worth could not hide in another's.
const junkPerKind = 50

// unknownSNI names a port of a service in cluster-2's mesh domain that no
// chain of the gateway lists.
var unknownSNI = xdsnames.SNI(8080, "nope", namespace, "two.mesh.test")

// junk is the gateway-drops-junk case's evidence.
type junk struct {
	// Sent is each kind's datagrams, Reason the reason each must count as.
	Sent   map[string]int    `json:"sent"`
	Reason map[string]string `json:"reason"`
	// Dropped is the gateway's UDP drops by reason during the junk,
	// before the unknown SNI's dial.
	Dropped map[string]float64 `json:"dropped"`
	// UnknownSNI is the unknown SNI's dial: the drops it caused by
	// reason, and what the client got (not the witness, the context).
	UnknownSNI        map[string]float64 `json:"unknown_sni_dropped"`
	UnknownSNIDialErr string             `json:"unknown_sni_dial_error"`
	// Flows is the gateway's UDP flows made during the whole case, by
	// cluster (both exposed services), and Active the active flows gauge
	// before and after.
	Flows  map[string]float64 `json:"flows"`
	Active [2]float64         `json:"active_flows"`
	// Records is each backend pod's new records during the case.
	Records map[string]int `json:"new_records"`
}

var junkReasons = []string{dropNotQUIC, dropNotInitial, dropSmallInitial, dropUndecryptable, dropUnknownSNI, "initial_malformed", "version_negotiation", "pending_overflow", "pending_bytes", "flow_overflow"}

func runJunk(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessJunk}
	g, err := r.gatewayRun(ctx)
	if err != nil {
		return obs, err
	}
	ev := &junk{Sent: map[string]int{}, Reason: map[string]string{}, Records: map[string]int{}}
	obs.Evidence = ev
	clusters := []string{xdsnames.GatewayCluster("dst-a", namespace), xdsnames.GatewayCluster("dst-b", namespace)}
	recs0, err := g.recordCounts(ctx)
	if err != nil {
		return obs, err
	}
	flows0, err := g.counters(ctx, mPassthroughFlows, "cluster", clusters...)
	if err != nil {
		return obs, err
	}
	if ev.Active[0], err = metric(ctx, g.dst, gatewayTwo, cluster.Proxy, mPassthroughActive, map[string]string{"protocol": "udp", "state": "active"}); err != nil {
		return obs, err
	}
	drop0, err := g.counters(ctx, mPassthroughDropped, "reason", junkReasons...)
	if err != nil {
		return obs, err
	}
	conn, err := dialUDP(g.from, g.gw)
	if err != nil {
		return obs, err
	}
	defer conn.Close()
	want := map[string]float64{}
	for _, k := range junkKinds {
		ev.Reason[k.name] = k.reason
		for i := range junkPerKind {
			if _, err := conn.Write(k.make()); err != nil {
				return obs, fmt.Errorf("sending %s datagram %d to %s: %w", k.name, i, g.gw, err)
			}
			ev.Sent[k.name]++
		}
		want[k.reason] += junkPerKind
		// Paced by the gateway's own count, so the socket's buffer drops
		// none and the counts can be exact; the bound only ends a run
		// whose gateway counts nothing.
		var got map[string]float64
		wait.Until(ctx, 5*time.Second, 20*time.Millisecond, func() (bool, error) {
			now, err := g.counters(ctx, mPassthroughDropped, "reason", k.reason)
			got = delta(now, drop0)
			return got[k.reason] >= want[k.reason], err
		})
	}
	drop1, err := g.counters(ctx, mPassthroughDropped, "reason", junkReasons...)
	if err != nil {
		return obs, err
	}
	ev.Dropped = nonZero(delta(drop1, drop0))

	// A real client Initial, whole and valid, for a name no chain lists.
	ev.UnknownSNIDialErr = dialUnknownSNI(ctx, g)
	drop2, err := g.counters(ctx, mPassthroughDropped, "reason", junkReasons...)
	if err != nil {
		return obs, err
	}
	ev.UnknownSNI = nonZero(delta(drop2, drop1))

	flows1, err := g.counters(ctx, mPassthroughFlows, "cluster", clusters...)
	if err != nil {
		return obs, err
	}
	ev.Flows = delta(flows1, flows0)
	if ev.Active[1], err = metric(ctx, g.dst, gatewayTwo, cluster.Proxy, mPassthroughActive, map[string]string{"protocol": "udp", "state": "active"}); err != nil {
		return obs, err
	}
	recs1, err := g.recordCounts(ctx)
	if err != nil {
		return obs, err
	}
	for p, n := range recs1 {
		ev.Records[p] = n - recs0[p]
	}
	obs.Summary = fmt.Sprintf("%d datagrams of %d kinds dropped %v; unknown SNI dropped %v (client: %s); UDP flows made %v; new backend records %v",
		junkPerKind*len(junkKinds), len(junkKinds), ev.Dropped, ev.UnknownSNI, ev.UnknownSNIDialErr, ev.Flows, ev.Records)
	return obs, nil
}

// dialUnknownSNI runs a quic-go handshake from c1-a's netns to the
// gateway for unknownSNI, as a mesh client of cluster-1 would, and returns
// what the client got ("connected" if it did).
func dialUnknownSNI(ctx context.Context, g gatewayRun) string {
	pc, err := listenUDP(g.from)
	if err != nil {
		return err.Error()
	}
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	defer pc.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	tc := &tls.Config{ServerName: unknownSNI, NextProtos: []string{http3.NextProtoH3}, InsecureSkipVerify: true}
	c, err := tr.Dial(ctx, net.UDPAddrFromAddrPort(g.gw), tc, &quic.Config{HandshakeIdleTimeout: 2 * time.Second})
	if err == nil {
		c.CloseWithError(0, "")
		return "connected"
	}
	return err.Error()
}

func nonZero(m map[string]float64) map[string]float64 {
	maps.DeleteFunc(m, func(_ string, v float64) bool { return v == 0 })
	return m
}

// checkJunk: each reason counted exactly the datagrams of its kinds and no
// other reason moved; the unknown SNI's Initials counted as unknown_sni
// alone; no UDP flow made and no backend record written.
func checkJunk(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[*junk](o)
	if err != nil {
		return err
	}
	want := map[string]float64{}
	for k, n := range ev.Sent {
		want[ev.Reason[k]] += float64(n)
	}
	if len(want) == 0 {
		return errors.New("no junk sent")
	}
	for _, reason := range slices.Sorted(maps.Keys(want)) {
		if ev.Dropped[reason] != want[reason] {
			return fmt.Errorf("the gateway counted %v datagrams as %s, want %v (drops %v)", ev.Dropped[reason], reason, want[reason], ev.Dropped)
		}
	}
	for reason, n := range ev.Dropped {
		if _, ok := want[reason]; !ok {
			return fmt.Errorf("the gateway counted %v datagrams as %s, a reason none of the junk has", n, reason)
		}
	}
	if ev.UnknownSNI[dropUnknownSNI] < 1 {
		return fmt.Errorf("the unknown SNI's Initials were not counted as %s (drops %v)", dropUnknownSNI, ev.UnknownSNI)
	}
	if len(ev.UnknownSNI) != 1 {
		return fmt.Errorf("the unknown SNI's handshake moved other drop reasons: %v", ev.UnknownSNI)
	}
	if ev.UnknownSNIDialErr == "connected" {
		return errors.New("a handshake for an SNI no chain names completed")
	}
	for cl, n := range ev.Flows {
		if n != 0 {
			return fmt.Errorf("the gateway made %v UDP flow(s) to %s", n, cl)
		}
	}
	if ev.Active[1] > ev.Active[0] {
		return fmt.Errorf("the gateway's active UDP flows rose from %v to %v", ev.Active[0], ev.Active[1])
	}
	for p, n := range ev.Records {
		if n != 0 {
			return fmt.Errorf("%s recorded %d new event(s) while only junk was sent", p, n)
		}
	}
	if len(ev.Records) != len(backendPods) {
		return fmt.Errorf("records read for %v, want every one of %v", ev.Records, backendPods)
	}
	return nil
}

// rebindConn is a client socket in a netns that can be swapped for a new
// one under quic-go, which keeps sending unaware: a NAT rebinding as the
// far side sees it (the client's address changes, its connection IDs
// do not).
type rebindConn struct {
	ns  *netns.NS
	mu  sync.Mutex
	cur *net.UDPConn
}

func newRebindConn(ns *netns.NS) (*rebindConn, error) {
	c, err := listenUDP(ns)
	if err != nil {
		return nil, err
	}
	return &rebindConn{ns: ns, cur: c}, nil
}

func (r *rebindConn) conn() *net.UDPConn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cur
}

// rebind moves the client to a new local port and returns both.
func (r *rebindConn) rebind() (old, now string, err error) {
	c, err := listenUDP(r.ns)
	if err != nil {
		return "", "", err
	}
	r.mu.Lock()
	prev := r.cur
	r.cur = c
	r.mu.Unlock()
	prev.Close()
	return prev.LocalAddr().String(), c.LocalAddr().String(), nil
}

func (r *rebindConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		c := r.conn()
		n, a, err := c.ReadFrom(b)
		if err != nil && c != r.conn() {
			continue // swapped under the read
		}
		return n, a, err
	}
}
func (r *rebindConn) WriteTo(b []byte, a net.Addr) (int, error) { return r.conn().WriteTo(b, a) }
func (r *rebindConn) Close() error                              { return r.conn().Close() }
func (r *rebindConn) LocalAddr() net.Addr                       { return r.conn().LocalAddr() }
func (r *rebindConn) SetDeadline(t time.Time) error             { return r.conn().SetDeadline(t) }
func (r *rebindConn) SetReadDeadline(t time.Time) error         { return r.conn().SetReadDeadline(t) }
func (r *rebindConn) SetWriteDeadline(t time.Time) error        { return r.conn().SetWriteDeadline(t) }

// hop is one request of the migration case: its phase, the client's
// local address when it was sent, and what the client got.
type hop struct {
	Phase  string `json:"phase"`
	Local  string `json:"local"`
	Status string `json:"status"`
}

// migration is the migration-through-the-gateway case's evidence.
type migration struct {
	Hops []hop `json:"hops"`
	// App is dst-a-0's record of the case's requests; Peer the ID each
	// must carry.
	App  arrival `json:"app"`
	Peer string  `json:"peer"`
	// Handshakes is dst-a's proxy's QUIC handshakes accepted from Peer
	// during the case; Flows the gateway's UDP flows to dst-a; Migrated
	// and CIDs its migrated and cid_learned events.
	Handshakes float64 `json:"handshakes"`
	Flows      float64 `json:"flows"`
	Migrated   float64 `json:"migrated"`
	CIDs       float64 `json:"cids_learned"`
	// Move is how the client moved; Probe, for a path migration, what
	// its probe got ("validated" or the error), and NotQUIC the
	// gateway's not_quic drops meanwhile.
	Move    move    `json:"move"`
	Probe   string  `json:"probe,omitempty"`
	NotQUIC float64 `json:"not_quic"`
}

// move is how the migration cases' client changes its address.
type move string

const (
	// natRebind swaps the socket under quic-go: the address changes,
	// the connection IDs do not (what a NAT rebinding does).
	natRebind move = "nat-rebind"
	// freshCID is quic-go's own path migration: a probe from a new
	// socket under a connection ID not used before (RFC 9000 §9.5).
	freshCID move = "path-migration"
)

// svidCerts is the SVID of account sa issued by the CA under dir.
func svidCerts(m member, sa string) ([]tls.Certificate, error) {
	ca, err := clusterCA(m)
	if err != nil {
		return nil, err
	}
	s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: sa}, TTL: time.Hour})
	if err != nil {
		return nil, fmt.Errorf("%s's SVID for %s: %w", m.Name, sa, err)
	}
	c := tls.Certificate{PrivateKey: s.PrivateKey, Leaf: s.Certificates[0]}
	for _, x := range s.Certificates {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return []tls.Certificate{c}, nil
}

// clusterCA is m's own CA, the one the rig made under its CADir.
func clusterCA(m member) (*identity.CA, error) {
	if m.CADir == "" {
		return nil, fmt.Errorf("%s has no CA dir", m.Name)
	}
	if _, err := os.Stat(m.CADir); err != nil {
		return nil, fmt.Errorf("%s's CA: %w", m.Name, err)
	}
	ca, err := identity.LoadOrCreateCA(m.CADir, identity.CAConfig{TrustDomain: m.TrustDomain, MeshDomain: m.MeshDomain})
	if err != nil {
		return nil, fmt.Errorf("%s's CA in %s: %w", m.Name, m.CADir, err)
	}
	return ca, nil
}

// meshClientTLS is a QUIC mesh client's TLS for svc of dst: the source's
// SVID, the SNI of svc's HTTP port in dst's spelling, ALPN h3, and the
// server verified against dst's bundle as svc's own ID.
func meshClientTLS(certs []tls.Certificate, dst member, svc string, port uint16, bundle *x509bundle.Bundle) *tls.Config {
	want := dst.id(svc)
	return &tls.Config{
		ServerName: xdsnames.SNI(port, svc, namespace, dst.MeshDomain), NextProtos: []string{http3.NextProtoH3},
		Certificates: certs,
		// Verified below as SPIFFE: Go's default verifier knows no
		// URI SAN.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, _, err := x509svid.Verify(cs.PeerCertificates, bundle)
			if err != nil {
				return err
			}
			if id.String() != want {
				return fmt.Errorf("the server is %s, want %s", id, want)
			}
			return nil
		},
	}
}

func runMigration(ctx context.Context, r *rig, how move) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessMigration}
	g, err := r.gatewayRun(ctx)
	if err != nil {
		return obs, err
	}
	certs, err := svidCerts(g.src, "web")
	if err != nil {
		return obs, err
	}
	dstCA, err := clusterCA(g.dst)
	if err != nil {
		return obs, err
	}
	ev := &migration{Peer: g.src.id("web"), Move: how}
	obs.Evidence = ev
	toA := xdsnames.GatewayCluster("dst-a", namespace)
	hs0, err := metric(ctx, g.dst, nodeTwo, cluster.Proxy, mHandshakes, map[string]string{"peer": ev.Peer})
	if err != nil {
		return obs, err
	}
	fl0, err := g.counters(ctx, mPassthroughFlows, "cluster", toA)
	if err != nil {
		return obs, err
	}
	evs0, err := g.counters(ctx, mPassthroughEvents, "event", eventMigrated, eventCIDLearned)
	if err != nil {
		return obs, err
	}
	nq0, err := g.counters(ctx, mPassthroughDropped, "reason", dropNotQUIC)
	if err != nil {
		return obs, err
	}

	rc, err := newRebindConn(g.from)
	if err != nil {
		return obs, err
	}
	tr := &quic.Transport{Conn: rc}
	defer tr.Close()
	defer rc.Close()
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	qc, err := tr.Dial(dctx, net.UDPAddrFromAddrPort(g.gw), meshClientTLS(certs, g.dst, "dst-a", 8080, dstCA.Bundle()), &quic.Config{MaxIdleTimeout: 30 * time.Second})
	cancel()
	if err != nil {
		return obs, fmt.Errorf("QUIC to dst-a through %s: %w", g.gw, err)
	}
	defer qc.CloseWithError(0, "")
	h3 := (&http3.Transport{}).NewClientConn(qc)
	tag := "migration-" + string(how)
	get := func(phase string, i int) {
		h := hop{Phase: phase, Local: rc.LocalAddr().String()}
		defer func() { ev.Hops = append(ev.Hops, h) }()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, "https://"+xdsnames.Authority("dst-a", namespace, g.dst.MeshDomain)+"/"+tag+"/"+strconv.Itoa(i), nil)
		if err != nil {
			h.Status = err.Error()
			return
		}
		resp, err := h3.RoundTrip(req)
		if err != nil {
			h.Status = "error: " + err.Error()
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h.Status = strconv.Itoa(resp.StatusCode)
	}
	get("before", 0)
	// quic-go moves to a connection ID from the server's NEW_CONNECTION_ID
	// right after the handshake; the gateway learns it from the first
	// short header that carries it from the known address. A rebinding
	// before that packet cannot be followed by any forwarder (ARCHITECTURE.md,
	// "The east-west gateway's passthrough"), so a second request first,
	// and the rebinding once the gateway counted the new ID.
	get("before", 1)
	wait.Until(ctx, 5*time.Second, 50*time.Millisecond, func() (bool, error) {
		now, err := g.counters(ctx, mPassthroughEvents, "event", eventCIDLearned)
		return now[eventCIDLearned]-evs0[eventCIDLearned] >= 3, err
	})
	switch how {
	case natRebind:
		if _, _, err := rc.rebind(); err != nil {
			return obs, err
		}
	case freshCID:
		if ev.Probe, err = probePath(ctx, qc, g.from); err != nil {
			return obs, err
		}
	}
	get("after", 2)
	get("after", 3)

	if ev.App, err = arrivals(ctx, g.dst, "dst-a-0", tag); err != nil {
		return obs, err
	}
	hs1, err := metric(ctx, g.dst, nodeTwo, cluster.Proxy, mHandshakes, map[string]string{"peer": ev.Peer})
	if err != nil {
		return obs, err
	}
	ev.Handshakes = hs1 - hs0
	fl1, err := g.counters(ctx, mPassthroughFlows, "cluster", toA)
	if err != nil {
		return obs, err
	}
	ev.Flows = fl1[toA] - fl0[toA]
	evs1, err := g.counters(ctx, mPassthroughEvents, "event", eventMigrated, eventCIDLearned)
	if err != nil {
		return obs, err
	}
	ev.Migrated, ev.CIDs = evs1[eventMigrated]-evs0[eventMigrated], evs1[eventCIDLearned]-evs0[eventCIDLearned]
	nq1, err := g.counters(ctx, mPassthroughDropped, "reason", dropNotQUIC)
	if err != nil {
		return obs, err
	}
	ev.NotQUIC = nq1[dropNotQUIC] - nq0[dropNotQUIC]
	var hops []string
	for _, h := range ev.Hops {
		hops = append(hops, h.Phase+"@"+h.Local+"="+h.Status)
	}
	obs.Summary = fmt.Sprintf("%s: requests %s; dst-a-0 saw %d %v; handshakes from web %v, gateway flows %v, migrated %v, CIDs learned %v, not_quic drops %v",
		how, strings.Join(hops, " "), ev.App.Saw, ev.App.Peers, ev.Handshakes, ev.Flows, ev.Migrated, ev.CIDs, ev.NotQUIC)
	if ev.Probe != "" {
		obs.Summary += "; probe: " + ev.Probe
	}
	return obs, nil
}

// checkMigration: the client's address changed between the phases, dst-a-0's
// app saw every request with the source's ID, one handshake and one flow
// served them all (the connection survived the rebinding), and the gateway
// counted the migration.
func checkMigration(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[*migration](o)
	if err != nil {
		return err
	}
	if ev.Move != natRebind {
		return fmt.Errorf("the client moved by %s, want %s", ev.Move, natRebind)
	}
	local := map[string]map[string]bool{}
	for _, h := range ev.Hops {
		if local[h.Phase] == nil {
			local[h.Phase] = map[string]bool{}
		}
		local[h.Phase][h.Local] = true
	}
	if len(local["before"]) != 1 || len(local["after"]) != 1 {
		return fmt.Errorf("the requests' local addresses %v: want one before the rebinding and one after", local)
	}
	for a := range local["after"] {
		if local["before"][a] {
			return fmt.Errorf("the client kept its address %s: no rebinding happened", a)
		}
	}
	n := len(ev.Hops)
	if ev.App.Saw != n || ev.App.Peers[ev.Peer] != n {
		return fmt.Errorf("dst-a-0's app saw %d of %d requests, peers %v; want each from %s", ev.App.Saw, n, ev.App.Peers, ev.Peer)
	}
	if ev.Handshakes != 1 {
		return fmt.Errorf("dst-a's proxy accepted %v handshakes from %s, want the one connection", ev.Handshakes, ev.Peer)
	}
	if ev.Flows != 1 {
		return fmt.Errorf("the gateway made %v UDP flows to dst-a, want the one", ev.Flows)
	}
	if ev.Migrated < 1 {
		return errors.New("the gateway counted no migration: the client was not followed to its new address")
	}
	return nil
}

// probePath is quic-go's path migration of qc to a new socket in ns: a
// probe under a fresh connection ID, then the switch if the path
// validates. It returns what the probe got.
func probePath(ctx context.Context, qc *quic.Conn, ns *netns.NS) (string, error) {
	pc, err := listenUDP(ns)
	if err != nil {
		return "", err
	}
	// Closed with the case: a validated path keeps using it.
	tr := &quic.Transport{Conn: pc}
	go func() { <-qc.Context().Done(); tr.Close(); pc.Close() }()
	path, err := qc.AddPath(tr)
	if err != nil {
		return "", fmt.Errorf("a path from %s: %w", pc.LocalAddr(), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := path.Probe(pctx); err != nil {
		_ = path.Close()
		return "failed: " + err.Error(), nil
	}
	if err := path.Switch(); err != nil {
		return "validated, switch failed: " + err.Error(), nil
	}
	return "validated", nil
}

// checkFreshCID is the control's signature: the probe failed, the gateway
// dropped its packets as not_quic and counted no migration, and the
// connection served on its old path (one handshake, one flow, every
// request at dst-a-0's app as web).
func checkFreshCID(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[*migration](o)
	if err != nil {
		return err
	}
	if ev.Move != freshCID {
		return fmt.Errorf("the client moved by %s, want %s", ev.Move, freshCID)
	}
	if !strings.HasPrefix(ev.Probe, "failed") {
		return fmt.Errorf("the path probe through the gateway got %q: the gateway followed a fresh connection ID", ev.Probe)
	}
	if ev.Migrated != 0 {
		return fmt.Errorf("the gateway counted %v migrations for a client it could not follow", ev.Migrated)
	}
	if ev.NotQUIC < 1 {
		return errors.New("the gateway dropped none of the probes as not_quic: they never reached it")
	}
	n := len(ev.Hops)
	if ev.App.Saw != n || ev.App.Peers[ev.Peer] != n || ev.Handshakes != 1 || ev.Flows != 1 {
		return fmt.Errorf("on its old path the connection served %d of %d requests (peers %v) on %v handshakes and %v flows: the failure is not the gateway's alone", ev.App.Saw, n, ev.App.Peers, ev.Handshakes, ev.Flows)
	}
	return nil
}

// The spray and its bounds.
const (
	sprayTotal   = 100_000
	spraySenders = 4
	// sprayBatch datagrams per sender, then sprayPause: about 20,000
	// datagrams a second in all, five seconds of spray, which a gateway
	// sharing two cores with the rest of both clusters drains as they
	// come (a faster spray would only fill its socket's buffer, and the
	// kernel's drops are no test of the gateway).
	sprayBatch = 50
	sprayPause = 10 * time.Millisecond
	// sprayRSSGrowth bounds the gateway proxy's RSS growth, peak over
	// before: a forged Initial is refused before any state is made, so
	// what grows is the garbage of opening each one (a few KiB, reclaimed
	// by the GC, whose target is twice the live heap) and, were the forged
	// Initials to open, at most DefaultMaxPendingFlows (256) pending flows
	// of DefaultMaxPendingBytes (32 KiB): 8 MiB. 32 MiB leaves the GC its
	// slack; a flow per datagram would be 100,000 flows and far beyond.
	sprayRSSGrowth = 32 << 20
	// sprayFDGrowth bounds the proxy's open files, peak over before: a
	// forged Initial opens no socket; a routed flow opens one (the valid
	// flow's twin is already routed), and each scrape of its metrics is a
	// connection of its own.
	sprayFDGrowth = 8
	// sprayAnswered is the share of the valid flow's requests that must
	// reach the app.
	sprayAnswered = 0.999
)

// spray is the initial-spray-bounded case's evidence.
type spray struct {
	Sent int `json:"sent"`
	// Dropped is the gateway's UDP drops by reason during the spray;
	// RcvbufErrors the datagrams the kernel dropped in c2-gw's netns for
	// a full socket buffer (none of them reached the gateway).
	Dropped      map[string]float64 `json:"dropped"`
	RcvbufErrors float64            `json:"rcvbuf_errors"`
	// Requests is what web-0's client got of the flow during the spray;
	// App what dst-a-0's app recorded of them.
	Requests map[string]int `json:"requests"`
	App      arrival        `json:"app"`
	Peer     string         `json:"peer"`
	// RSS and FDs are c2-gw's proxy's before, at the peak while the spray
	// ran, and after.
	RSS      [3]int64 `json:"rss_bytes"`
	FDs      [3]int   `json:"fds"`
	Duration string   `json:"duration"`
}

// procUsage is pid's resident set (bytes) and open files.
func procUsage(pid int) (rss int64, fds int, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("the gateway proxy's status: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, 0, fmt.Errorf("pid %d: VmRSS line %q", pid, line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("pid %d: VmRSS %q: %w", pid, f[0], err)
			}
			rss = kb << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("pid %d: no VmRSS in its status", pid)
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("the gateway proxy's fds: %w", err)
	}
	return rss, len(ents), nil
}

// rcvbufErrors is the UDP RcvbufErrors counter of pid's netns
// (/proc/<pid>/net/snmp is its own netns's).
func rcvbufErrors(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/snmp", pid))
	if err != nil {
		return 0, fmt.Errorf("UDP counters of pid %d's netns: %w", pid, err)
	}
	var names []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "Udp:" {
			continue
		}
		if names == nil {
			names = f[1:]
			continue
		}
		for i, n := range names {
			if n == "RcvbufErrors" && i+1 < len(f) {
				return strconv.ParseFloat(f[i+1], 64)
			}
		}
	}
	return 0, fmt.Errorf("pid %d's netns: no Udp RcvbufErrors in its snmp counters", pid)
}

func runSpray(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessSpray}
	g, err := r.gatewayRun(ctx)
	if err != nil {
		return obs, err
	}
	ev := &spray{Peer: g.src.id("web"), Requests: map[string]int{}}
	obs.Evidence = ev
	pid := g.gwNode.ProxyPID()
	if ev.RSS[0], ev.FDs[0], err = procUsage(pid); err != nil {
		return obs, err
	}
	ev.RSS[1], ev.FDs[1] = ev.RSS[0], ev.FDs[0]
	rb0, err := rcvbufErrors(pid)
	if err != nil {
		return obs, err
	}
	drop0, err := g.counters(ctx, mPassthroughDropped, "reason", junkReasons...)
	if err != nil {
		return obs, err
	}

	// The valid flow: web-0's requests to dst-a, one after another on
	// one client, until the spray is done.
	p, err := cluster.PodNamed(g.src.c, namespace, webPod)
	if err != nil {
		return obs, err
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const tag = "spray"
	wg.Add(1)
	go func() {
		defer wg.Done()
		hc := client(g.src.c, p)
		defer hc.CloseIdleConnections()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			out := "error"
			req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/%s/%d", g.src.authority("dst-a"), tag, i), nil)
			if err == nil {
				if resp, err := hc.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					out = strconv.Itoa(resp.StatusCode)
				}
			}
			ev.Requests[out]++
		}
	}()
	// The sampler: the proxy's peak while the spray runs.
	var sampleErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			rss, fds, err := procUsage(pid)
			if err != nil {
				sampleErr = err
				return
			}
			ev.RSS[1], ev.FDs[1] = max(ev.RSS[1], rss), max(ev.FDs[1], fds)
		}
	}()

	start := time.Now()
	var sent [spraySenders]int
	errs := make(chan error, spraySenders)
	var sg sync.WaitGroup
	for s := range spraySenders {
		sg.Add(1)
		go func() {
			defer sg.Done()
			conn, err := dialUDP(g.from, g.gw)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close()
			for sent[s] < sprayTotal/spraySenders {
				if _, err := conn.Write(forgedInitial()); err != nil {
					errs <- fmt.Errorf("spray sender %d, datagram %d: %w", s, sent[s], err)
					return
				}
				if sent[s]++; sent[s]%sprayBatch == 0 {
					time.Sleep(sprayPause)
				}
			}
		}()
	}
	sg.Wait()
	close(errs)
	for _, n := range sent {
		ev.Sent += n
	}
	var sprayErr error
	for err := range errs {
		sprayErr = errors.Join(sprayErr, err)
	}
	// The gateway drains its socket; the flow runs on meanwhile.
	var drop1 map[string]float64
	wait.Until(ctx, 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		var err error
		drop1, err = g.counters(ctx, mPassthroughDropped, "reason", junkReasons...)
		if err != nil {
			return false, err
		}
		var n float64
		for _, v := range delta(drop1, drop0) {
			n += v
		}
		return n >= float64(ev.Sent), nil
	})
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	ev.Duration = time.Since(start).Round(time.Millisecond).String()
	if sprayErr != nil {
		return obs, sprayErr
	}
	if sampleErr != nil {
		return obs, sampleErr
	}
	if drop1, err = g.counters(ctx, mPassthroughDropped, "reason", junkReasons...); err != nil {
		return obs, err
	}
	ev.Dropped = nonZero(delta(drop1, drop0))
	rb1, err := rcvbufErrors(pid)
	if err != nil {
		return obs, err
	}
	ev.RcvbufErrors = rb1 - rb0
	if ev.RSS[2], ev.FDs[2], err = procUsage(pid); err != nil {
		return obs, err
	}
	if ev.App, err = arrivals(ctx, g.dst, "dst-a-0", tag); err != nil {
		return obs, err
	}
	obs.Summary = fmt.Sprintf("%d forged Initials in %s: dropped %v, kernel rcvbuf drops %v; flow %v, dst-a-0 saw %d %v; gateway RSS %d→%d→%d MiB, fds %v",
		ev.Sent, ev.Duration, ev.Dropped, ev.RcvbufErrors, ev.Requests, ev.App.Saw, ev.App.Peers,
		ev.RSS[0]>>20, ev.RSS[1]>>20, ev.RSS[2]>>20, ev.FDs)
	return obs, nil
}

// checkSpray: the whole spray sent; every forged Initial the gateway's
// socket took counted as initial_undecryptable and nothing else dropped;
// ≥ 99.9% of the flow's requests at dst-a-0's app as web, each answered;
// RSS and fds within their bounds.
func checkSpray(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[*spray](o)
	if err != nil {
		return err
	}
	if ev.Sent != sprayTotal {
		return fmt.Errorf("%d of %d forged Initials sent", ev.Sent, sprayTotal)
	}
	var dropped float64
	for reason, n := range ev.Dropped {
		if reason != dropUndecryptable {
			return fmt.Errorf("the gateway counted %v datagrams as %s during a spray of forged Initials alone (%v)", n, reason, ev.Dropped)
		}
		dropped += n
	}
	if dropped > float64(ev.Sent) {
		return fmt.Errorf("the gateway counted %v drops for %d datagrams sent", dropped, ev.Sent)
	}
	// What the kernel dropped never reached the gateway; every other
	// forged Initial did, and must be counted.
	if dropped < float64(ev.Sent)-ev.RcvbufErrors {
		return fmt.Errorf("the gateway counted %v of %d forged Initials (%v lost to full socket buffers): %v unaccounted for", dropped, ev.Sent, ev.RcvbufErrors, float64(ev.Sent)-ev.RcvbufErrors-dropped)
	}
	total := 0
	for _, n := range ev.Requests {
		total += n
	}
	if total == 0 {
		return errors.New("the valid flow sent no request")
	}
	need := sprayAnswered * float64(total)
	if float64(ev.Requests["200"]) < need || float64(ev.App.Peers[ev.Peer]) < need {
		return fmt.Errorf("of %d requests %d were answered 200 and dst-a-0's app saw %d from %s (%v): want ≥ %.1f%%", total, ev.Requests["200"], ev.App.Peers[ev.Peer], ev.Peer, ev.App.Peers, 100*sprayAnswered)
	}
	if ev.App.Saw > total {
		return fmt.Errorf("dst-a-0's app saw %d requests of the %d sent", ev.App.Saw, total)
	}
	if g := ev.RSS[1] - ev.RSS[0]; g > sprayRSSGrowth {
		return fmt.Errorf("the gateway's RSS grew by %d MiB (%d → peak %d MiB), bound %d MiB", g>>20, ev.RSS[0]>>20, ev.RSS[1]>>20, sprayRSSGrowth>>20)
	}
	if g := ev.FDs[1] - ev.FDs[0]; g > sprayFDGrowth {
		return fmt.Errorf("the gateway's fds grew by %d (%d → peak %d), bound %d", g, ev.FDs[0], ev.FDs[1], sprayFDGrowth)
	}
	return nil
}
