package mtls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
)

const (
	// perSource requests from each source pod per case.
	perSourceN   = 50
	witnessApp   = "the destination app's own record of the XFCC each request carried (rigs/node HTTP echo)"
	witnessProxy = "the destination proxy's refusal counters and the app's record"
)

func cases(r *rig) []redgreen.Case {
	return []redgreen.Case{
		staticControl(r, staticCert),
		unhashedControl(r, unhashed),
		{
			Name: "per-source-identity", Role: redgreen.Subject,
			Description: "the h2 cluster presents each source's SVID, chosen per connection from the pod identity its outbound listener stamps as hashable filter state",
			Expect:      fmt.Sprintf("each of src-a-0 and src-b-0 sends %d requests at once; every one arrives at dst-0 as its own source's SPIFFE ID", perSourceN),
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return identities(ctx, r, perSource, "subject")
			},
			Check: checkOwnIdentity,
		},
		{
			Name: "refused-at-18008", Role: redgreen.Subject,
			Description: "clients straight to dst-0's 18008 with no certificate, another trust domain's SVID and an expired SVID; then a valid SVID in the same run",
			Expect:      "each bad client refused at the handshake and counted by reason at node-b's proxy; the app sees none of them; the valid one gets through as sa-a",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return refusals(ctx, r) },
			Check:       checkRefusals,
		},
		{
			Name: "unknown-authority", Role: redgreen.Subject,
			Description: "src-a-0 asks 18081 for an authority no service has",
			Expect:      "404 with a body naming the miss; the app sees nothing",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return unknownAuthority(ctx, r) },
			Check:       checkUnknownAuthority,
		},
	}
}

// staticControl is #831 as configuration: the h2 cluster presents one
// static certificate (the first local account's, sa-a) whoever the source.
func staticControl(r *rig, mode upstreamCert) redgreen.Case {
	return redgreen.Case{
		Name: "static-certificate", Role: redgreen.Control,
		Description: "the h2 cluster presents one static certificate (tls_certificate_sds_secret_configs: sa-a), no per-connection selection (#831)",
		Expect:      fmt.Sprintf("src-b-0's %d requests arrive at dst-0 as %s", perSourceN, spiffeID("sa-a")),
		Run: func(ctx context.Context) (redgreen.Observation, error) {
			return identities(ctx, r, mode, "control-"+string(mode))
		},
		Check: checkBArrivesAsA,
	}
}

// unhashedControl is #831 in the pool: the certificate is chosen per
// connection, but the outbound listeners stamp the identity with
// envoy.string, which is not Hashable, so it stays out of the pool key.
// src-a-0's one request opens the h2 connection to dst-0; src-b-0's then
// ride it.
func unhashedControl(r *rig, mode upstreamCert) redgreen.Case {
	return redgreen.Case{
		Name: "unhashed-identity", Role: redgreen.Control,
		Description: "the identity is stamped with envoy.string (not Hashable): it picks the certificate of a new connection but stays out of the upstream pool key",
		Expect:      fmt.Sprintf("after one request of src-a-0, src-b-0's %d requests ride its connection and arrive at dst-0 as %s", perSourceN, spiffeID("sa-a")),
		Run: func(ctx context.Context) (redgreen.Observation, error) {
			return pooled(ctx, r, mode, "control-"+string(mode))
		},
		Check: checkPooledAsA,
	}
}

// pooled sends one request from src-a-0, then perSourceN from src-b-0, and
// reads who src-b-0's arrived as, and how many upstream connections
// node-a's proxy has opened per presented identity since it started.
func pooled(ctx context.Context, r *rig, mode upstreamCert, tag string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessApp + " and node-a's upstream connection counter"}
	c, err := r.cluster(ctx, mode)
	if err != nil {
		return obs, err
	}
	if _, err := sendFrom(ctx, c, tag, 1, "src-a-0"); err != nil {
		return obs, err
	}
	if _, err := sendFrom(ctx, c, tag, perSourceN, "src-b-0"); err != nil {
		return obs, err
	}
	got, err := arrivals(ctx, c, tag)
	if err != nil {
		return obs, err
	}
	opened := map[string]float64{}
	for _, sa := range []string{"sa-a", "sa-b"} {
		v, err := proxyMetric(ctx, c, "node-a", mUpstreamConns, map[string]string{"identity": spiffeID(sa)})
		if err != nil {
			return obs, err
		}
		opened[sa] = v
	}
	obs.Evidence = pooledArrivals{ArrivedAs: got, ConnectionsOpened: opened}
	obs.Summary = fmt.Sprintf("src-a-0 → %s; src-b-0 → %s; upstream connections opened: %s", toJSON(got["src-a-0"]), toJSON(got["src-b-0"]), toJSON(opened))
	return obs, c.Check(ctx)
}

// pooledArrivals is the unhashed-identity control's evidence: who each
// source's requests arrived as at dst-0, by source pod and peer URI, and
// the upstream connections node-a's proxy opened per presented account.
type pooledArrivals struct {
	ArrivedAs         map[string]map[string]int `json:"arrived_as"`
	ConnectionsOpened map[string]float64        `json:"connections_opened"`
}

func checkPooledAsA(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[pooledArrivals](o)
	if err != nil {
		return err
	}
	got, opened := ev.ArrivedAs, ev.ConnectionsOpened
	if n := got["src-b-0"][spiffeID("sa-a")]; n != perSourceN || len(got["src-b-0"]) != 1 {
		return fmt.Errorf("src-b-0's requests arrived as %s, want all %d as %s: the pool kept the sources apart", toJSON(got["src-b-0"]), perSourceN, spiffeID("sa-a"))
	}
	if opened["sa-b"] != 0 {
		return fmt.Errorf("node-a's proxy opened %v connections presenting sa-b; riding A's connection opens none", opened["sa-b"])
	} else if opened["sa-a"] < 1 {
		return fmt.Errorf("node-a's proxy opened no connection presenting sa-a (%v): nothing was pooled", opened)
	}
	return nil
}

// identities sends perSourceN requests from each source at once and reads
// who each arrived as from the app's record.
func identities(ctx context.Context, r *rig, mode upstreamCert, tag string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: witnessApp}
	c, err := r.cluster(ctx, mode)
	if err != nil {
		return obs, err
	}
	ok, err := sendFrom(ctx, c, tag, perSourceN, "src-a-0", "src-b-0")
	if err != nil {
		return obs, err
	}
	got, err := arrivals(ctx, c, tag)
	if err != nil {
		return obs, err
	}
	obs.Evidence = identityArrivals{Sent: perSourceN, Answered200: ok, ArrivedAs: got}
	obs.Summary = fmt.Sprintf("src-a-0 → %s; src-b-0 → %s", toJSON(got["src-a-0"]), toJSON(got["src-b-0"]))
	return obs, c.Check(ctx)
}

// identityArrivals is an identity case's evidence: the requests each source
// sent, how many answered 200 by source pod, and who they arrived as at
// dst-0, by source pod and peer URI.
type identityArrivals struct {
	Sent        int                       `json:"sent"`
	Answered200 map[string]int            `json:"answered_200"`
	ArrivedAs   map[string]map[string]int `json:"arrived_as"`
}

func arrived(o redgreen.Observation) (map[string]map[string]int, error) {
	ev, err := redgreen.EvidenceOf[identityArrivals](o)
	if err != nil {
		return nil, err
	}
	got := ev.ArrivedAs
	for _, src := range []string{"src-a-0", "src-b-0"} {
		total := 0
		for _, n := range got[src] {
			total += n
		}
		if total != perSourceN {
			return nil, fmt.Errorf("%d of %s's %d requests reached the app; every one must, for the identity it arrived as to count", total, src, perSourceN)
		}
	}
	return got, nil
}

func checkBArrivesAsA(o redgreen.Observation) error {
	got, err := arrived(o)
	if err != nil {
		return err
	}
	if n := got["src-b-0"][spiffeID("sa-b")]; n > 0 {
		return fmt.Errorf("%d of src-b-0's requests arrived as itself (%s): no #831 seen", n, toJSON(got["src-b-0"]))
	}
	if n := got["src-b-0"][spiffeID("sa-a")]; n != perSourceN {
		return fmt.Errorf("src-b-0's requests arrived as %s, want all %d as %s", toJSON(got["src-b-0"]), perSourceN, spiffeID("sa-a"))
	}
	return nil
}

func checkOwnIdentity(o redgreen.Observation) error {
	got, err := arrived(o)
	if err != nil {
		return err
	}
	for src, sa := range map[string]string{"src-a-0": "sa-a", "src-b-0": "sa-b"} {
		if n := got[src][spiffeID(sa)]; n != perSourceN || len(got[src]) != 1 {
			return fmt.Errorf("%s's requests arrived as %s, want all %d as %s", src, toJSON(got[src]), perSourceN, spiffeID(sa))
		}
	}
	return nil
}

// refusals: three bad clients then a good one, straight to dst-0:18008
// from src-a-0's netns.
func refusals(ctx context.Context, r *rig) (redgreen.Observation, error) {
	ev := &refused{Clients: map[string]refusedClient{}}
	obs := redgreen.Observation{Witness: witnessProxy, Evidence: ev}
	c, err := r.cluster(ctx, perSource)
	if err != nil {
		return obs, err
	}
	foreignCA, err := identity.NewCA(identity.CAConfig{TrustDomain: "other.test", MeshDomain: meshDomain})
	if err != nil {
		return obs, err
	}
	foreign, err := foreignCA.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: "sa-a"}, TTL: time.Hour})
	if err != nil {
		return obs, err
	}
	expired, err := r.svid("sa-a", time.Minute, time.Now().Add(-time.Hour))
	if err != nil {
		return obs, err
	}
	good, err := r.svid("sa-a", time.Hour, time.Time{})
	if err != nil {
		return obs, err
	}
	dst, err := cluster.PodNamed(c, namespace, "dst-0")
	if err != nil {
		return obs, err
	}
	src, err := cluster.PodNamed(c, namespace, "src-a-0")
	if err != nil {
		return obs, err
	}
	url := func(tag string) string {
		return fmt.Sprintf("https://%s/%s", netip.AddrPortFrom(dst.IP, constants.InboundPort), tag)
	}
	listener := map[string]string{"listener": xdsnames.InboundListener(namespace, "dst-0")}
	clients := []struct {
		tag, reason string
		svid        *x509svid.SVID
	}{
		{"no-certificate", metrics.RefusedNoClientCert, nil},
		{"other-trust-domain", metrics.RefusedPeer, foreign},
		{"expired-svid", metrics.RefusedPeer, expired},
	}
	counted := map[string]float64{}
	var parts []string
	for _, cl := range clients {
		labels := map[string]string{"listener": listener["listener"], "reason": cl.reason}
		before, err := proxyMetric(ctx, c, "node-b", mRefused, labels)
		if err != nil {
			return obs, err
		}
		client, err := tlsClient(c, src, cl.svid, dstSNI)
		if err != nil {
			return obs, err
		}
		code, _, reqErr := get(ctx, client, url(cl.tag), dstAuthority)
		// The client sees the server's alert before the server's
		// handshake returns and counts it: wait for the count, bounded.
		after, err := settledMetric(ctx, c, "node-b", mRefused, labels, before+1)
		if err != nil {
			return obs, err
		}
		counted[cl.tag] = after - before
		ev.Clients[cl.tag] = refusedClient{Status: code, ClientError: fmt.Sprint(reqErr), Reason: cl.reason, Counted: after - before}
		parts = append(parts, fmt.Sprintf("%s: %s +%v", cl.tag, cl.reason, after-before))
	}
	client, err := tlsClient(c, src, good, dstSNI)
	if err != nil {
		return obs, err
	}
	code, _, err := get(ctx, client, url("valid-svid"), dstAuthority)
	ev.Valid = &validClient{Status: code, ClientError: fmt.Sprint(err)}
	seen, err := reachedApp(ctx, c, "no-certificate", "other-trust-domain", "expired-svid", "valid-svid")
	if err != nil {
		return obs, err
	}
	ev.Counted, ev.AppSaw = counted, seen
	obs.Summary = strings.Join(parts, "; ") + fmt.Sprintf("; valid SVID %d; the app saw %s", code, toJSON(seen))
	return obs, c.Check(ctx)
}

// refusedClient is what one bad client met at dst-0's 18008: its
// request's status and error, the reason node-b's proxy must count it
// under, and how far that count rose.
type refusedClient struct {
	Status      int     `json:"status"`
	ClientError string  `json:"client_error"`
	Reason      string  `json:"reason"`
	Counted     float64 `json:"counted"`
}

// validClient is what the valid SVID's request met in the same run.
type validClient struct {
	Status      int    `json:"status"`
	ClientError string `json:"client_error"`
}

// refused is the refused-at-18008 case's evidence, filled as the run goes:
// each bad client's attempt by tag, the valid one's, the refusals counted
// by tag and the XFCC dst-0's app recorded for each tag it saw. Its facts
// are one object: the clients by tag beside the rest, each part once
// observed.
type refused struct {
	Clients map[string]refusedClient
	Valid   *validClient
	Counted map[string]float64
	AppSaw  map[string]string
}

func (r *refused) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	for tag, c := range r.Clients {
		m[tag] = c
	}
	if r.Valid != nil {
		m["valid-svid"] = r.Valid
	}
	if r.Counted != nil {
		m["counted"] = r.Counted
	}
	if r.AppSaw != nil {
		m["app_saw"] = r.AppSaw
	}
	return json.Marshal(m)
}

// reachedApp reads, per tag, the XFCC of the request dst-0's app recorded
// for it; a tag the app never saw is absent.
func reachedApp(ctx context.Context, c cluster.Cluster, tags ...string) (map[string]string, error) {
	recs, err := records(ctx, c, "dst-0")
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, rec := range recs {
		for _, tag := range tags {
			if rec.Event == "http" && rec.Payload == dstAuthority+"/"+tag {
				out[tag] = rec.XFCC
			}
		}
	}
	return out, nil
}

func checkRefusals(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[*refused](o)
	if err != nil {
		return err
	}
	if ev == nil || ev.Counted == nil {
		return errors.New("no refusal counts observed")
	}
	counted, seen := ev.Counted, ev.AppSaw
	for _, tag := range []string{"no-certificate", "other-trust-domain", "expired-svid"} {
		if counted[tag] < 1 {
			return fmt.Errorf("%s was not counted as refused (%s)", tag, toJSON(ev.Clients[tag]))
		}
		if s, ok := seen[tag]; ok {
			return fmt.Errorf("%s reached the app (%s)", tag, s)
		}
	}
	if want := "By=" + spiffeID("sa-dst") + ";URI=" + spiffeID("sa-a"); seen["valid-svid"] != want {
		return fmt.Errorf("the valid SVID in the same run reached the app with XFCC %q, want %q: the listener, not the peers, may be what refused", seen["valid-svid"], want)
	}
	return nil
}

func unknownAuthority(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "the response and the destination app's record"}
	c, err := r.cluster(ctx, perSource)
	if err != nil {
		return obs, err
	}
	url, err := meshURL(c, "/unknown-authority/src-a-0/0")
	if err != nil {
		return obs, err
	}
	host := "nope." + namespace + "." + meshDomain
	src, err := cluster.PodNamed(c, namespace, "src-a-0")
	if err != nil {
		return obs, err
	}
	code, body, err := get(ctx, meshClient(c, src), url, host)
	if err != nil {
		return obs, err
	}
	got, err := arrivals(ctx, c, "unknown-authority")
	if err != nil {
		return obs, err
	}
	obs.Evidence = unknownAnswer{Status: code, Body: body, AppSaw: len(got)}
	obs.Summary = fmt.Sprintf("%s → %d %q; the app saw %d", host, code, strings.TrimSpace(body), len(got))
	return obs, c.Check(ctx)
}

// unknownAnswer is the unknown-authority case's evidence: the answer's
// status and body, and how many of its requests dst-0's app recorded.
type unknownAnswer struct {
	Status int    `json:"status"`
	Body   string `json:"body"`
	AppSaw int    `json:"app_saw"`
}

func checkUnknownAuthority(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[unknownAnswer](o)
	if err != nil {
		return err
	}
	if ev.Status != http.StatusNotFound || !strings.Contains(ev.Body, "no mesh service has this authority") {
		return fmt.Errorf("answered %d %q, want 404 naming the miss", ev.Status, ev.Body)
	}
	if ev.AppSaw != 0 {
		return fmt.Errorf("the app saw %d requests, want none", ev.AppSaw)
	}
	return nil
}
