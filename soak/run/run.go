// Package run is the local soak: the aether mesh on an embedded netns
// cluster (rigs/node; two nodes, or four for the long soak) under
// open-loop paced load, in ABBA windows
// that switch the agents between --mesh-transport h2 and auto, with a
// liveness prober, CPU and request counters sampled on one tick grid, and a
// bounded, seeded chaos schedule. It writes what the graders read (a
// manifest, Prometheus query_range counters, vegeta results) into one run
// folder; reports/cmd/aether-soak grades it.
package run

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

// MeshNames are the mesh's trust and DNS domains.
type MeshNames struct{ TrustDomain, MeshDomain string }

// Config is one run.
type Config struct {
	Scenario string
	Roles    Roles
	Mesh     MeshNames
	// Out holds run folders; the run writes Out/ID.
	Out, ID  string
	Duration time.Duration
	// Tick is the sampling grid; Warmup each discarded warm-up's length.
	Tick, Warmup time.Duration
	// Rate is the load's target in requests per second, over all sources.
	Rate float64
	// ProbeInterval is each prober pod's interval; ProbeRate, when set,
	// replaces it with the interval that gives that many liveness probes
	// a second over every prober pod (PlanProbes).
	ProbeInterval time.Duration
	ProbeRate     float64
	// DirectInterval is the network fault steps' direct probes' interval
	// (ProbeInterval when zero); the fault gates' failure bounds are for
	// it.
	DirectInterval time.Duration
	// SVIDTTL is the agents' --svid-ttl: SVIDs rotate at half of it.
	SVIDTTL time.Duration
	// PairFetchWindow is the agents' --east-west-quic-pair-fetch-window:
	// shorter than the time between two agent restarts, so every agent's
	// window closes, and its prunes happen, inside the soak.
	PairFetchWindow time.Duration
	Seed            uint64
	// Pairs, PairEvery and MinWindow override the schedule's sizing
	// (Budget).
	Pairs     int
	PairEvery time.Duration
	MinWindow time.Duration
	// NetworkEvery puts a network fault in every NetworkEvery-th gap
	// between pairs (Budget); 0 runs none.
	NetworkEvery int
	// Leaks, when set, samples every agent's and proxy's resources and
	// grades their growth (gates.leaks).
	Leaks *LeakConfig
	// AgentFlags are extra flags for every agent (a test-only control, to
	// soak a build broken on purpose).
	AgentFlags []string
	MaxRatio   float64
	SLO        string
	// Build is the revision the run's windows are declared to have run.
	Build    string
	Bin      node.Binaries
	Progress io.Writer
	TTY      bool
	Logf     func(format string, args ...any)
}

// Result says where the run wrote and how it ended.
type Result struct {
	Dir, Manifest string
	// Partial says why the run stopped before its schedule's end.
	Partial string
	// Missed counts failed scrapes (their counters carried over the tick).
	Missed map[string]int
	// Binaries is the sha256 of each mesh binary the soak ran, by name,
	// for the grade's build stamp.
	Binaries map[string]string
}

// ChaosKinds are the chaos steps a schedule draws from.
func ChaosKinds() []StepKind {
	return []StepKind{AgentRestart, PodChurn, ProxyHotRestart, AgentInHotRestart}
}

func (c Config) network() []StepKind {
	if c.NetworkEvery <= 0 {
		return nil
	}
	return NetworkKinds()
}

// Expected costs of a switch and a chaos step, to size the windows.
const (
	switchCost = 2 * time.Second
	chaosCost  = 4 * time.Second
)

// Run runs the soak until its schedule ends or ctx does; either way it
// tears the cluster down and writes what it measured. Only a run that
// measured nothing, or whose files could not be written, is an error.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	st, err := registry.LoadScenarioFile(cfg.Scenario)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, n := range st.Nodes {
		nodes = append(nodes, n.Name)
	}
	if cfg.ProbeRate > 0 {
		plan, err := PlanProbes(cfg.ProbeRate, len(cfg.Roles.Probers))
		if err != nil {
			return nil, err
		}
		cfg.ProbeInterval = plan.Every
		if cfg.Logf != nil {
			cfg.Logf("liveness probes at %s: %s planned in %s", plan, grade.FormatCount(plan.In(cfg.Duration)), cfg.Duration)
		}
	}
	if cfg.DirectInterval <= 0 {
		cfg.DirectInterval = cfg.ProbeInterval
	}
	steps, err := Plan(Budget{Duration: cfg.Duration, Tick: cfg.Tick, Warmup: cfg.Warmup, SwitchCost: switchCost, ChaosCost: chaosCost,
		Nodes: nodes, Chaos: ChaosKinds(), Network: cfg.network(), NetworkEvery: cfg.NetworkEvery, Seed: cfg.Seed,
		Pairs: cfg.Pairs, PairEvery: cfg.PairEvery, MinWindow: cfg.MinWindow})
	if err != nil {
		return nil, err
	}
	// The CNI and the agents take their sockets' paths from here, and
	// those must be absolute.
	dir, err := filepath.Abs(filepath.Join(cfg.Out, cfg.ID))
	if err != nil {
		return nil, fmt.Errorf("failed to resolve the run folder: %w", err)
	}
	// A run never writes into another's folder (a reused -id, two runs
	// started in the same second): their files would mix.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the run folder: %w", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the run folder (another run's, if it exists: give another -id): %w", err)
	}
	for _, d := range []string{filepath.Join(dir, "prometheus"), filepath.Join(dir, "vegeta"), filepath.Join(dir, "cluster", "access")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("failed to create the run folder: %w", err)
		}
	}
	agentArgs := func(t string) []string {
		return append([]string{"--trust-domain", cfg.Mesh.TrustDomain, "--mesh-domain", cfg.Mesh.MeshDomain,
			"--ca-dir", filepath.Join(dir, "cluster", "ca"), "--access-log-dir", filepath.Join(dir, "cluster", "access"),
			"--upstream-cert", "per-source", "--svid-ttl", cfg.SVIDTTL.String(), "--mesh-transport", t,
			"--east-west-quic-pair-fetch-window", cfg.PairFetchWindow.String(), "--proxy-metrics-url", node.ProxyMetricsURL()}, cfg.AgentFlags...)
	}
	c, err := node.Up(ctx, node.Config{Scenario: cfg.Scenario, Mode: constants.CaptureTProxy, RunDir: filepath.Join(dir, "cluster"),
		Bin: cfg.Bin, Logf: cfg.Logf, AgentArgs: agentArgs(transport(manifest.H2))})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the soak cluster: %w", err)
	}
	s, err := newSoak(c, cfg, dir, steps, agentArgs)
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if cfg.Leaks != nil {
		if err := goroutineDumps(ctx, c, dir, "start"); err != nil && cfg.Logf != nil {
			cfg.Logf("%v", err)
		}
	}
	spans, partial := s.execute(ctx)
	end := s.stop(ctx, spans)
	if cfg.Leaks != nil {
		if err := goroutineDumps(ctx, c, dir, "end"); err != nil && cfg.Logf != nil {
			cfg.Logf("%v", err)
		}
	}
	if err := c.Close(); err != nil {
		partial = joinWhy(partial, fmt.Sprintf("the cluster's teardown failed: %v", err))
	}
	res, err := s.write(spans, end, partial)
	if res != nil {
		res.Binaries = c.BinaryHashes()
	}
	return res, err
}

// Check refuses a configuration the run could not grade or could not
// start, before any cluster comes up or any run folder is made: a mistyped
// -slo or a zero -rate would otherwise cost the whole soak's length first.
func (c Config) Check() error {
	if _, err := os.Stat(c.Scenario); err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	st, err := registry.LoadScenarioFile(c.Scenario)
	if err != nil {
		return fmt.Errorf("scenario: %w", err)
	}
	if err := c.Roles.Check(st); err != nil {
		return fmt.Errorf("scenario %s: %w", c.Scenario, err)
	}
	if c.ProbeRate != 0 {
		if _, err := PlanProbes(c.ProbeRate, len(c.Roles.Probers)); err != nil {
			return err
		}
	}
	if c.Leaks != nil {
		if err := c.Leaks.check(c.Tick); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"probe interval", c.ProbeInterval}, {"SVID TTL", c.SVIDTTL}, {"pair fetch window", c.PairFetchWindow}} {
		if d.name == "probe interval" && c.ProbeRate != 0 {
			continue // the rate plans it
		}
		if d.v <= 0 {
			return fmt.Errorf("%s %s: must be positive", d.name, d.v)
		}
	}
	if c.DirectInterval < 0 || c.PairEvery < 0 {
		return fmt.Errorf("direct probe interval %s, pair every %s: must not be negative", c.DirectInterval, c.PairEvery)
	}
	if c.NetworkEvery < 0 {
		return fmt.Errorf("network faults every %d gaps: must be 0 (none) or more", c.NetworkEvery)
	}
	if c.Rate <= 0 {
		return fmt.Errorf("rate %g rps: must be positive", c.Rate)
	}
	if c.MaxRatio <= 0 {
		return fmt.Errorf("max ratio %g: must be positive", c.MaxRatio)
	}
	if _, err := manifest.ParseSLO(c.SLO); err != nil {
		return fmt.Errorf("liveness SLO: %w", err)
	}
	return nil
}

func joinWhy(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// writeSpans keeps every span as it ran, with its detail, beside the
// manifest.
func writeSpans(dir string, spans []Span) error {
	b, err := json.MarshalIndent(spans, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the run's spans: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SpansFile), b, 0o644); err != nil {
		return fmt.Errorf("failed to write the run's spans: %w", err)
	}
	return nil
}
