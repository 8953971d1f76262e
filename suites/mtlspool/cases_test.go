package mtlspool

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
)

const (
	// perSourceN requests from each source pod in the identity cases.
	perSourceN = 20
	// downstreams is the connection-count case's downstream connections
	// (the proposal's TestQUICTwinUpstreamConnections).
	downstreams = 12
	destView    = "api-0's app (the XFCC of each request) and node-b's QUIC inbound counters (handshakes by peer SPIFFE ID)"
)

// cases are each property's control, then its subject. The controls run
// first (redgreen.Run), in this order: those of the controls cluster,
// the no-DNS-SANs one, then those on the mesh as shipped, whose cluster
// the subjects keep.
func cases(r *rig) []redgreen.Case {
	return []redgreen.Case{
		{
			Name: "shared-cert-arrives-as-web", Role: redgreen.Control,
			Description: "twins that present one shared certificate (aether-agent --test-only-twin-shared-cert=web's ID): web-0 and batch-0 on node-a call api on node-b over HTTP/3",
			Expect:      fmt.Sprintf("batch-0's %d requests arrive at api-0 as web: the app sees web %d times, batch never; api-0's inbound accepted no connection from batch", perSourceN, 2*perSourceN),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return perSource(ctx, r, controls, "shared") },
			Check:       checkSharedCert,
		},
		{
			Name: "per-downstream-opens-12", Role: redgreen.Control,
			Description: fmt.Sprintf("twins with connection_pool_per_downstream_connection (--test-only-twin-pool-per-downstream): %d downstream connections from web-0 to cart", downstreams),
			Expect:      fmt.Sprintf("cart-0's inbound accepts %d QUIC connections from web", downstreams),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return connCount(ctx, r, controls) },
			Check:       func(o redgreen.Observation) error { return checkConnCount(o, downstreams) },
		},
		{
			Name: "resumption-serves-ticket-0rtt", Role: redgreen.Control,
			Description: "api-0's QUIC chains with enable_resumption and enable_early_data true (--test-only-quic-resumption): the suite's quic-go client connects with a valid SVID, keeps its session ticket, reconnects with a 0-RTT request; then its root is revoked from the bundle (--test-only-extra-roots emptied) and it tries to resume again",
			Expect:      "the client resumes and its 0-RTT request reaches api-0's app under the identity the ticket carries, served before the handshake completed (the drift's signature: no certificate was presented); after the revocation the inbound's re-verification of the ticket's certificate refuses it",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return r4(ctx, r, controls) },
			Check:       checkDrift,
		},
		{
			Name: "r4-gate-refuses-published-chain", Role: redgreen.Control,
			Description: "the snapshot node-b's agent published under --test-only-quic-resumption (its last-good.json), checked by the config gates",
			Expect:      "validate.Check fails quic_r4_pinned on every QUIC chain of node-b; the agent's log says a TEST ONLY control published past that gate",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return r4Gate(ctx, r, controls) },
			Check:       checkGateRed,
		},
		{
			Name: "own-egress-lands-in-own-inbound", Role: redgreen.Control,
			Description: "an app in api-0 dials cart-0's pod IP on UDP 18008 directly, with a valid SVID, as QUIC (the capture diverts the pod's UDP egress to 18008): QUIC inbounds bound to 0.0.0.0 with IP_TRANSPARENT (--test-only-quic-inbound-wildcard)",
			Expect:      "the datagrams land in api-0's own QUIC inbound (it begins the connection), which answers as api; cart-0's inbound sees nothing",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return ownEgress(ctx, r, controls) },
			Check:       checkOwnInbound,
		},
		{
			Name: "no-dns-sans-name-error", Role: redgreen.Control,
			Description: "SVIDs without their DNS SANs (--test-only-svid-omit-dns-sans): the suite's quic-go client (go-spiffe identity check, then the hostname check) and web-0's mesh requests call api",
			Expect:      "the client verifies api's SPIFFE ID, then fails the hostname check on 8080.api.demo.mesh.test; every mesh request answers 503 and api-0's app sees none",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return names(ctx, r, noSANs) },
			Check:       checkNameError,
		},
		{
			Name: "unrotated-svid-refused", Role: redgreen.Control,
			Description: "a client whose SVID (3 s) is never rotated calls api-0's inbound before and after it expires",
			Expect:      "served before expiry; after it, its new connection is refused and counted expired at api-0, and the app sees nothing more",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return unrotated(ctx, r) },
			Check:       checkUnrotated,
		},
		{
			Name: "valid-peer-served", Role: redgreen.Control,
			Description: "the bad-peer probes with their defect removed: the suite's client with a current SVID of the mesh's trust domain, ALPN h3, to api-0's inbound",
			Expect:      "served: api-0's inbound counts its handshake under its SPIFFE ID and the app records it in the XFCC, so the refusals below are the defects'",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return validPeer(ctx, r) },
			Check:       checkValidPeer,
		},

		{
			Name: "per-source-identity", Role: redgreen.Subject,
			Description: "the mesh as shipped: web-0 and batch-0 call api over HTTP/3",
			Expect:      fmt.Sprintf("each source's %d requests arrive as itself, and no one else's do; api-0's inbound accepted connections from web and from batch apart", perSourceN),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return perSource(ctx, r, shipped, "own") },
			Check:       checkOwnIdentity,
		},
		{
			Name: "one-pool-one-connection", Role: redgreen.Subject,
			Description: fmt.Sprintf("the mesh as shipped: %d downstream connections from web-0 to cart", downstreams),
			Expect:      "cart-0's inbound accepts 1 QUIC connection from web, which carries every request",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return connCount(ctx, r, shipped) },
			Check:       func(o redgreen.Observation) error { return checkConnCount(o, 1) },
		},
		{
			Name: "dns-sans-name-ok", Role: redgreen.Subject,
			Description: "SVIDs with their DNS SANs: the same client and requests",
			Expect:      "the identity and the hostname checks pass and the client is served; every mesh request answers 200",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return names(ctx, r, shipped) },
			Check:       checkNameOK,
		},
		{
			Name: "r4-no-resumption", Role: redgreen.Subject,
			Description: "both R4 fields false (the mesh as shipped): the same client, its reconnect, the revocation and its retry",
			Expect:      "no ticket is issued, so nothing resumes and no 0-RTT is taken (the reconnect is a full handshake, served); the revoked client is refused (counted peer_rejected) and api-0's app sees nothing of it",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return r4(ctx, r, shipped) },
			Check:       checkNoDrift,
		},
		{
			Name: "r4-gate-holds", Role: redgreen.Subject,
			Description: "the snapshot node-b's agent published as shipped, checked by the config gates",
			Expect:      "every QUIC chain states enable_resumption and enable_early_data false; the gates pass; no gate was passed by a control",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return r4Gate(ctx, r, shipped) },
			Check:       checkGateGreen,
		},
		{
			Name: "own-egress-dropped-at-socket", Role: redgreen.Subject,
			Description: "the same dial from api-0 with the mesh as shipped, whose QUIC inbound binds the pod's own address",
			Expect:      "no socket takes the datagrams: api-0's kernel counts them UdpNoPorts, neither inbound begins a connection, no app sees a request",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return ownEgress(ctx, r, shipped) },
			Check:       checkDroppedAtSocket,
		},
		{
			Name: "rotation-mid-traffic", Role: redgreen.Subject,
			Description: fmt.Sprintf("web-0 and batch-0 call api without pause while the agents rotate every SVID (--svid-ttl %s, re-issued at half)", svidTTL),
			Expect:      "no request fails, the app sees every one under its source's ID, no handshake is refused at api-0, and a new connection to api-0 meets a new certificate (new serial, later NotBefore)",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return rotation(ctx, r) },
			Check:       checkRotation,
		},
		{
			Name: "bad-peers-refused-and-counted", Role: redgreen.Subject,
			Description: "at api-0's inbound: a client without a certificate, one from another trust domain, one with an expired SVID, one offering ALPN h2; then junk datagrams and forged Initials while valid clients keep calling",
			Expect:      "each refused and counted under its reason (no_client_certificate, foreign_trust_domain, expired, bad_alpn); the flood counted as dropped or as connections that never handshake; valid clients' success ≥ 99.9 %",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return badPeers(ctx, r) },
			Check:       checkBadPeers,
		},
	}
}

// pod finds a scenario pod of c.
func pod(c cluster.Cluster, name string) (cluster.Pod, error) {
	return cluster.PodNamed(c, namespace, name)
}

// inboundAddr is pod's QUIC inbound: its own address, UDP 18008.
func inboundAddr(c cluster.Cluster, name string) (netip.AddrPort, error) {
	p, err := pod(c, name)
	if err != nil {
		return netip.AddrPort{}, err
	}
	return netip.AddrPortFrom(p.IP, constants.InboundPort), nil
}

// newProbe is the suite's client in pod from calling svc's pod on node-b.
func (r *rig) newProbe(c cluster.Cluster, from, svc string, marked bool) (*probe, error) {
	f, err := pod(c, from)
	if err != nil {
		return nil, err
	}
	dst, err := inboundAddr(c, svc+"-0")
	if err != nil {
		return nil, err
	}
	return &probe{c: c, from: f, dst: dst, svc: svc, bundle: r.ca.Bundle(), marked: marked}, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

var errNothing = errors.New("nothing observed")

// allOK says whether every answer in codes was 200 and there were n.
func allOK(codes map[int]int, n int) bool { return codes[http.StatusOK] == n && len(codes) == 1 }

// sleepUntil waits until t or ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-time.After(time.Until(t)):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
