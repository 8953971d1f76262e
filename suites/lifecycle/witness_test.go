package lifecycle

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/wait"
	"github.com/aether-mesh/aether/suites/cluster"
)

// onDemandTimeout is the on_demand filter's ODCDS timeout the agent
// configures (2 s): a fetch nobody answers fails when it runs out.
const onDemandTimeout = 2 * time.Second

func spiffeID(sa string) string { return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + sa }

// accessLine is a proxy access log line as the suite reads it: status
// and duration are numbers or text depending on the field, so every
// field is read as text.
type accessLine struct {
	Source, Destination, Authority, Protocol, Status, Flags string
	DurationMS                                              float64
}

// key is the line's outcome as the tables count it: "<status> <flags>".
func (l accessLine) key() string { return l.Status + " " + l.Flags }

func (l accessLine) nc() bool { return l.Status == "503" && strings.Contains(l.Flags, "NC") }

// accessLines reads the access log node's proxy has written (every
// epoch of it appends to the same file).
func accessLines(ctx context.Context, c cluster.Cluster, nodeName string) ([]accessLine, error) {
	b, err := c.AccessLog(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	var out []accessLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			return nil, fmt.Errorf("%s's access log, line %d: %w", nodeName, len(out)+1, err)
		}
		text := func(k string) string { return fmt.Sprint(raw[k]) }
		l := accessLine{Source: text("source"), Destination: text("destination"), Authority: text("authority"),
			Protocol: text("protocol"), Status: text("status"), Flags: text("flags")}
		if l.DurationMS, err = strconv.ParseFloat(text("duration_ms"), 64); err != nil {
			return nil, fmt.Errorf("%s's access log, line %d: duration_ms: %w", nodeName, len(out)+1, err)
		}
		out = append(out, l)
	}
	return out, sc.Err()
}

// linesFor waits until node's access log holds want lines for svc from
// source (a SPIFFE ID; "" for any) after the first skip lines (the proxy
// writes a line once a request is done), or the count stops growing, and
// returns those lines.
func linesFor(ctx context.Context, c cluster.Cluster, nodeName string, skip int, svc, source string, want int) ([]accessLine, error) {
	authority := xdsnames.Authority(svc, namespace, meshDomain)
	var found []accessLine
	last := -1
	// A time that is up returns what was found: the case judges the count.
	_, err := wait.Until(ctx, linesWait, 100*time.Millisecond, func() (bool, error) {
		lines, err := accessLines(ctx, c, nodeName)
		if err != nil {
			return false, err
		}
		found = found[:0]
		for _, l := range lines[min(skip, len(lines)):] {
			if strings.HasPrefix(l.Authority, authority) && (source == "" || l.Source == source) {
				found = append(found, l)
			}
		}
		settled := len(found) == last && len(found) > 0
		last = len(found)
		return len(found) >= want || settled, nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s's access log for %s: %w", nodeName, svc, err)
	}
	return found, nil
}

// linesWait bounds how long linesFor waits for the proxy to write its
// lines; it bounds a stalled rig, not a speed.
const linesWait = 5 * time.Second

// logLen is how many lines node's access log holds now.
func logLen(ctx context.Context, c cluster.Cluster, nodeName string) (int, error) {
	lines, err := accessLines(ctx, c, nodeName)
	return len(lines), err
}

// outcomes counts lines by outcome.
func outcomes(lines []accessLine) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		out[l.key()]++
	}
	return out
}

// inboundPeers counts node-b's inbound lines by "<protocol> <peer>".
func inboundPeers(lines []accessLine) map[string]int {
	out := map[string]int{}
	for _, l := range lines {
		out[l.Protocol+" "+l.Source]++
	}
	return out
}

// appRecorded counts the requests tagged tag that pod's app recorded.
func appRecorded(ctx context.Context, c cluster.Cluster, pod, svc, tag string) (int, error) {
	p, err := cluster.PodNamed(c, namespace, pod)
	if err != nil {
		return 0, err
	}
	recs, err := c.Records(ctx, p)
	if err != nil {
		return 0, err
	}
	prefix := xdsnames.Authority(svc, namespace, meshDomain) + "/" + tag + "/"
	n := 0
	for _, rec := range recs {
		if rec.Event == "http" && strings.HasPrefix(rec.Payload, prefix) {
			n++
		}
	}
	return n, nil
}

// agentMetric sums node-a's agent samples of family whose labels include
// match; a family the agent does not export is an error.
func agentMetric(ctx context.Context, c cluster.Cluster, family string, match map[string]string) (float64, error) {
	body, err := c.Metrics(ctx, "node-a", cluster.Agent)
	if err != nil {
		return 0, err
	}
	v, found := node.Metric(body, family, match)
	if !found && match == nil {
		return 0, fmt.Errorf("node-a's agent has no %s", family)
	}
	return v, nil
}

const (
	mAdmitted   = "aether_agent_odcds_admitted_total"
	mPruned     = "aether_agent_pairs_pruned_total"
	mPrunedLive = "aether_agent_pairs_pruned_live_total"
	// mWindowOpen is 1 until the fetch window's prunes are done.
	mWindowOpen = "aether_agent_pairs_fetch_window_open"
)

// pruneReasons are aether_agent_pairs_pruned_total's reasons.
var pruneReasons = []string{"fetch-window", "not-resubscribed", "dropped-on-removal", "test-only-unfetched-since-start"}

// counters is what node-a's agent has counted: admissions, prunes by
// reason and prunes of a twin in use.
type counters struct {
	Admitted   float64            `json:"admitted"`
	Pruned     map[string]float64 `json:"pruned"`
	PrunedLive float64            `json:"pruned_live"`
}

func readCounters(ctx context.Context, c cluster.Cluster) (counters, error) {
	out := counters{Pruned: map[string]float64{}}
	var err error
	if out.Admitted, err = agentMetric(ctx, c, mAdmitted, nil); err != nil {
		return out, err
	}
	for _, r := range pruneReasons {
		if out.Pruned[r], err = agentMetric(ctx, c, mPruned, map[string]string{"reason": r}); err != nil {
			return out, err
		}
	}
	if out.PrunedLive, err = agentMetric(ctx, c, mPrunedLive, nil); err != nil {
		return out, err
	}
	return out, nil
}

// since is what node-a's agent counted after b, read from the same agent
// process (a restarted agent counts from zero).
func (a counters) since(b counters) counters {
	out := counters{Admitted: a.Admitted - b.Admitted, PrunedLive: a.PrunedLive - b.PrunedLive, Pruned: map[string]float64{}}
	for r, v := range a.Pruned {
		if d := v - b.Pruned[r]; d != 0 {
			out.Pruned[r] = d
		}
	}
	return out
}

func (a counters) prunedTotal() float64 {
	t := 0.0
	for _, v := range a.Pruned {
		t += v
	}
	return t
}

func toJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
