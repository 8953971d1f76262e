package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// pairing is a control, the subject it breaks, and how the subject's
// recorded facts read back as the evidence both cases' checks take.
type pairing struct {
	control, subject string
	evidence         func(facts map[string]any) (any, error)
}

// controlSubject pairs each control with the subject it breaks; the
// broken-rig test gives each control its subject's observation, read
// back from the subject's row.
var controlSubject = []pairing{
	{"pre-1073-prune-on-restart", "agent-restart-mid-traffic", fromRow[restartEvidence]},
	{"drop-on-removal-leave-return", "sa-leaves-and-returns", fromRow[returnEvidence]},
	{"drop-on-removal-recreated", "e5-pod-recreated-new-ip", fromRow[returnEvidence]},
	{"fanout-kept-window-1h", "rev245-migration", fromRow[migrationEvidence]},
	{"cold-restart-gap", "proxy-hot-restart", fromRow[proxyRestartEvidence]},
	{"cold-restart-agent-inside", "agent-restart-during-hot-restart", fromRow[insideEvidence]},
}

// fromRow reads a row's facts back as evidence T. A key T has no
// field for is an error: the row would record facts its checks never
// read.
func fromRow[T any](facts map[string]any) (any, error) {
	var t T
	b, err := json.Marshal(facts)
	if err != nil {
		return t, fmt.Errorf("failed to encode the facts %v: %w", facts, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&t); err != nil {
		return t, fmt.Errorf("the facts %s are not %T evidence: %w", b, t, err)
	}
	return t, nil
}

const (
	restartWitness = "the clients' per-request results, node-a's proxy access log (status, response flags, cluster), api-0's and cart-0's records, node-a's /debug/pairs before and after, its prune counters"
	returnWitness  = "node-a's proxy access log (status, response flags, duration, cluster), node-b's inbound (protocol, peer SPIFFE ID), api-0's record, node-a's /debug/pairs and admission counter"
	migWitness     = "node-b's inbound (which pairs carried HTTP/3 traffic), node-a's /debug/pairs and state file after the window, its prune counters, the clients' results"
)

func cases(r *rig) []redgreen.Case {
	restartExpect := fmt.Sprintf("web-0's and batch-0's requests to api and web-0's to cart (a pair admitted just before) every 50 ms, through node-a's agent restarting and %s beyond", window+onDemandTimeout)
	return []redgreen.Case{
		{
			Name: "pre-1073-prune-on-restart", Role: redgreen.Control,
			Description: fmt.Sprintf("node-a's agent restarts under steady traffic with the pre-#1073 rule (--test-only-prune-unfetched-since-start, a %s window): a twin the proxy holds but did not fetch since the agent started is pruned", window),
			Expect:      restartExpect + ": live twins are pruned one window after the restart (pruned counter up, gone from /debug/pairs) and their requests are 503 NC in node-a's access log; api-0 and cart-0 record none of them",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return agentRestart(ctx, r, pruneUnfetched) },
			Check:       checkRestartPrunes,
		},
		{
			Name: "drop-on-removal-leave-return", Role: redgreen.Control,
			Description: "batch's last pod leaves node-a and returns, with pairs dropped on removal (--test-only-drop-pair-on-removal, pre-#1036): the proxy still holds its on-demand subscription for the twin and will not ask again",
			Expect:      "the pair is gone while batch is away; batch-0's next request to api is 503 NC at the 2 s on-demand timeout, no admission, api-0 records nothing",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return leaveReturn(ctx, r, dropOnRemoval, "batch-0", "")
			},
			Check: checkReturnFails,
		},
		{
			Name: "drop-on-removal-recreated", Role: redgreen.Control,
			Description: "web's only pod is re-created on a new IP with pairs dropped on removal (--test-only-drop-pair-on-removal): identity is keyed by the account, never the IP, so no configuration in the mesh loses the identity; what loses the twin is dropping the pair while the pod is gone",
			Expect:      "web-0's first request from its new IP is 503 NC at the 2 s on-demand timeout, no admission, api-0 records nothing",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return leaveReturn(ctx, r, dropOnRemoval, "web-0", recreatedIP)
			},
			Check: checkReturnFails,
		},
		{
			Name: "fanout-kept-window-1h", Role: redgreen.Control,
			Description: "node-a's agent restarts onto a persisted up-front fan-out (every local account × every destination, rev245's shape) with the default 1 h fetch window, longer than the case",
			Expect:      fmt.Sprintf("%s after the restart the agent's fetch window is still open (aether_agent_pairs_fetch_window_open 1) and every fan-out pair is in /debug/pairs and the state file, though only the pairs node-b saw carry traffic were used; nothing pruned", window+migrationMargin),
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return migration(ctx, r, windowHour) },
			Check:       checkFanoutKept,
		},
		{
			Name: "cold-restart-gap", Role: redgreen.Control,
			Description: "node-a's proxy is restarted without a hot restart (kill -9, then a new proxy with its arguments, started once a probe sent after the kill was lost) while a prober sends web-0's requests to api on a new connection every " + probeEvery.String() + "; cron's pair is made dormant before",
			Expect:      "probes are lost (not answered 200 within the prober's deadline) while no proxy serves web-0's listener, and api-0's record misses some of them too",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return proxyRestart(ctx, r, windowHour, cold) },
			Check:       checkColdRestartGap,
		},
		{
			Name: "cold-restart-agent-inside", Role: redgreen.Control,
			Description: "#1085's race with a restart that hands nothing over: node-a's agent stops, node-a's proxy is killed and a new one started, and the agent returns 500 ms later, under the prober",
			Expect:      "probes are lost until the returning agent has configured the new proxy, and api-0's record misses some of them too",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return restartInside(ctx, r, windowHour, cold)
			},
			Check: checkInsideLoss,
		},
		{
			Name: "rev245-migration", Role: redgreen.Subject,
			Description: fmt.Sprintf("node-a's agent restarts onto the same persisted fan-out with a %s fetch window", window),
			Expect:      "once the agent has closed its window (aether_agent_pairs_fetch_window_open 0), /debug/pairs and the state file hold exactly the pairs node-b saw carry HTTP/3 traffic; the others are pruned by the window (reason fetch-window), no twin in use is pruned, every request on the used pairs answers 200",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return migration(ctx, r, shipped) },
			Check:       checkMigrated,
		},
		{
			Name: "agent-restart-mid-traffic", Role: redgreen.Subject,
			Description: fmt.Sprintf("node-a's agent restarts under steady traffic (a %s fetch window)", window),
			Expect:      restartExpect + ": every request 200 over its twin, no 503 NC in node-a's access log, api-0 and cart-0 record each one, /debug/pairs the same before and after, nothing pruned",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return agentRestart(ctx, r, shipped) },
			Check:       checkRestartCarries,
		},
		{
			Name: "sa-leaves-and-returns", Role: redgreen.Subject,
			Description: "batch's last pod leaves node-a (CNI DEL, gone from the registry) and returns",
			Expect:      "the pair is dormant while batch is away; batch-0's next request is 200 over its twin, well before the on-demand timeout, HTTP/3.0 from batch's SPIFFE ID at node-b, with no admission (nothing fetched on demand), the pair live again and no new one",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return leaveReturn(ctx, r, shipped, "batch-0", "")
			},
			Check: checkReturnServes,
		},
		{
			Name: "e5-pod-recreated-new-ip", Role: redgreen.Subject,
			Description: "web's only pod is re-created on node-a at a new IP (" + recreatedIP + ")",
			Expect:      "web-0's first request from the new IP is 200 over web's twin, HTTP/3.0 from web's SPIFFE ID at node-b, with no admission, the pair live again and no new one in /debug/pairs",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				return leaveReturn(ctx, r, shipped, "web-0", recreatedIP)
			},
			Check: checkRecreatedServes,
		},
		{
			Name: "proxy-hot-restart", Role: redgreen.Subject,
			Description: "node-a's proxy is hot restarted (the next epoch takes its listeners over and drains it) under the same prober, with cron's pair made dormant before",
			Expect:      "every probe is answered 200 and recorded by api-0; the new proxy generation holds no on-demand subscription, so the dormant pair is pruned (not re-subscribed) while the live ones stay, and batch's first use after is 200 over its twin (which reaches the new generation from the agent), HTTP/3.0 at node-b; the old epoch exits 0 and no epoch's log reports a crash; no twin in use pruned",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return proxyRestart(ctx, r, shipped, hot) },
			Check:       checkHotRestart,
		},
		{
			Name: "agent-restart-during-hot-restart", Role: redgreen.Subject,
			Description: "#1085: node-a's agent stops, node-a's proxy is hot restarted, and the agent returns 500 ms later, under the prober",
			Expect:      "every probe is answered 200 and recorded by api-0: the old epoch serves until the new one has its configuration from the returned agent",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return restartInside(ctx, r, shipped, hot) },
			Check:       checkInsideNoLoss,
		},
	}
}
