package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

// agentRestart restarts node-a's agent while web-0 and batch-0 send api,
// and web-0 cart, a request every 50 ms each, and keeps them sending for
// one window and one on-demand timeout after: a pair pruned at the end of
// the window shows as 503 NC by then. web's pair to cart is admitted just
// before the restart: a pair is carried over however new it is.
func agentRestart(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: restartWitness}
	c, nc, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	tag := "restart-" + string(v)
	if o, err := once(ctx, c, "web-0", "cart", tag+"-new"); err != nil || !o.ok() {
		return obs, fmt.Errorf("web-0 → cart, the pair admitted before the restart: %d %s %v", o.Status, o.Err, err)
	}
	before, err := debugPairs(ctx, nc)
	if err != nil {
		return obs, err
	}
	skip, err := logLen(ctx, c, "node-a")
	if err != nil {
		return obs, err
	}
	toAPI, err := startStream(ctx, c, "api", tag, 50*time.Millisecond, false, "web-0", "batch-0")
	if err != nil {
		return obs, err
	}
	toCart, err := startStream(ctx, c, "cart", tag, 50*time.Millisecond, false, "web-0")
	if err != nil {
		toAPI.finish()
		return obs, err
	}
	started, err := restartAgent(ctx, nc)
	if err == nil {
		// Pacing, not a wait: the traffic runs a window and a timeout
		// past the restart, the span a prune would show in.
		time.Sleep(window + onDemandTimeout + time.Second)
		// The pre-#1073 rule's signature is a request failed once the
		// window pruned its twin: wait for it instead of trusting the
		// second's margin above on a loaded machine.
		if v == pruneUnfetched {
			err = awaitFailure(ctx, started, toAPI, toCart)
		}
	}
	out := toAPI.finish()
	out["web-0 → cart"] = toCart.finish()["web-0"]
	if err != nil {
		return obs, err
	}
	t := count(out, started)
	var lines []accessLine
	recorded := 0
	for svc, n := range map[string]int{"api": len(out["web-0"]) + len(out["batch-0"]), "cart": len(out["web-0 → cart"])} {
		ls, err := linesFor(ctx, c, "node-a", skip, svc, "", n)
		if err != nil {
			return obs, err
		}
		got, err := appRecorded(ctx, c, svc+"-0", svc, tag)
		if err != nil {
			return obs, err
		}
		lines, recorded = append(lines, ls...), recorded+got
	}
	after, err := debugPairs(ctx, nc)
	if err != nil {
		return obs, err
	}
	// The restarted agent counts from zero: all it counted is the case's.
	delta, err := readCounters(ctx, c)
	if err != nil {
		return obs, err
	}
	via := map[string]int{}
	nc503 := 0
	for _, l := range lines {
		via[l.Destination]++
		if l.nc() {
			nc503++
		}
	}
	obs.Evidence = restartEvidence{Client: t, Outbound: outcomes(lines), Via: via, NC: nc503, Recorded: recorded,
		Before: states(before), After: states(after), Agent: delta}
	obs.Summary = fmt.Sprintf("clients: %d sent, %d ok, failed %s (first %.0f ms after the restart); node-a's outbound %s via %s; api-0 and cart-0 recorded %d; pairs before %v, after %v; pruned %s, in use %v",
		t.Sent, t.OK, toJSON(t.Failed), t.FirstFailureMS, toJSON(outcomes(lines)), toJSON(via), recorded, states(before), states(after), toJSON(delta.Pruned), delta.PrunedLive)
	return obs, c.Check(ctx)
}

// restartAgent stops node-a's agent for 300 ms, 300 ms from now, starts
// it again and returns when the new one serves.
func restartAgent(ctx context.Context, nc *node.Cluster) (time.Time, error) {
	n := nc.Node("node-a")
	// Pacing, not a wait: the traffic runs a while before the stop.
	time.Sleep(300 * time.Millisecond)
	if err := nc.StopAgent(n); err != nil {
		return time.Time{}, err
	}
	// Pacing, not a wait: the agent stays down under the traffic.
	time.Sleep(300 * time.Millisecond)
	if err := nc.StartAgent(ctx, n); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// restartEvidence is agentRestart's evidence: the clients' tally,
// node-a's outbound lines by outcome and by the cluster routed to, the
// destination apps' records, node-a's pairs around the restart and what
// its agent counted.
type restartEvidence struct {
	Client   tally          `json:"client"`
	Outbound map[string]int `json:"outbound"`
	Via      map[string]int `json:"via"`
	NC       int            `json:"outbound_503_nc"`
	Recorded int            `json:"app_recorded"`
	Before   []string       `json:"pairs_before"`
	After    []string       `json:"pairs_after"`
	Agent    counters       `json:"agent"`
}

func readRestart(o redgreen.Observation) (restartEvidence, error) {
	f, err := redgreen.EvidenceOf[restartEvidence](o)
	if err != nil {
		return f, err
	}
	if f.Client.Sent == 0 {
		return f, errors.New("nothing observed: the clients sent no request")
	}
	return f, nil
}

var (
	sourcesToAPI = []string{twin("web", "api"), twin("batch", "api")}
	// restartPairs are the pairs agentRestart's traffic rides.
	restartPairs = append([]string{twin("web", "cart")}, sourcesToAPI...)
)

// checkRestartCarries: every request answered 200 over its twin and
// reached api-0, and the agent came back with the same pairs, pruning
// none.
func checkRestartCarries(o redgreen.Observation) error {
	f, err := readRestart(o)
	if err != nil {
		return err
	}
	if f.Client.OK != f.Client.Sent || f.NC != 0 {
		return fmt.Errorf("%d of %d requests failed (%v), %d of them 503 NC at node-a's outbound", f.Client.Sent-f.Client.OK, f.Client.Sent, f.Client.Failed, f.NC)
	}
	if f.Recorded != f.Client.Sent {
		return fmt.Errorf("api-0 and cart-0 recorded %d of the %d requests", f.Recorded, f.Client.Sent)
	}
	for cl, n := range f.Via {
		if !slices.Contains(restartPairs, cl) {
			return fmt.Errorf("node-a routed %d requests to %s, not to the pairs' twins %v", n, cl, restartPairs)
		}
	}
	if !slices.Equal(f.Before, f.After) {
		return fmt.Errorf("node-a's pairs changed across the restart: %v before, %v after", f.Before, f.After)
	}
	for _, tw := range restartPairs {
		if !slices.Contains(f.After, tw+"=live") {
			return fmt.Errorf("%s is not live after the restart: %v", tw, f.After)
		}
	}
	if p := f.Agent.prunedTotal(); p != 0 || f.Agent.PrunedLive != 0 {
		return fmt.Errorf("node-a's agent pruned %v pairs (%v of them in use)", p, f.Agent.PrunedLive)
	}
	return nil
}

// checkRestartPrunes: the pre-#1073 rule pruned the live twins and their
// requests failed 503 NC, after the restart, and never reached api-0.
func checkRestartPrunes(o redgreen.Observation) error {
	f, err := readRestart(o)
	if err != nil {
		return err
	}
	if f.NC == 0 {
		return fmt.Errorf("no 503 NC at node-a's outbound (clients: %d of %d ok)", f.Client.OK, f.Client.Sent)
	}
	if f.Client.FirstFailureMS <= 0 {
		return fmt.Errorf("the first failure came %.0f ms after the agent restart, not after it", f.Client.FirstFailureMS)
	}
	if f.Recorded != f.Client.OK {
		return fmt.Errorf("api-0 and cart-0 recorded %d requests, but the clients saw %d answered 200", f.Recorded, f.Client.OK)
	}
	if f.Agent.Pruned["test-only-unfetched-since-start"] < 1 {
		return fmt.Errorf("node-a's agent counted no prune by the pre-#1073 rule: %v", f.Agent.Pruned)
	}
	for _, tw := range restartPairs {
		if slices.Contains(f.Before, tw+"=live") && !slices.Contains(f.After, tw+"=live") {
			return nil
		}
	}
	return fmt.Errorf("no pair live before the restart is gone after it: %v before, %v after", f.Before, f.After)
}
