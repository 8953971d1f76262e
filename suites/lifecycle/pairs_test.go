package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/wait"
)

// stateFile is the agent's persisted pairs in its state dir.
const stateFile = "observed-upstreams.json"

// pairRow is one pair as node-a's agent states it on /debug/pairs.
type pairRow struct {
	Twin        string `json:"twin"`
	Source      string `json:"source"`
	Destination string `json:"destination"`
	State       string `json:"state"`
	Evidence    string `json:"evidence"`
	LastSeen    string `json:"last_seen"`
}

// pairCounts are /debug/pairs' counts, decoded so that a field the suite
// does not know still fails the read.
type pairCounts struct {
	Live       int                `json:"live"`
	Dormant    int                `json:"dormant"`
	Admitted   float64            `json:"admitted"`
	Refused    float64            `json:"refused"`
	Pruned     map[string]float64 `json:"pruned"`
	PrunedLive float64            `json:"pruned_live"`
}

// debugPairs reads node-a's agent's /debug/pairs: twin → state.
func debugPairs(ctx context.Context, nc *node.Cluster) (map[string]string, error) {
	n := nc.Node("node-a")
	body, err := n.Get(ctx, n.AgentMetrics, "/debug/pairs")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Pairs  []pairRow  `json:"pairs"`
		Counts pairCounts `json:"counts"`
	}
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("node-a's /debug/pairs: %w", err)
	}
	out := map[string]string{}
	for _, p := range doc.Pairs {
		out[p.Twin] = p.State
	}
	return out, nil
}

// waitPairState polls node-a's /debug/pairs until twin's state is one of
// want ("" for absent) and returns the state seen last.
func waitPairState(ctx context.Context, nc *node.Cluster, twin string, want ...string) (string, error) {
	var state string
	_, err := wait.Until(ctx, 10*time.Second, 100*time.Millisecond, func() (bool, error) {
		pairs, err := debugPairs(ctx, nc)
		state = pairs[twin]
		return slices.Contains(want, state), err
	})
	if err != nil {
		return "", err
	}
	return state, nil
}

// persisted is the state file's content.
type persisted struct {
	Pairs   []string `json:"quic_pairs"`
	Dormant []string `json:"dormant_quic_pairs"`
}

func statePath(nc *node.Cluster) string {
	return filepath.Join(nc.AgentStateDir(nc.Node("node-a")), stateFile)
}

// readState reads node-a's agent's persisted pairs.
func readState(nc *node.Cluster) (persisted, error) {
	var p persisted
	b, err := os.ReadFile(statePath(nc))
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("node-a's agent state: %w", err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, fmt.Errorf("node-a's agent state %s: %w", statePath(nc), err)
	}
	return p, nil
}

// writeState writes p as node-a's agent's persisted pairs, as an agent of
// an earlier release left them; the agent must be stopped.
func writeState(nc *node.Cluster, p persisted) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	tmp := statePath(nc) + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("failed to write node-a's agent state: %w", err)
	}
	if err := os.Rename(tmp, statePath(nc)); err != nil {
		return fmt.Errorf("failed to write node-a's agent state: %w", err)
	}
	return nil
}

// twin names the pair of source account sa and destination svc.
func twin(sa, svc string) string {
	return xdsnames.TwinCluster(xdsnames.Twin{Service: svc, Namespace: namespace, SA: sa, SANamespace: namespace})
}

// states is a twin → state map as sorted "twin=state" entries, for the
// table and for comparing two readings.
func states(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, k+"="+m[k])
	}
	return out
}
