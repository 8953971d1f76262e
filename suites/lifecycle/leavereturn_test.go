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
	obs := redgreen.Observation{Witness: returnWitness}
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
	admitted := cnt1.since(cnt0).Admitted
	obs.Evidence = returnEvidence{Twin: tw, Source: spiffeID(sa),
		Status: l.Status, Flags: l.Flags, DurationMS: l.DurationMS, Via: l.Destination,
		Inbound: inboundPeers(in), Recorded: recorded,
		Away: away, Before: states(before), After: states(after),
		Admitted: admitted, IPBefore: ipBefore, IPAfter: p.IP.String()}
	obs.Summary = fmt.Sprintf("%s (%s → %s): pair %q while away; first request after the return: %s %q in %.0f ms via %s (client: %d %s); node-b saw %s; api-0 recorded %d; admitted %v; pairs before %v, after %v",
		pod, ipBefore, p.IP, away, l.Status, l.Flags, l.DurationMS, l.Destination, o.Status, o.Err, toJSON(inboundPeers(in)), recorded, admitted, states(before), states(after))
	return obs, c.Check(ctx)
}

// returnEvidence is leaveReturn's evidence: the pair, node-a's outbound
// line for the first request after the return, node-b's inbound lines
// for it, api-0's record, the pair's state while away, node-a's pairs
// around the departure, its admissions and the pod's address before and
// after.
type returnEvidence struct {
	Twin       string         `json:"twin"`
	Source     string         `json:"source"`
	Status     string         `json:"status"`
	Flags      string         `json:"flags"`
	DurationMS float64        `json:"duration_ms"`
	Via        string         `json:"via"`
	Inbound    map[string]int `json:"inbound"`
	Recorded   int            `json:"api_recorded"`
	Away       string         `json:"state_away"`
	Before     []string       `json:"pairs_before"`
	After      []string       `json:"pairs_after"`
	Admitted   float64        `json:"admitted"`
	IPBefore   string         `json:"ip_before"`
	IPAfter    string         `json:"ip_after"`
}

func readReturn(o redgreen.Observation) (returnEvidence, error) {
	f, err := redgreen.EvidenceOf[returnEvidence](o)
	if err != nil {
		return f, err
	}
	if f.Twin == "" || f.Status == "" {
		return f, errors.New("nothing observed: no pair or no outbound line")
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
	if f.Away != "dormant" {
		return fmt.Errorf("%s was %q while its source was away, want dormant", f.Twin, f.Away)
	}
	if f.Status != "200" || f.DurationMS >= timeoutMS || f.Via != f.Twin {
		return fmt.Errorf("node-a's outbound answered %s %q after %.0f ms via %s, want 200 via %s before the %.0f ms on-demand timeout", f.Status, f.Flags, f.DurationMS, f.Via, f.Twin, timeoutMS)
	}
	if n := f.Inbound["HTTP/3.0 "+f.Source]; n != 1 || len(f.Inbound) != 1 || f.Recorded != 1 {
		return fmt.Errorf("node-b's inbound saw %s and api-0 recorded %d, want one HTTP/3.0 request from %s", toJSON(f.Inbound), f.Recorded, f.Source)
	}
	if f.Admitted != 0 {
		return fmt.Errorf("node-a's agent admitted %v twins: the request fetched on demand", f.Admitted)
	}
	// The departure may drop pairs the proxy never subscribed to (they
	// cannot go dormant), but the return makes none.
	if !slices.Contains(f.After, f.Twin+"=live") {
		return fmt.Errorf("%s is not live after the return: %v", f.Twin, f.After)
	}
	for _, p := range f.After {
		if !slices.Contains(f.Before, p) {
			return fmt.Errorf("node-a has pair %s after the return that it did not have before the departure (%v)", p, f.Before)
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
	if f.Away != "" {
		return fmt.Errorf("%s was %q while its source was away, want dropped", f.Twin, f.Away)
	}
	if f.Status != "503" || !strings.Contains(f.Flags, "NC") || f.DurationMS < timeoutMS {
		return fmt.Errorf("node-a's outbound answered %s %q after %.0f ms, want 503 NC at the %.0f ms on-demand timeout", f.Status, f.Flags, f.DurationMS, timeoutMS)
	}
	if f.Recorded != 0 || f.Admitted != 0 {
		return fmt.Errorf("api-0 recorded %d requests and node-a's agent admitted %v twins, want none", f.Recorded, f.Admitted)
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
	if f.IPAfter != recreatedIP || f.IPBefore == f.IPAfter {
		return fmt.Errorf("the pod was at %s before and %s after, want re-created at %s", f.IPBefore, f.IPAfter, recreatedIP)
	}
	return checkReturnServes(o)
}
