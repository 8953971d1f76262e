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
	obs := redgreen.Observation{Witness: restartWitness, Facts: map[string]any{}}
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
	obs.Facts["client"], obs.Facts["outbound"], obs.Facts["via"] = t, outcomes(lines), via
	obs.Facts["outbound_503_nc"], obs.Facts["app_recorded"] = nc503, recorded
	obs.Facts["pairs_before"], obs.Facts["pairs_after"], obs.Facts["agent"] = states(before), states(after), delta
	obs.Summary = fmt.Sprintf("clients: %d sent, %d ok, failed %s (first %.0f ms after the restart); node-a's outbound %s via %s; api-0 and cart-0 recorded %d; pairs before %v, after %v; pruned %s, in use %v",
		t.Sent, t.OK, toJSON(t.Failed), t.FirstFailureMS, toJSON(outcomes(lines)), toJSON(via), recorded, states(before), states(after), toJSON(delta.Pruned), delta.PrunedLive)
	return obs, c.Check(ctx)
}

// restartAgent stops node-a's agent for 300 ms, 300 ms from now, starts
// it again and returns when the new one serves.
func restartAgent(ctx context.Context, nc *node.Cluster) (time.Time, error) {
	n := nc.Node("node-a")
	time.Sleep(300 * time.Millisecond)
	if err := nc.StopAgent(n); err != nil {
		return time.Time{}, err
	}
	time.Sleep(300 * time.Millisecond)
	if err := nc.StartAgent(ctx, n); err != nil {
		return time.Time{}, err
	}
	return time.Now(), nil
}

// restartFacts are agentRestart's facts, typed.
type restartFacts struct {
	client       tally
	nc, recorded int
	via          map[string]int
	before       []string
	after        []string
	agent        counters
}

func readRestart(o redgreen.Observation) (restartFacts, error) {
	var f restartFacts
	var ok [7]bool
	f.client, ok[0] = o.Facts["client"].(tally)
	f.nc, ok[1] = o.Facts["outbound_503_nc"].(int)
	f.recorded, ok[2] = o.Facts["app_recorded"].(int)
	f.via, ok[3] = o.Facts["via"].(map[string]int)
	f.before, ok[4] = o.Facts["pairs_before"].([]string)
	f.after, ok[5] = o.Facts["pairs_after"].([]string)
	f.agent, ok[6] = o.Facts["agent"].(counters)
	if slices.Contains(ok[:], false) || f.client.Sent == 0 {
		return f, errors.New("nothing observed")
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
	if f.client.OK != f.client.Sent || f.nc != 0 {
		return fmt.Errorf("%d of %d requests failed (%v), %d of them 503 NC at node-a's outbound", f.client.Sent-f.client.OK, f.client.Sent, f.client.Failed, f.nc)
	}
	if f.recorded != f.client.Sent {
		return fmt.Errorf("api-0 and cart-0 recorded %d of the %d requests", f.recorded, f.client.Sent)
	}
	for cl, n := range f.via {
		if !slices.Contains(restartPairs, cl) {
			return fmt.Errorf("node-a routed %d requests to %s, not to the pairs' twins %v", n, cl, restartPairs)
		}
	}
	if !slices.Equal(f.before, f.after) {
		return fmt.Errorf("node-a's pairs changed across the restart: %v before, %v after", f.before, f.after)
	}
	for _, tw := range restartPairs {
		if !slices.Contains(f.after, tw+"=live") {
			return fmt.Errorf("%s is not live after the restart: %v", tw, f.after)
		}
	}
	if p := f.agent.prunedTotal(); p != 0 || f.agent.PrunedLive != 0 {
		return fmt.Errorf("node-a's agent pruned %v pairs (%v of them in use)", p, f.agent.PrunedLive)
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
	if f.nc == 0 {
		return fmt.Errorf("no 503 NC at node-a's outbound (clients: %d of %d ok)", f.client.OK, f.client.Sent)
	}
	if f.client.FirstFailureMS <= 0 {
		return fmt.Errorf("the first failure came %.0f ms after the agent restart, not after it", f.client.FirstFailureMS)
	}
	if f.recorded != f.client.OK {
		return fmt.Errorf("api-0 and cart-0 recorded %d requests, but the clients saw %d answered 200", f.recorded, f.client.OK)
	}
	if f.agent.Pruned["test-only-unfetched-since-start"] < 1 {
		return fmt.Errorf("node-a's agent counted no prune by the pre-#1073 rule: %v", f.agent.Pruned)
	}
	for _, tw := range restartPairs {
		if slices.Contains(f.before, tw+"=live") && !slices.Contains(f.after, tw+"=live") {
			return nil
		}
	}
	return fmt.Errorf("no pair live before the restart is gone after it: %v before, %v after", f.before, f.after)
}
