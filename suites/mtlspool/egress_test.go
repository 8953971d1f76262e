package mtlspool

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// ownEgress has an app in api-0 dial cart-0's pod address on UDP 18008 as
// QUIC, with a valid SVID and no mark: the capture diverts the pod's UDP
// egress to 18008 into its own netns, where api-0's own QUIC inbound
// listens. It reads api-0's kernel UdpNoPorts, both pods' QUIC inbounds
// and both apps around it.
func ownEgress(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "api-0's kernel (Udp NoPorts in its netns), api-0's and cart-0's QUIC inbound counters (node-b's proxy), both apps' records"}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	p, err := r.newProbe(c, "api-0", "cart", false)
	if err != nil {
		return obs, err
	}
	if p.certs, err = r.issue("egress-probe", time.Hour, time.Time{}); err != nil {
		return obs, err
	}
	// A socket in api-0's netns, only to read its kernel counters.
	meter, err := c.DialUDP(ctx, p.from, p.dst)
	if err != nil {
		return obs, err
	}
	defer meter.Close()
	noPorts0, err := udpNoPorts(meter)
	if err != nil {
		return obs, err
	}
	own0, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	peer0, err := settled(ctx, c, "node-b", "cart-0")
	if err != nil {
		return obs, err
	}
	tag := "egress-" + string(v)
	s, perr := p.get(ctx, "/"+tag+"/0", false)
	noPorts1, err := udpNoPorts(meter)
	if err != nil {
		return obs, err
	}
	own1, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	peer1, err := settled(ctx, c, "node-b", "cart-0")
	if err != nil {
		return obs, err
	}
	seen := map[string]map[string]int{}
	for _, app := range []string{"api-0", "cart-0"} {
		if seen[app], err = appXFCC(ctx, c, app, "cart", tag); err != nil {
			return obs, err
		}
	}
	obs.Evidence = egress{UDPNoPorts: noPorts1 - noPorts0, OwnInbound: own1.since(own0), PeerInbound: peer1.since(peer0),
		Apps: seen, AnsweredAs: errString(s.identityErr), DialErr: errString(perr)}
	obs.Summary = fmt.Sprintf("dial %s; the server's identity check: %s; api-0 UdpNoPorts +%d; api-0's own inbound %s; cart-0's inbound %s; apps saw %s",
		orOK(perr), orOK(s.identityErr), noPorts1-noPorts0, toJSON(own1.since(own0)), toJSON(peer1.since(peer0)), toJSON(seen))
	return obs, c.Check(ctx)
}

// egress is an own-egress case's evidence: how far api-0's UdpNoPorts
// rose, what api-0's own and cart-0's QUIC inbounds counted meanwhile,
// what each app saw by peer URI, and the dial's outcome: the server's
// identity check (naming who answered, when it was not cart) and the
// request's error.
type egress struct {
	UDPNoPorts  uint64                    `json:"udp_no_ports"`
	OwnInbound  inboundView               `json:"own_inbound"`
	PeerInbound inboundView               `json:"peer_inbound"`
	Apps        map[string]map[string]int `json:"apps"`
	AnsweredAs  string                    `json:"answered_as"`
	DialErr     string                    `json:"dial_err"`
}

func egressEvidence(o redgreen.Observation) (noPorts uint64, own, peer inboundView, apps map[string]map[string]int, answeredAs, dialErr string, err error) {
	ev, err := redgreen.EvidenceOf[egress](o)
	if err != nil {
		return 0, inboundView{}, inboundView{}, nil, "", "", err
	}
	return ev.UDPNoPorts, ev.OwnInbound, ev.PeerInbound, ev.Apps, ev.AnsweredAs, ev.DialErr, nil
}

func checkOwnInbound(o redgreen.Observation) error {
	_, own, peer, _, answeredAs, _, err := egressEvidence(o)
	if err != nil {
		return err
	}
	if own.Started < 1 {
		return fmt.Errorf("api-0's own inbound began no connection (%s): the datagrams did not land there", toJSON(own))
	}
	if !strings.Contains(answeredAs, spiffeID("api")) {
		return fmt.Errorf("the server did not answer as api (%q)", answeredAs)
	}
	if peer.Started != 0 {
		return fmt.Errorf("cart-0's inbound began %v connections: the dial reached the peer", peer.Started)
	}
	return nil
}

func checkDroppedAtSocket(o redgreen.Observation) error {
	noPorts, own, peer, apps, _, dialErr, err := egressEvidence(o)
	if err != nil {
		return err
	}
	if dialErr == "" {
		return fmt.Errorf("the dial was served")
	}
	if noPorts < 1 {
		return fmt.Errorf("api-0's UdpNoPorts did not move: the datagrams were not dropped at the socket lookup")
	}
	if own.Started != 0 || peer.Started != 0 {
		return fmt.Errorf("an inbound began a connection: api-0's own %v, cart-0's %v", own.Started, peer.Started)
	}
	for app, seen := range apps {
		if len(seen) != 0 {
			return fmt.Errorf("%s's app saw %s", app, toJSON(seen))
		}
	}
	return nil
}
