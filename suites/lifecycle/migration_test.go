package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
)

// migrationMargin is how long after the window the case reads the
// agent's pairs at the latest: the prune runs when the window ends.
const migrationMargin = 5 * time.Second

// fanout is rev245's persisted up-front fan-out on node-a: every local
// account × every destination.
func fanout() []string {
	var out []string
	for _, sa := range []string{"web", "batch", "cron"} {
		for _, svc := range []string{"api", "cart"} {
			out = append(out, twin(sa, svc))
		}
	}
	slices.Sort(out)
	return out
}

// migration restarts node-a's agent onto the persisted fan-out, sends
// traffic on the pairs used so far through the window, and reads the
// agent's pairs, state file and prune counters once the window is over.
func migration(ctx context.Context, r *rig, v variant) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: migWitness, Facts: map[string]any{}}
	c, nc, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	used, err := usedPairs(ctx, r, v)
	if err != nil {
		return obs, err
	}
	n := nc.Node("node-a")
	if err := nc.StopAgent(n); err != nil {
		return obs, err
	}
	if err := writeState(nc, persisted{Pairs: fanout(), Dormant: []string{}}); err != nil {
		return obs, err
	}
	if err := nc.StartAgent(ctx, n); err != nil {
		return obs, err
	}
	started := time.Now()
	tag := "migration-" + string(v)
	s, err := startStream(ctx, c, "api", tag, 200*time.Millisecond, false, "web-0", "batch-0")
	if err != nil {
		return obs, err
	}
	time.Sleep(window + time.Second)
	t := count(s.finish(), started)
	// The agent says when the window's prunes are done; with a window
	// longer than the case it is still open at the deadline.
	var open float64
	if _, err := wait.Until(ctx, time.Until(started.Add(window+migrationMargin)), 200*time.Millisecond, func() (done bool, err error) {
		open, err = agentMetric(ctx, c, mWindowOpen, nil)
		return open == 0, err
	}); err != nil {
		return obs, err
	}
	pairs, err := debugPairs(ctx, nc)
	if err != nil {
		return obs, err
	}
	state, err := readState(nc)
	if err != nil {
		return obs, err
	}
	// The restarted agent counts from zero: all it counted is the case's.
	delta, err := readCounters(ctx, c)
	if err != nil {
		return obs, err
	}
	kept := slices.Sorted(func(yield func(string) bool) {
		for k := range pairs {
			if !yield(k) {
				return
			}
		}
	})
	stored := slices.Sorted(slices.Values(append(slices.Clone(state.Pairs), state.Dormant...)))
	obs.Facts["fanout"], obs.Facts["used"], obs.Facts["kept"], obs.Facts["state_file"] = fanout(), used, kept, stored
	obs.Facts["agent"], obs.Facts["client"], obs.Facts["window_open"] = delta, t, open == 1
	obs.Summary = fmt.Sprintf("fan-out of %d persisted; node-b saw %v carry traffic; %.1f s after the restart (window open: %v) /debug/pairs keeps %v, the state file %v; pruned %s, in use %v; clients %d sent, %d ok, failed %s",
		len(fanout()), used, time.Since(started).Seconds(), open == 1, kept, stored, toJSON(delta.Pruned), delta.PrunedLive, t.Sent, t.OK, toJSON(t.Failed))
	return obs, c.Check(ctx)
}

// usedPairs is the pairs node-b's inbound saw carry HTTP/3 traffic in the
// cluster's life: the destination's record of use, not the agent's.
func usedPairs(ctx context.Context, r *rig, v variant) ([]string, error) {
	c, _, err := r.cluster(ctx, v)
	if err != nil {
		return nil, err
	}
	lines, err := accessLines(ctx, c, "node-b")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, l := range lines {
		sa, ok := strings.CutPrefix(l.Source, spiffeID(""))
		svc, _, _ := strings.Cut(l.Authority, ".")
		if ok && l.Protocol == "HTTP/3.0" {
			seen[twin(sa, svc)] = true
		}
	}
	if len(seen) == 0 {
		return nil, errors.New("node-b's inbound saw no HTTP/3 traffic: no pair was used")
	}
	return sortedKeys(seen), nil
}

type migrationFacts struct {
	fanout, used, kept, stored []string
	agent                      counters
	client                     tally
	windowOpen                 bool
}

func readMigration(o redgreen.Observation) (migrationFacts, error) {
	var f migrationFacts
	var ok [7]bool
	f.fanout, ok[0] = o.Facts["fanout"].([]string)
	f.used, ok[1] = o.Facts["used"].([]string)
	f.kept, ok[2] = o.Facts["kept"].([]string)
	f.stored, ok[3] = o.Facts["state_file"].([]string)
	f.agent, ok[4] = o.Facts["agent"].(counters)
	f.client, ok[5] = o.Facts["client"].(tally)
	f.windowOpen, ok[6] = o.Facts["window_open"].(bool)
	if slices.Contains(ok[:], false) || len(f.used) == 0 {
		return f, errors.New("nothing observed")
	}
	return f, nil
}

// checkMigrated: the fan-out shrank to the pairs used, in memory and on
// disk, by the window's prunes alone, and no twin in use went.
func checkMigrated(o redgreen.Observation) error {
	f, err := readMigration(o)
	if err != nil {
		return err
	}
	if f.windowOpen {
		return fmt.Errorf("node-a's agent had not closed its %s fetch window %s after the restart", window, window+migrationMargin)
	}
	if !slices.Equal(f.kept, f.used) || !slices.Equal(f.stored, f.used) {
		return fmt.Errorf("after the window node-a keeps %v (state file %v), want exactly the pairs used, %v", f.kept, f.stored, f.used)
	}
	if want := float64(len(f.fanout) - len(f.used)); f.agent.Pruned["fetch-window"] != want || f.agent.prunedTotal() != want {
		return fmt.Errorf("node-a's agent pruned %v, want %v by the fetch window alone", f.agent.Pruned, want)
	}
	if f.agent.PrunedLive != 0 {
		return fmt.Errorf("node-a's agent pruned %v twins in use", f.agent.PrunedLive)
	}
	if f.client.OK != f.client.Sent {
		return fmt.Errorf("%d of %d requests on the used pairs failed: %v", f.client.Sent-f.client.OK, f.client.Sent, f.client.Failed)
	}
	return nil
}

// checkFanoutKept: with a window longer than the case every fan-out pair
// is still there, in memory and on disk, though fewer were used.
func checkFanoutKept(o redgreen.Observation) error {
	f, err := readMigration(o)
	if err != nil {
		return err
	}
	if !f.windowOpen {
		return errors.New("node-a's agent closed its fetch window within the case")
	}
	if len(f.used) >= len(f.fanout) {
		return fmt.Errorf("every fan-out pair was used (%v): nothing to prune", f.used)
	}
	if !slices.Equal(f.kept, f.fanout) || !slices.Equal(f.stored, f.fanout) {
		return fmt.Errorf("node-a keeps %v (state file %v), want the whole fan-out %v", f.kept, f.stored, f.fanout)
	}
	if p := f.agent.prunedTotal(); p != 0 {
		return fmt.Errorf("node-a's agent pruned %v pairs", f.agent.Pruned)
	}
	return nil
}
