package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
)

// recreatedIP is web-0's address once re-created (E5): in node-a's /24,
// used by no other pod.
const recreatedIP = "10.244.1.20"

// leaveReturn takes pod, its account's only pod on node-a, off the node
// (CNI DEL, gone from the registry) after its pair to api carried a
// request, brings it back (on newIP when given: re-created) and reads
// what its first request after the return met.
func leaveReturn(ctx context.Context, r *rig, v variant, pod, newIP string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: returnWitness, Facts: map[string]any{}}
	c, nc, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	sa := strings.TrimSuffix(pod, "-0")
	tw := twin(sa, "api")
	tag := "return-" + string(v) + "-" + sa
	if o, err := once(ctx, c, pod, "api", tag+"-before"); err != nil || !o.ok() {
		return obs, fmt.Errorf("%s → api before it left: %d %s %v", pod, o.Status, o.Err, err)
	}
	before, err := debugPairs(ctx, nc)
	if err != nil {
		return obs, err
	}
	cnt0, err := readCounters(ctx, c)
	if err != nil {
		return obs, err
	}
	p := nc.Pod(namespace, pod)
	ipBefore := p.IP.String()
	entry, err := nc.RemovePod(ctx, p)
	if err != nil {
		return obs, err
	}
	away, err := waitPairState(ctx, nc, tw, "dormant", "")
	if err != nil {
		return obs, err
	}
	if newIP != "" {
		entry.IP = newIP
	}
	if err := nc.ReturnPod(ctx, p, entry); err != nil {
		return obs, err
	}
	if err := nc.WaitProxyReady(ctx, nc.Node("node-a"), 30*time.Second); err != nil {
		return obs, err
	}
	skipA, err := logLen(ctx, c, "node-a")
	if err != nil {
		return obs, err
	}
	skipB, err := logLen(ctx, c, "node-b")
	if err != nil {
		return obs, err
	}
	o, err := once(ctx, c, pod, "api", tag)
	if err != nil {
		return obs, err
	}
	out, err := linesFor(ctx, c, "node-a", skipA, "api", spiffeID(sa), 1)
	if err != nil {
		return obs, err
	}
	if len(out) != 1 {
		return obs, fmt.Errorf("node-a's access log has %d lines for %s's request, want 1", len(out), pod)
	}
	in, err := linesFor(ctx, c, "node-b", skipB, "api", "", 1)
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
	recorded, err := appRecorded(ctx, c, "api-0", "api", tag)
	if err != nil {
		return obs, err
	}
	l := out[0]
	obs.Facts["twin"], obs.Facts["source"] = tw, spiffeID(sa)
	obs.Facts["status"], obs.Facts["flags"], obs.Facts["duration_ms"], obs.Facts["via"] = l.Status, l.Flags, l.DurationMS, l.Destination
	obs.Facts["inbound"], obs.Facts["api_recorded"] = inboundPeers(in), recorded
	obs.Facts["state_away"], obs.Facts["pairs_before"], obs.Facts["pairs_after"] = away, states(before), states(after)
	obs.Facts["admitted"] = cnt1.since(cnt0).Admitted
	obs.Facts["ip_before"], obs.Facts["ip_after"] = ipBefore, p.IP.String()
	obs.Summary = fmt.Sprintf("%s (%s → %s): pair %q while away; first request after the return: %s %q in %.0f ms via %s (client: %d %s); node-b saw %s; api-0 recorded %d; admitted %v; pairs before %v, after %v",
		pod, ipBefore, p.IP, away, l.Status, l.Flags, l.DurationMS, l.Destination, o.Status, o.Err, toJSON(inboundPeers(in)), recorded, obs.Facts["admitted"], states(before), states(after))
	return obs, c.Check(ctx)
}

// returnFacts are leaveReturn's facts, typed.
type returnFacts struct {
	twin, source, status, flags, via, away string
	ipBefore, ipAfter                      string
	dur, admitted                          float64
	recorded                               int
	inbound                                map[string]int
	before, after                          []string
}

func readReturn(o redgreen.Observation) (returnFacts, error) {
	var f returnFacts
	var ok [14]bool
	f.twin, ok[0] = o.Facts["twin"].(string)
	f.source, ok[1] = o.Facts["source"].(string)
	f.status, ok[2] = o.Facts["status"].(string)
	f.flags, ok[3] = o.Facts["flags"].(string)
	f.via, ok[4] = o.Facts["via"].(string)
	f.away, ok[5] = o.Facts["state_away"].(string)
	f.dur, ok[6] = o.Facts["duration_ms"].(float64)
	f.admitted, ok[7] = o.Facts["admitted"].(float64)
	f.recorded, ok[8] = o.Facts["api_recorded"].(int)
	f.inbound, ok[9] = o.Facts["inbound"].(map[string]int)
	f.before, ok[10] = o.Facts["pairs_before"].([]string)
	f.after, ok[11] = o.Facts["pairs_after"].([]string)
	f.ipBefore, ok[12] = o.Facts["ip_before"].(string)
	f.ipAfter, ok[13] = o.Facts["ip_after"].(string)
	if slices.Contains(ok[:], false) {
		return f, errors.New("nothing observed")
	}
	return f, nil
}

const timeoutMS = float64(onDemandTimeout / time.Millisecond)

// checkReturnServes: the pair went dormant, came back with the pod, and
// its first request was answered over the twin at once, as the source's
// own identity, with nothing fetched or admitted.
func checkReturnServes(o redgreen.Observation) error {
	f, err := readReturn(o)
	if err != nil {
		return err
	}
	if f.away != "dormant" {
		return fmt.Errorf("%s was %q while its source was away, want dormant", f.twin, f.away)
	}
	if f.status != "200" || f.dur >= timeoutMS || f.via != f.twin {
		return fmt.Errorf("node-a's outbound answered %s %q after %.0f ms via %s, want 200 via %s before the %.0f ms on-demand timeout", f.status, f.flags, f.dur, f.via, f.twin, timeoutMS)
	}
	if n := f.inbound["HTTP/3.0 "+f.source]; n != 1 || len(f.inbound) != 1 || f.recorded != 1 {
		return fmt.Errorf("node-b's inbound saw %s and api-0 recorded %d, want one HTTP/3.0 request from %s", toJSON(f.inbound), f.recorded, f.source)
	}
	if f.admitted != 0 {
		return fmt.Errorf("node-a's agent admitted %v twins: the request fetched on demand", f.admitted)
	}
	// The departure may drop pairs the proxy never subscribed to (they
	// cannot go dormant), but the return makes none.
	if !slices.Contains(f.after, f.twin+"=live") {
		return fmt.Errorf("%s is not live after the return: %v", f.twin, f.after)
	}
	for _, p := range f.after {
		if !slices.Contains(f.before, p) {
			return fmt.Errorf("node-a has pair %s after the return that it did not have before the departure (%v)", p, f.before)
		}
	}
	return nil
}

// checkReturnFails: the pair was dropped while its source was away, and
// the first request after the return waited out the on-demand timeout
// for a name the proxy did not ask for again.
func checkReturnFails(o redgreen.Observation) error {
	f, err := readReturn(o)
	if err != nil {
		return err
	}
	if f.away != "" {
		return fmt.Errorf("%s was %q while its source was away, want dropped", f.twin, f.away)
	}
	if f.status != "503" || !strings.Contains(f.flags, "NC") || f.dur < timeoutMS {
		return fmt.Errorf("node-a's outbound answered %s %q after %.0f ms, want 503 NC at the %.0f ms on-demand timeout", f.status, f.flags, f.dur, timeoutMS)
	}
	if f.recorded != 0 || f.admitted != 0 {
		return fmt.Errorf("api-0 recorded %d requests and node-a's agent admitted %v twins, want none", f.recorded, f.admitted)
	}
	return nil
}

// checkRecreatedServes: checkReturnServes, for a pod that came back on a
// new IP.
func checkRecreatedServes(o redgreen.Observation) error {
	f, err := readReturn(o)
	if err != nil {
		return err
	}
	if f.ipAfter != recreatedIP || f.ipBefore == f.ipAfter {
		return fmt.Errorf("the pod was at %s before and %s after, want re-created at %s", f.ipBefore, f.ipAfter, recreatedIP)
	}
	return checkReturnServes(o)
}
