package mtlspool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// r4 connects the suite's client to api-0's inbound with an SVID signed by
// the revocable root and keeps what the server gives it for resuming.
// Then it reconnects with a 0-RTT request; then the root is revoked (v's
// agents drop it from the bundle) and, once api-0's inbound refuses a
// fresh client of that root, it tries to resume once more.
func r4(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "api-0's app record (the XFCC of each request), node-b's QUIC inbound counters (handshakes by peer and resumption, refusals by reason), the client's own view of its session"}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	p, err := r.newProbe(c, "web-0", "api", true)
	if err != nil {
		return obs, err
	}
	if p.certs, err = revocableSVID(r, "r4-probe"); err != nil {
		return obs, err
	}
	cache := &offeredCache{ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	p.cache = cache
	tag := "r4-" + string(v)
	if _, err := p.get(ctx, "/"+tag+"-first/0", false); err != nil {
		return obs, fmt.Errorf("the R4 client's first, valid connection failed, so nothing can be concluded: %w", err)
	}
	// The ticket the server issued, if any, as the client holds it.
	_, ticket := cache.ClientSessionCache.Get(p.sni())
	before, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	s, rerr := p.get(ctx, "/"+tag+"-again/0", true)
	again, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	if err := r.trustRevocable(v, false); err != nil {
		return obs, err
	}
	defer func() { _ = r.trustRevocable(v, true) }()
	if err := untilRevoked(ctx, r, c); err != nil {
		return obs, err
	}
	revokedBefore, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	offered := cache.hits
	rs, rverr := p.get(ctx, "/"+tag+"-revoked/0", true)
	revokedAfter, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	seen := map[string]map[string]int{}
	for _, step := range []string{"first", "again", "revoked"} {
		if seen[step], err = appXFCC(ctx, c, "api-0", "api", tag+"-"+step); err != nil {
			return obs, err
		}
	}
	resumedAgain := again.since(before).Accepted[spiffeID("r4-probe")+" resumed"]
	obs.Evidence = r4Obs{Ticket: ticket, Resumed: s.resumed, ZeroRTT: s.used0RTT, AgainErr: errString(rerr),
		InboundResumed: resumedAgain, App: seen,
		RevokedDials: rs.dials, RevokedOffered: cache.hits - offered, RevokedResumed: rs.resumed, RevokedErr: errString(rverr), RevokedRefused: revokedAfter.since(revokedBefore).Refused}
	obs.Summary = fmt.Sprintf("first connection: session ticket kept %v; reconnect: resumed %v (api-0's inbound counted %v resumed handshakes), 0-RTT accepted %v, request %s; after the root's revocation: ticket offered %v, resumed %v, request %s, api-0's inbound refused %s; the app saw %s",
		ticket, s.resumed, resumedAgain, s.used0RTT, orOK(rerr), cache.hits-offered > 0, rs.resumed, orOK(rverr), toJSON(revokedAfter.since(revokedBefore).Refused), toJSON(seen))
	return obs, c.Check(ctx)
}

// offeredCache counts the sessions the client found to offer.
type offeredCache struct {
	tls.ClientSessionCache
	hits int
}

func (c *offeredCache) Get(key string) (*tls.ClientSessionState, bool) {
	cs, ok := c.ClientSessionCache.Get(key)
	if ok && cs != nil {
		c.hits++
	}
	return cs, ok
}

// revocableSVID is an SVID of sa signed by the revocable root.
func revocableSVID(r *rig, sa string) ([]tls.Certificate, error) {
	s, err := r.revocable.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: sa}, TTL: time.Hour})
	if err != nil {
		return nil, err
	}
	return tlsCerts(s), nil
}

// untilRevoked waits until api-0's inbound refuses a fresh client of the
// revocable root: the new bundle has reached it.
func untilRevoked(ctx context.Context, r *rig, c cluster.Cluster) error {
	p, err := r.newProbe(c, "web-0", "api", true)
	if err != nil {
		return err
	}
	if p.certs, err = revocableSVID(r, "r4-witness"); err != nil {
		return err
	}
	refused, err := wait.Until(ctx, 15*time.Second, 200*time.Millisecond, func() (bool, error) {
		_, err := p.get(ctx, "/r4-witness/0", false)
		return err != nil, nil
	})
	switch {
	case err != nil:
		return fmt.Errorf("waiting for api-0's inbound to refuse the revoked root: %w", err)
	case !refused:
		return errors.New("api-0's inbound still accepts the revoked root after 15 s: the bundle did not change")
	}
	return nil
}

// r4Obs is an R4 case's evidence: whether the client kept a session
// ticket, and on its reconnect whether it resumed, whether the server
// took its 0-RTT data and the request's error; the resumed handshakes
// api-0's inbound counted for it; what api-0's app saw of each step (first,
// again, revoked) by peer URI; and after the revocation, the handshakes
// the client made, the sessions it offered, whether it resumed, its
// request's error and what the inbound refused by reason.
type r4Obs struct {
	Ticket         bool                      `json:"ticket"`
	Resumed        bool                      `json:"resumed"`
	ZeroRTT        bool                      `json:"used_0rtt"`
	AgainErr       string                    `json:"again_err"`
	InboundResumed float64                   `json:"inbound_resumed"`
	App            map[string]map[string]int `json:"app"`
	RevokedDials   int                       `json:"revoked_handshakes"`
	RevokedOffered int                       `json:"revoked_offered"`
	RevokedResumed bool                      `json:"revoked_resumed"`
	RevokedErr     string                    `json:"revoked_err"`
	RevokedRefused counters                  `json:"revoked_refused"`
}

func r4Evidence(o redgreen.Observation) (r4Obs, error) {
	f, err := redgreen.EvidenceOf[r4Obs](o)
	if err != nil {
		return f, err
	}
	if f.App["first"][spiffeID("r4-probe")] != 1 {
		return f, fmt.Errorf("the app saw the valid first request as %s, want the client once", toJSON(f.App["first"]))
	}
	return f, nil
}

// checkDrift: the session resumes on the ticket and its 0-RTT request is
// served, identity taken from the ticket before the handshake completes.
func checkDrift(o redgreen.Observation) error {
	f, err := r4Evidence(o)
	if err != nil {
		return err
	}
	if !f.Ticket {
		return errors.New("the server issued no session ticket: resumption is not on")
	}
	if !f.Resumed || !f.ZeroRTT || f.InboundResumed != 1 {
		return fmt.Errorf("the client did not resume with 0-RTT (resumed %v, 0-RTT %v, the inbound counted %v resumed handshakes)", f.Resumed, f.ZeroRTT, f.InboundResumed)
	}
	if f.App["again"][spiffeID("r4-probe")] != 1 {
		return fmt.Errorf("the app saw %s of the resumed 0-RTT request, want it once under the ticket's identity", toJSON(f.App["again"]))
	}
	return nil
}

// checkNoDrift: no ticket, so no resumption; after the revocation the
// client is refused and the app sees nothing.
func checkNoDrift(o redgreen.Observation) error {
	f, err := r4Evidence(o)
	if err != nil {
		return err
	}
	if f.Ticket || f.Resumed || f.ZeroRTT || f.InboundResumed != 0 || f.RevokedResumed {
		return fmt.Errorf("a session was offered or resumed: ticket %v, resumed %v, 0-RTT %v, inbound resumed %v", f.Ticket, f.Resumed, f.ZeroRTT, f.InboundResumed)
	}
	if f.App["again"][spiffeID("r4-probe")] != 1 {
		return fmt.Errorf("the valid client's full handshake was not served: app %s", toJSON(f.App["again"]))
	}
	if f.RevokedErr == "" || len(f.App["revoked"]) != 0 || f.RevokedDials < 1 || f.RevokedRefused["peer_rejected"] != float64(f.RevokedDials) || len(f.RevokedRefused) != 1 {
		return fmt.Errorf("the revoked client's %d handshakes were not each refused as peer_rejected with nothing served: %q, refused %s, app %s", f.RevokedDials, f.RevokedErr, toJSON(f.RevokedRefused), toJSON(f.App["revoked"]))
	}
	return nil
}

// r4Gate checks the snapshot node-b's agent last published (its state
// dir's last-good.json) with the config gates, reads every QUIC chain's
// R4 fields, and looks in the agent's log for a control's pass.
func r4Gate(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "node-b's agent's published snapshot (last-good.json) under validate.Check, and its log"}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	file := filepath.Join(r.runDir(v), "nodes", "node-b.state", agent.LastGoodFile)
	data, err := os.ReadFile(file)
	if err != nil {
		return obs, fmt.Errorf("node-b's published snapshot: %w", err)
	}
	_, res, err := agent.ParseDump(file, data)
	if err != nil {
		return obs, err
	}
	fields := map[string]int{}
	for _, rr := range res[resource.ListenerType] {
		l := rr.(*listenerv3.Listener)
		if !strings.HasPrefix(l.GetName(), xdsnames.QuicInboundListenerPrefix) {
			continue
		}
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			q := &quicv3.QuicDownstreamTransport{}
			if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(q); err != nil {
				return obs, fmt.Errorf("%s: %w", l.GetName(), err)
			}
			fields["resumption="+stated(q.GetEnableResumption())+" early_data="+stated(q.GetEnableEarlyData())]++
		}
	}
	var failures []string
	var ve *validate.Error
	if err := validate.Check(res); errors.As(err, &ve) {
		for _, f := range ve.Failures {
			failures = append(failures, f.Gate+": "+f.Resource)
		}
	} else if err != nil {
		return obs, err
	}
	log, err := os.ReadFile(filepath.Join(r.runDir(v), "logs", "agent~node-b.log"))
	if err != nil {
		return obs, fmt.Errorf("node-b's agent log: %w", err)
	}
	passed := 0
	for _, line := range strings.Split(string(log), "\n") {
		if strings.Contains(line, "TEST ONLY") && strings.Contains(line, validate.GateQuicR4) {
			passed++
		}
	}
	obs.Evidence = gateRun{QuicChains: fields, GateFailures: failures, LogGatePasses: passed}
	obs.Summary = fmt.Sprintf("node-b's QUIC chains %s; gate failures %d %v; agent log lines of a control publishing past %s: %d", toJSON(fields), len(failures), firstOf(failures), validate.GateQuicR4, passed)
	return obs, c.Check(ctx)
}

func firstOf(s []string) []string {
	if len(s) > 3 {
		return append(s[:3:3], fmt.Sprintf("and %d more", len(s)-3))
	}
	return s
}

// gateRun is an R4 gate case's evidence: node-b's QUIC chains counted by
// the R4 fields they state, the config gates' failures (gate: resource)
// on the snapshot it published, and the agent's log lines of a control
// publishing past quic_r4_pinned.
type gateRun struct {
	QuicChains    map[string]int `json:"quic_chains"`
	GateFailures  []string       `json:"gate_failures"`
	LogGatePasses int            `json:"log_gate_passes"`
}

func gateEvidence(o redgreen.Observation) (map[string]int, []string, int, error) {
	ev, err := redgreen.EvidenceOf[gateRun](o)
	if err != nil {
		return nil, nil, 0, err
	}
	if len(ev.QuicChains) == 0 {
		return nil, nil, 0, errNothing
	}
	return ev.QuicChains, ev.GateFailures, ev.LogGatePasses, nil
}

const r4False = "resumption=false early_data=false"

// stated is a bool field as a chain states it, or unset.
func stated(v *wrapperspb.BoolValue) string {
	if v == nil {
		return "unset"
	}
	return fmt.Sprint(v.GetValue())
}

func checkGateRed(o redgreen.Observation) error {
	fields, failures, passes, err := gateEvidence(o)
	if err != nil {
		return err
	}
	if fields[r4False] != 0 {
		return fmt.Errorf("node-b published QUIC chains with both R4 fields false: %s", toJSON(fields))
	}
	n := 0
	for _, f := range failures {
		if !strings.HasPrefix(f, validate.GateQuicR4+": ") {
			return fmt.Errorf("a gate other than %s failed: %s", validate.GateQuicR4, f)
		}
		n++
	}
	if n == 0 {
		return fmt.Errorf("%s passed a snapshot whose QUIC chains are %s", validate.GateQuicR4, toJSON(fields))
	}
	if passes == 0 {
		return fmt.Errorf("node-b's agent published it without saying a test-only control passed %s", validate.GateQuicR4)
	}
	return nil
}

func checkGateGreen(o redgreen.Observation) error {
	fields, failures, passes, err := gateEvidence(o)
	if err != nil {
		return err
	}
	if len(fields) != 1 || fields[r4False] == 0 {
		return fmt.Errorf("node-b's QUIC chains are %s, want every one with both fields false", toJSON(fields))
	}
	if len(failures) != 0 || passes != 0 {
		return fmt.Errorf("gate failures %v, control passes in the log %d, want none", failures, passes)
	}
	return nil
}
