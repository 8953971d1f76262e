package eastwest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// onDemandTimeout is the on_demand filter's ODCDS timeout the agent
// configures (2 s): a fetch nobody answers fails when it runs out.
const onDemandTimeout = 2000.0

const ondemandWitness = "node-a's proxy access log (status, response flags, duration), node-a's agent counters, the destination app's record; never the client"

// onDemandCases are the refused pair and the twin added after its base
// cluster, each with its control.
func onDemandCases(r *rig) []redgreen.Case {
	refusedExpect := fmt.Sprintf("web-0's request to cart is 503 with flag NC at node-a's outbound; node-a's agent counts one refusal (reason %s); cart-0 records nothing", agent.RefusedTestOnly)
	return []redgreen.Case{
		{
			Name: "refusal-unanswered", Role: redgreen.Control,
			Description: "the agent refuses web's twin of cart but, like Envoy's LinearCache, leaves the name unanswered (aether-agent --test-only-unanswered-refusals)",
			Expect:      refusedExpect + ", after the 2 s on-demand timeout",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return onDemand(ctx, r, controls, "web-0") },
			Check:       func(o redgreen.Observation) error { return checkFailedNC(o, 0, true) },
		},
		{
			Name: "refused-pair-503-nc", Role: redgreen.Subject,
			Description: "the agent refuses web's twin of cart (aether-agent --test-only-refuse-twin: every routed pair is admissible in a consistent snapshot) and states the name absent",
			Expect:      refusedExpect + ", well before the 2 s on-demand timeout",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return onDemand(ctx, r, refusing, "web-0") },
			Check:       func(o redgreen.Observation) error { return checkFailedNC(o, 0, false) },
		},
		{
			Name: "twin-shares-base-eds-stalls", Role: redgreen.Control,
			Description: "batch's twin of cart is admitted after h2:cart.demo (its base) was subscribed at bring-up, but names the base's EDS resource (aether-agent --test-only-twin-shares-base-eds, #1008)",
			Expect:      "node-a's agent admits the twin, yet batch-0's request is 503 with flag NC after the 2 s on-demand timeout: the twin never warms; cart-0 records nothing",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return onDemand(ctx, r, controls, "batch-0") },
			Check:       func(o redgreen.Observation) error { return checkFailedNC(o, 1, true) },
		},
		{
			Name: "twin-after-base-warms", Role: redgreen.Subject,
			Description: "batch's twin of cart is admitted after h2:cart.demo (its base) was subscribed at bring-up, with its own EDS name",
			Expect:      "node-a's agent admits the twin and batch-0's request is 200 well before the 2 s on-demand timeout, reaching cart-0 over HTTP/3.0 as batch's SPIFFE ID",
			Run:         func(ctx context.Context) (redgreen.Observation, error) { return onDemand(ctx, r, refusing, "batch-0") },
			Check:       checkWarm,
		},
	}
}

// onDemand sends one request from pod to cart, a pair not dialled before
// in variant v's cluster, and reads node-a's outbound log line for it,
// node-a's admissions and refusals, node-b's inbound and cart-0's record.
func onDemand(ctx context.Context, r *rig, v variant, pod string) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: ondemandWitness}
	c, err := r.cluster(ctx, v)
	if err != nil {
		return obs, err
	}
	admitted0, err := agentCounter(ctx, c, "node-a", admitted)
	if err != nil {
		return obs, err
	}
	refused0, err := refusedCount(ctx, c)
	if err != nil {
		return obs, err
	}
	outBefore, err := outboundLines(ctx, c)
	if err != nil {
		return obs, err
	}
	inBefore, err := accessLines(ctx, c)
	if err != nil {
		return obs, err
	}
	tag := "ondemand-" + string(v)
	clientErr := sendFrom(ctx, c, "cart", tag, 1, pod)
	line, err := outboundFor(ctx, c, len(outBefore), "cart")
	if err != nil {
		return obs, err
	}
	admitted1, err := agentCounter(ctx, c, "node-a", admitted)
	if err != nil {
		return obs, err
	}
	refused1, err := refusedCount(ctx, c)
	if err != nil {
		return obs, err
	}
	seen, err := inboundSeen(ctx, c, "cart", inBefore)
	if err != nil {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, "cart-0", "cart", tag)
	if err != nil {
		return obs, err
	}
	reached := 0
	for _, n := range xfcc {
		reached += n
	}
	obs.Evidence = fetched{Status: line.Status, Flags: line.Flags, DurationMS: line.DurationMS,
		Admitted: admitted1 - admitted0, Refused: refused1 - refused0,
		Inbound: seen, ReachedApp: reached, Source: spiffeID(strings.TrimSuffix(pod, "-0"))}
	obs.Summary = fmt.Sprintf("node-a's outbound: %s flags %q in %.0f ms; admitted %v, refused (%s) %v; cart's inbound saw %s; cart-0 recorded %d (client: %v)",
		line.Status, line.Flags, line.DurationMS, admitted1-admitted0, agent.RefusedTestOnly, refused1-refused0, toJSON(seen), reached, clientErr)
	return obs, c.Check(ctx)
}

// fetched is an on-demand case's evidence: node-a's outbound line for
// the request (status, flags, duration), the twins node-a's agent
// admitted and refused for it, cart's inbound lines by "<protocol>
// <peer>", the requests cart-0 recorded, and the source's SPIFFE ID.
type fetched struct {
	Status     string         `json:"status"`
	Flags      string         `json:"flags"`
	DurationMS float64        `json:"duration_ms"`
	Admitted   float64        `json:"admitted"`
	Refused    float64        `json:"refused"`
	Inbound    map[string]int `json:"inbound"`
	ReachedApp int            `json:"reached_app"`
	Source     string         `json:"source"`
}

// checkFailedNC: the request failed 503 NC at the outbound and reached
// nothing, with wantAdmitted twins admitted for it; timedOut says whether
// the proxy waited out the on-demand timeout (a control) or failed it at
// once (the subject). A refusal (none admitted) is counted once.
func checkFailedNC(o redgreen.Observation, wantAdmitted float64, timedOut bool) error {
	f, err := redgreen.EvidenceOf[fetched](o)
	if err != nil {
		return err
	}
	status, flags, dur, adm, ref, reached := f.Status, f.Flags, f.DurationMS, f.Admitted, f.Refused, f.ReachedApp
	if status != "503" || !strings.Contains(flags, "NC") {
		return fmt.Errorf("node-a's outbound answered %s with flags %q, want 503 NC", status, flags)
	}
	if adm != wantAdmitted {
		return fmt.Errorf("node-a's agent admitted %v twins, want %v", adm, wantAdmitted)
	}
	if wantRef := 1 - wantAdmitted; ref != wantRef {
		return fmt.Errorf("node-a's agent counted %v refusals (%s), want %v", ref, agent.RefusedTestOnly, wantRef)
	}
	if reached != 0 {
		return fmt.Errorf("cart-0 recorded %d requests, want none", reached)
	}
	if timedOut && dur < onDemandTimeout {
		return fmt.Errorf("the 503 NC came after %.0f ms, before the %.0f ms on-demand timeout: not the timeout's", dur, onDemandTimeout)
	}
	if !timedOut && dur >= onDemandTimeout {
		return fmt.Errorf("the 503 NC came after %.0f ms, at the %.0f ms on-demand timeout: the refusal was not answered", dur, onDemandTimeout)
	}
	return nil
}

func checkWarm(o redgreen.Observation) error {
	f, err := redgreen.EvidenceOf[fetched](o)
	if err != nil {
		return err
	}
	status, dur, adm, seen, src := f.Status, f.DurationMS, f.Admitted, f.Inbound, f.Source
	if src == "" {
		return errors.New("nothing observed: no source")
	}
	if adm != 1 {
		return fmt.Errorf("node-a's agent admitted %v twins, want 1", adm)
	}
	if status != "200" || dur >= onDemandTimeout {
		return fmt.Errorf("node-a's outbound answered %s after %.0f ms, want 200 before the %.0f ms on-demand timeout", status, dur, onDemandTimeout)
	}
	if n := seen["HTTP/3.0 "+src]; n != 1 || len(seen) != 1 {
		return fmt.Errorf("cart's inbound saw %s, want one HTTP/3.0 request from %s", toJSON(seen), src)
	}
	return nil
}

func refusedCount(ctx context.Context, c cluster.Cluster) (float64, error) {
	body, err := c.Metrics(ctx, "node-a", cluster.Agent)
	if err != nil {
		return 0, err
	}
	v, _ := node.Metric(body, "aether_agent_odcds_refused_total", map[string]string{"reason": agent.RefusedTestOnly})
	return v, nil
}

// outboundLine is a line of node-a's (the sources') proxy access log.
type outboundLine struct {
	Authority  string
	Status     string
	Flags      string
	DurationMS float64
}

// outboundLines reads node-a's proxy access log; status and duration are
// numbers or strings depending on the field, so both are read as text.
func outboundLines(ctx context.Context, c cluster.Cluster) ([]outboundLine, error) {
	b, err := c.AccessLog(ctx, "node-a")
	if err != nil {
		return nil, err
	}
	var out []outboundLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("node-a's access log, line %d: %w", len(out)+1, err)
		}
		l := outboundLine{Authority: fmt.Sprint(raw["authority"]), Status: fmt.Sprint(raw["status"]), Flags: fmt.Sprint(raw["flags"])}
		if l.DurationMS, err = strconv.ParseFloat(fmt.Sprint(raw["duration_ms"]), 64); err != nil {
			return nil, fmt.Errorf("node-a's access log, line %d: duration_ms: %w", len(out)+1, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// outboundFor waits for the one line node-a's proxy writes for a request
// to svc after the first skip lines: the proxy writes it once the request
// is done.
func outboundFor(ctx context.Context, c cluster.Cluster, skip int, svc string) (outboundLine, error) {
	authority := xdsnames.Authority(svc, namespace, meshDomain)
	var found []outboundLine
	if _, err := wait.Until(ctx, 3*time.Second, 100*time.Millisecond, func() (bool, error) {
		lines, err := outboundLines(ctx, c)
		found = found[:0]
		for _, l := range lines[min(skip, len(lines)):] {
			if strings.HasPrefix(l.Authority, authority) {
				found = append(found, l)
			}
		}
		return len(found) > 0, err
	}); err != nil {
		return outboundLine{}, err
	}
	if len(found) != 1 {
		return outboundLine{}, fmt.Errorf("node-a's access log has %d lines for the request to %s, want 1", len(found), svc)
	}
	return found[0], nil
}
