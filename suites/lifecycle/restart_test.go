package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

// restarter restarts node n's proxy under the prober s.
type restarter struct {
	name string
	run  func(nc *node.Cluster, ctx context.Context, n *node.Node, s *stream) error
}

var (
	hot = restarter{"hot restart", func(nc *node.Cluster, ctx context.Context, n *node.Node, _ *stream) error {
		return nc.HotRestartProxy(ctx, n)
	}}
	// cold holds the gap open until the prober lost a probe sent into
	// it: a control's loss must not depend on a probe happening to land
	// in the few milliseconds a new proxy may take to start.
	cold = restarter{"cold restart (kill -9, then a new proxy)", func(nc *node.Cluster, ctx context.Context, n *node.Node, s *stream) error {
		return nc.ColdRestartProxyHolding(ctx, n, s.lostSince)
	}}
)

// gapWait bounds how long a control waits for its witness to see the
// loss it must show (a probe refused in a held gap, a request failed
// after a prune); it bounds a stalled rig, not a speed.
const gapWait = 30 * time.Second

// lostSince is a hold: it returns once a probe sent after it began has
// failed.
func (s *stream) lostSince(ctx context.Context) error {
	return awaitFailure(ctx, time.Now(), s)
}

// awaitFailure returns once one of ss has a request sent at or after
// since that failed, or an error once gapWait has passed.
func awaitFailure(ctx context.Context, since time.Time, ss ...*stream) error {
	deadline := time.Now().Add(gapWait)
	for !slices.ContainsFunc(ss, func(s *stream) bool { return s.failedSince(since) }) {
		if time.Now().After(deadline) {
			return fmt.Errorf("no request sent since %s failed within %s", since.Format(time.StampMilli), gapWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

func (s *stream) failedSince(since time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, outs := range s.out {
		for _, o := range outs {
			if !o.At.Before(since) && !o.ok() {
				return true
			}
		}
	}
	return false
}

// probeEvery is the liveness prober's interval: a new connection from
// web-0 to api through node-a's proxy each time, answered within
// probeDeadline or lost.
const probeEvery = 20 * time.Millisecond

const probeWitness = "the prober's per-probe results (a new connection each), api-0's record of the probes, node-a's proxy process ids and logs, node-a's /debug/pairs and prune counters, node-a's access log and node-b's inbound for the first use after"

// probed is what a prober saw across an event, and what the destination
// recorded of it.
type probed struct {
	Tally    tally `json:"probes"`
	Recorded int   `json:"api_recorded"`
}

// probeAcross runs the prober from web-0 while event runs, from 300 ms
// before it to 500 ms after.
func probeAcross(ctx context.Context, r *rig, v variant, tag string, event func(s *stream) error) (probed, error) {
	c, _, err := r.cluster(ctx, v)
	if err != nil {
		return probed{}, err
	}
	s, err := startProber(ctx, c, "api", tag, probeEvery, "web-0")
	if err != nil {
		return probed{}, err
	}
	// Pacing, not polls: the prober runs a while before the event and
	// after it, so the count spans both sides of it.
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	err = event(s)
	time.Sleep(500 * time.Millisecond)
	t := count(s.finish(), start)
	if err != nil {
		return probed{}, err
	}
	recorded, err := appRecorded(ctx, c, "api-0", "api", tag)
	return probed{Tally: t, Recorded: recorded}, err
}

// proxyRestart makes cron's pair dormant (used, then cron's only pod
// leaves), restarts node-a's proxy under the prober, and reads the pairs
// and the first use of batch's pair after.
func proxyRestart(ctx context.Context, r *rig, v variant, how restarter) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: probeWitness}
	c, nc, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	n := nc.Node("node-a")
	dormant, err := makeDormant(ctx, r, v, "cron-0")
	if err != nil {
		return obs, err
	}
	cnt0, err := readCounters(ctx, c)
	if err != nil {
		return obs, err
	}
	pid0 := n.ProxyPID()
	p, err := probeAcross(ctx, r, v, "hotrestart-"+string(v), func(s *stream) error { return how.run(nc, ctx, n, s) })
	if err != nil {
		return obs, err
	}
	first, err := firstUse(ctx, r, v, "batch-0", "first-"+string(v))
	if err != nil {
		return obs, err
	}
	after, err := debugPairs(ctx, nc)
	if err != nil {
		return obs, err
	}
	cnt1, err := readCounters(ctx, c)
	if err != nil {
		return obs, err
	}
	crashes, err := proxyCrashes(nc)
	if err != nil {
		return obs, err
	}
	delta := cnt1.since(cnt0)
	obs.Evidence = proxyRestartEvidence{Probe: p, Dormant: dormant, After: states(after), First: first,
		Agent: delta, Crashes: crashes, Changed: n.ProxyPID() != pid0}
	obs.Summary = fmt.Sprintf("%s of node-a's proxy (pid %d → %d): prober %d sent, %d ok (slowest %.0f ms), failed %s, api-0 recorded %d; %s was %q before; after: pairs %v, pruned %s, in use %v, admitted %v; batch's first use %s; crash lines in the proxy logs: %v",
		how.name, pid0, n.ProxyPID(), p.Tally.Sent, p.Tally.OK, p.Tally.SlowestOKMS, toJSON(p.Tally.Failed), p.Recorded, twin("cron", "api"), dormant, states(after), toJSON(delta.Pruned), delta.PrunedLive, delta.Admitted, first, crashes)
	return obs, c.Check(ctx)
}

// makeDormant sends one request of pod's account to api, takes pod (its
// account's only pod on node-a) off the node and returns its pair's
// state once it is no longer live.
func makeDormant(ctx context.Context, r *rig, v variant, pod string) (string, error) {
	c, nc, err := r.cluster(ctx, v)
	if err != nil {
		return "", err
	}
	if o, err := once(ctx, c, pod, "api", "dormant-"+string(v)); err != nil || !o.ok() {
		return "", fmt.Errorf("%s → api before it left: %d %s %v", pod, o.Status, o.Err, err)
	}
	if _, err := nc.RemovePod(ctx, nc.Pod(namespace, pod)); err != nil {
		return "", err
	}
	return waitPairState(ctx, nc, twin(strings.TrimSuffix(pod, "-0"), "api"), "dormant", "")
}

// use is one request's path as its witnesses saw it.
type use struct {
	Status, Flags, Via string
	Inbound            map[string]int
}

func (u use) String() string {
	return fmt.Sprintf("%s %q via %s, node-b saw %s", u.Status, u.Flags, u.Via, toJSON(u.Inbound))
}

// firstUse sends one request from pod to api and reads node-a's outbound
// line and node-b's inbound lines for it.
func firstUse(ctx context.Context, r *rig, v variant, pod, tag string) (use, error) {
	c, _, err := r.cluster(ctx, v)
	if err != nil {
		return use{}, err
	}
	skipA, err := logLen(ctx, c, "node-a")
	if err != nil {
		return use{}, err
	}
	skipB, err := logLen(ctx, c, "node-b")
	if err != nil {
		return use{}, err
	}
	if _, err := once(ctx, c, pod, "api", tag); err != nil {
		return use{}, err
	}
	out, err := linesFor(ctx, c, "node-a", skipA, "api", spiffeID(strings.TrimSuffix(pod, "-0")), 1)
	if err != nil {
		return use{}, err
	}
	if len(out) != 1 {
		return use{}, fmt.Errorf("node-a's access log has %d lines for %s's request, want 1", len(out), pod)
	}
	in, err := linesFor(ctx, c, "node-b", skipB, "api", "", 1)
	if err != nil {
		return use{}, err
	}
	return use{Status: out[0].Status, Flags: out[0].Flags, Via: out[0].Destination, Inbound: inboundPeers(in)}, nil
}

// proxyCrashes counts the lines of node-a's proxy logs (every epoch's)
// that report a crash: a Go panic or fatal error, or an exit other than
// the parent's after a hot restart.
func proxyCrashes(nc *node.Cluster) (int, error) {
	files, err := filepath.Glob(filepath.Join(nc.RunDir, "logs", "proxy~node-a*.log"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no proxy log of node-a under %s (err %v)", nc.RunDir, err)
	}
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
				n++
			}
		}
	}
	return n, nil
}

// proxyRestartEvidence is proxyRestart's evidence: the prober's tally
// and api-0's record of it, the dormant pair's state before, node-a's
// pairs after, batch's first use after, what node-a's agent counted,
// the crash lines in the proxy's logs and whether its process changed.
type proxyRestartEvidence struct {
	Probe   probed   `json:"prober"`
	Dormant string   `json:"dormant_before"`
	After   []string `json:"pairs_after"`
	First   use      `json:"first_use"`
	Agent   counters `json:"agent"`
	Crashes int      `json:"proxy_crashes"`
	Changed bool     `json:"proxy_pid_changed"`
}

func readProxyRestart(o redgreen.Observation) (proxyRestartEvidence, error) {
	f, err := redgreen.EvidenceOf[proxyRestartEvidence](o)
	if err != nil {
		return f, err
	}
	if f.Probe.Tally.Sent == 0 {
		return f, errors.New("nothing observed: the prober sent nothing")
	}
	return f, nil
}

// checkNoGap: every probe across the restart was answered 200 and reached
// api-0.
func checkNoGap(p probed) error {
	if p.Tally.OK != p.Tally.Sent || p.Recorded != p.Tally.Sent {
		return fmt.Errorf("%d of %d probes failed (%v); api-0 recorded %d", p.Tally.Sent-p.Tally.OK, p.Tally.Sent, p.Tally.Failed, p.Recorded)
	}
	return nil
}

// checkGap: some probes across the restart were lost, and api-0, which
// records every probe that reached it, misses some too.
func checkGap(p probed) error {
	if p.Tally.OK == p.Tally.Sent {
		return fmt.Errorf("all %d probes answered 200: no gap", p.Tally.Sent)
	}
	if p.Recorded >= p.Tally.Sent {
		return fmt.Errorf("api-0 recorded %d of the %d probes: none was lost on the way", p.Recorded, p.Tally.Sent)
	}
	return nil
}

// checkHotRestart: a new proxy generation with no gap and no crash, the
// dormant pair pruned (no fresh stream re-subscribes it), the live ones
// kept and batch's answering its first use over its twin.
func checkHotRestart(o redgreen.Observation) error {
	f, err := readProxyRestart(o)
	if err != nil {
		return err
	}
	if !f.Changed {
		return errors.New("node-a's proxy has the same process id after the restart")
	}
	if err := checkNoGap(f.Probe); err != nil {
		return err
	}
	if f.Crashes != 0 {
		return fmt.Errorf("node-a's proxy logs report %d crashes", f.Crashes)
	}
	cron := twin("cron", "api")
	if f.Dormant != "dormant" || slices.ContainsFunc(f.After, func(s string) bool { return strings.HasPrefix(s, cron+"=") }) {
		return fmt.Errorf("%s was %q before the restart and %v after, want dormant, then pruned", cron, f.Dormant, f.After)
	}
	if f.Agent.Pruned["not-resubscribed"] < 1 || f.Agent.PrunedLive != 0 {
		return fmt.Errorf("node-a's agent pruned %v (%v in use), want the dormant pair as not re-subscribed", f.Agent.Pruned, f.Agent.PrunedLive)
	}
	for _, tw := range sourcesToAPI {
		if !slices.Contains(f.After, tw+"=live") {
			return fmt.Errorf("%s is not live after the restart: %v", tw, f.After)
		}
	}
	batch := twin("batch", "api")
	if f.First.Status != "200" || f.First.Via != batch || f.First.Inbound["HTTP/3.0 "+spiffeID("batch")] != 1 {
		return fmt.Errorf("batch's first use after the restart: %s, want 200 via %s over HTTP/3.0", f.First, batch)
	}
	return nil
}

// checkColdRestartGap: the restart left a gap.
func checkColdRestartGap(o redgreen.Observation) error {
	f, err := readProxyRestart(o)
	if err != nil {
		return err
	}
	return checkGap(f.Probe)
}

// restartInside restarts node-a's proxy with its agent down from before
// the new proxy starts until 500 ms after (#1085), under the prober.
func restartInside(ctx context.Context, r *rig, v variant, how restarter) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "the prober's per-probe results (a new connection each), api-0's record of the probes, node-a's proxy process ids"}
	c, nc, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	n := nc.Node("node-a")
	pid0 := n.ProxyPID()
	p, err := probeAcross(ctx, r, v, "inside-"+string(v), func(s *stream) error {
		if err := nc.StopAgent(n); err != nil {
			return err
		}
		done := make(chan error, 1)
		go func() { done <- how.run(nc, ctx, n, s) }()
		// Pacing: the agent stays down while the proxy restarts.
		time.Sleep(500 * time.Millisecond)
		return errors.Join(nc.StartAgent(ctx, n), <-done)
	})
	if err != nil {
		return obs, err
	}
	obs.Evidence = insideEvidence{Probe: p, Changed: n.ProxyPID() != pid0}
	obs.Summary = fmt.Sprintf("%s of node-a's proxy (pid %d → %d) with node-a's agent down from before it to 500 ms into it: prober %d sent, %d ok (slowest %.0f ms), failed %s; api-0 recorded %d",
		how.name, pid0, n.ProxyPID(), p.Tally.Sent, p.Tally.OK, p.Tally.SlowestOKMS, toJSON(p.Tally.Failed), p.Recorded)
	return obs, c.Check(ctx)
}

// insideEvidence is restartInside's evidence: the prober's tally and
// api-0's record of it, and whether node-a's proxy process changed.
type insideEvidence struct {
	Probe   probed `json:"prober"`
	Changed bool   `json:"proxy_pid_changed"`
}

func readInside(o redgreen.Observation) (probed, error) {
	f, err := redgreen.EvidenceOf[insideEvidence](o)
	if err != nil {
		return f.Probe, err
	}
	if f.Probe.Tally.Sent == 0 {
		return f.Probe, errors.New("nothing observed: the prober sent nothing")
	}
	if !f.Changed {
		return f.Probe, errors.New("node-a's proxy has the same process id after the restart")
	}
	return f.Probe, nil
}

func checkInsideNoLoss(o redgreen.Observation) error {
	p, err := readInside(o)
	if err != nil {
		return err
	}
	return checkNoGap(p)
}

func checkInsideLoss(o redgreen.Observation) error {
	p, err := readInside(o)
	if err != nil {
		return err
	}
	return checkGap(p)
}
