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
	obs := redgreen.Observation{Witness: migWitness}
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
	// Pacing, not a wait: the used pairs carry traffic through the
	// window, as a restarted agent's live pairs do.
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
	obs.Evidence = migrationEvidence{Fanout: fanout(), Used: used, Kept: kept, Stored: stored, Agent: delta, Client: t, WindowOpen: open == 1}
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

// migrationEvidence is migration's evidence: the persisted fan-out, the
// pairs node-b saw used, what node-a's /debug/pairs and state file keep
// after the window, what its agent counted, the clients' tally and
// whether the window was still open.
type migrationEvidence struct {
	Fanout     []string `json:"fanout"`
	Used       []string `json:"used"`
	Kept       []string `json:"kept"`
	Stored     []string `json:"state_file"`
	Agent      counters `json:"agent"`
	Client     tally    `json:"client"`
	WindowOpen bool     `json:"window_open"`
}

func readMigration(o redgreen.Observation) (migrationEvidence, error) {
	f, err := redgreen.EvidenceOf[migrationEvidence](o)
	if err != nil {
		return f, err
	}
	if len(f.Used) == 0 {
		return f, errors.New("nothing observed: no pair was used")
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
	if f.WindowOpen {
		return fmt.Errorf("node-a's agent had not closed its %s fetch window %s after the restart", window, window+migrationMargin)
	}
	if !slices.Equal(f.Kept, f.Used) || !slices.Equal(f.Stored, f.Used) {
		return fmt.Errorf("after the window node-a keeps %v (state file %v), want exactly the pairs used, %v", f.Kept, f.Stored, f.Used)
	}
	if want := float64(len(f.Fanout) - len(f.Used)); f.Agent.Pruned["fetch-window"] != want || f.Agent.prunedTotal() != want {
		return fmt.Errorf("node-a's agent pruned %v, want %v by the fetch window alone", f.Agent.Pruned, want)
	}
	if f.Agent.PrunedLive != 0 {
		return fmt.Errorf("node-a's agent pruned %v twins in use", f.Agent.PrunedLive)
	}
	if f.Client.OK != f.Client.Sent {
		return fmt.Errorf("%d of %d requests on the used pairs failed: %v", f.Client.Sent-f.Client.OK, f.Client.Sent, f.Client.Failed)
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
	if !f.WindowOpen {
		return errors.New("node-a's agent closed its fetch window within the case")
	}
	if len(f.Used) >= len(f.Fanout) {
		return fmt.Errorf("every fan-out pair was used (%v): nothing to prune", f.Used)
	}
	if !slices.Equal(f.Kept, f.Fanout) || !slices.Equal(f.Stored, f.Fanout) {
		return fmt.Errorf("node-a keeps %v (state file %v), want the whole fan-out %v", f.Kept, f.Stored, f.Fanout)
	}
	if p := f.Agent.prunedTotal(); p != 0 {
		return fmt.Errorf("node-a's agent pruned %v pairs", f.Agent.Pruned)
	}
	return nil
}
