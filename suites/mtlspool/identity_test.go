package mtlspool

import (
	"context"
	"fmt"
	"sync"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// perSource sends perSourceN requests from web-0 and batch-0 to api and
// reads what api-0's app and node-b's QUIC inbound saw.
func perSource(ctx context.Context, r *rig, v variant, tag string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: destView}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	tag = "identity-" + tag
	codes, err := sendFrom(ctx, c, "api", tag, perSourceN, "web-0", "batch-0")
	if err != nil {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, "api-0", "api", tag)
	if err != nil {
		return obs, err
	}
	in, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	obs.Evidence = arrivals{Codes: codes, AppXFCC: xfcc, InboundHandshakesByPeer: in.Accepted}
	obs.Summary = fmt.Sprintf("answers %v; api-0's app saw %s; api-0's inbound accepted connections (since the cluster started) %s", codes, toJSON(xfcc), toJSON(in.Accepted))
	return obs, c.Check(ctx)
}

// arrivals is an identity case's evidence: the answers by status, the
// requests api-0's app saw by peer URI, and the handshakes api-0's inbound
// accepted by peer since the cluster started.
type arrivals struct {
	Codes                   map[int]int    `json:"codes"`
	AppXFCC                 map[string]int `json:"app_xfcc"`
	InboundHandshakesByPeer counters       `json:"inbound_handshakes_by_peer"`
}

func identityEvidence(o redgreen.Observation) (map[int]int, map[string]int, counters, error) {
	ev, err := redgreen.EvidenceOf[arrivals](o)
	if err != nil {
		return nil, nil, nil, err
	}
	codes, xfcc, hs := ev.Codes, ev.AppXFCC, ev.InboundHandshakesByPeer
	if !allOK(codes, 2*perSourceN) {
		return nil, nil, nil, fmt.Errorf("the requests answered %v, want %d × 200", codes, 2*perSourceN)
	}
	return codes, xfcc, hs, nil
}

func checkSharedCert(o redgreen.Observation) error {
	_, xfcc, hs, err := identityEvidence(o)
	if err != nil {
		return err
	}
	if xfcc[spiffeID("batch")] != 0 {
		return fmt.Errorf("batch-0's requests arrived as itself (%d), not as web: the certificate is not shared", xfcc[spiffeID("batch")])
	}
	if xfcc[spiffeID("web")] != 2*perSourceN {
		return fmt.Errorf("the app saw web %d times, want %d (all of batch-0's too)", xfcc[spiffeID("web")], 2*perSourceN)
	}
	if hs[spiffeID("batch")] != 0 || hs[spiffeID("web")] < 1 {
		return fmt.Errorf("api-0's inbound accepted %s, want connections from web only", toJSON(hs))
	}
	return nil
}

func checkOwnIdentity(o redgreen.Observation) error {
	_, xfcc, hs, err := identityEvidence(o)
	if err != nil {
		return err
	}
	for _, sa := range []string{"web", "batch"} {
		if n := xfcc[spiffeID(sa)]; n != perSourceN {
			return fmt.Errorf("the app saw %s %d times, want %d (saw %s)", sa, n, perSourceN, toJSON(xfcc))
		}
		if hs[spiffeID(sa)] < 1 {
			return fmt.Errorf("api-0's inbound accepted no connection from %s (%s)", sa, toJSON(hs))
		}
	}
	// The inbound's count also holds the suite's own clients of earlier
	// cases; the app's record of this case's requests holds no one else.
	if len(xfcc) != 2 {
		return fmt.Errorf("api-0's app saw other peers: %s", toJSON(xfcc))
	}
	return nil
}

// connCount opens downstreams connections from web-0 to cart, three
// requests each, all at once, and counts the QUIC connections cart-0's
// inbound accepted from web meanwhile. No earlier case dials cart from
// web on any variant, so the twin starts without a connection.
func connCount(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "cart-0's QUIC inbound (handshakes by peer SPIFFE ID) and cart-0's app (the XFCC of each request)"}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	web, err := pod(c, "web-0")
	if err != nil {
		return obs, err
	}
	before, err := settled(ctx, c, "node-b", "cart-0")
	if err != nil {
		return obs, err
	}
	const perConn = 3
	var (
		mu    sync.Mutex
		codes = map[int]int{}
		first error
		wg    sync.WaitGroup
	)
	for i := range downstreams {
		client := meshClient(c, web)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer client.CloseIdleConnections()
			for j := range perConn {
				code, _, err := meshGet(ctx, c, client, "cart", fmt.Sprintf("/conns/web-0/%d-%d", i, j))
				mu.Lock()
				codes[code]++
				if err != nil && first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return obs, first
	}
	after, err := settled(ctx, c, "node-b", "cart-0")
	if err != nil {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, "cart-0", "cart", "conns")
	if err != nil {
		return obs, err
	}
	d := after.since(before)
	obs.Evidence = pooledConns{Codes: codes, Requests: downstreams * perConn, ConnectionsFromWeb: d.Accepted[spiffeID("web")], AppXFCC: xfcc}
	obs.Summary = fmt.Sprintf("%d downstream connections × %d requests answered %v; cart-0's inbound accepted %v QUIC connections from web (all peers: %s); cart-0's app saw %s",
		downstreams, perConn, codes, d.Accepted[spiffeID("web")], toJSON(d.Accepted), toJSON(xfcc))
	return obs, c.Check(ctx)
}

// pooledConns is a connection-count case's evidence: the answers by
// status, the requests sent, the QUIC connections cart-0's inbound
// accepted from web meanwhile, and the requests cart-0's app saw by peer
// URI.
type pooledConns struct {
	Codes              map[int]int    `json:"codes"`
	Requests           int            `json:"requests"`
	ConnectionsFromWeb float64        `json:"connections_from_web"`
	AppXFCC            map[string]int `json:"app_xfcc"`
}

func checkConnCount(o redgreen.Observation, want float64) error {
	ev, err := redgreen.EvidenceOf[pooledConns](o)
	if err != nil {
		return err
	}
	codes, n, reqs, xfcc := ev.Codes, ev.ConnectionsFromWeb, ev.Requests, ev.AppXFCC
	if !allOK(codes, reqs) || xfcc[spiffeID("web")] != reqs {
		return fmt.Errorf("answers %v and the app saw web %d times, want %d × 200 seen", codes, xfcc[spiffeID("web")], reqs)
	}
	if n != want {
		return fmt.Errorf("cart-0's inbound accepted %v QUIC connections from web for %d downstream connections, want %v", n, downstreams, want)
	}
	return nil
}
