// Package agent is the per-node control plane: it turns the registry's mesh
// model into the node's xDS resources (generate.go), applies #914's UDPRoute
// rules (selection.go), passes every snapshot through the config gates
// (package validate) and serves the last good one over delta ADS.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// Options configures an Agent.
type Options struct {
	Node string
	Mode constants.CaptureMode
	// StateDir, when set, receives last-good.json: the published snapshot's
	// dump, rewritten on every publish, so a rig or an operator can see
	// what the data plane was last given, and so a restarted agent serves
	// it again until its first registry read succeeds.
	StateDir string
	Logger   *slog.Logger
	// Registerer receives the agent's metrics; nil means a private
	// registry, never the global one.
	Registerer prometheus.Registerer
}

// Agent owns one node's snapshot.
type Agent struct {
	opts    Options
	log     *slog.Logger
	builder *Builder
	cache   cache.SnapshotCache
	metrics *Metrics

	mu      sync.Mutex
	serial  int
	current *Output
	version string
	lastErr error
	// restored: current came from the state dir, not from a build.
	restored bool
}

// New returns an agent with an empty snapshot cache.
func New(opts Options) (*Agent, error) {
	if opts.Node == "" {
		return nil, errors.New("agent: node name is required")
	}
	if _, err := constants.ParseCaptureMode(string(opts.Mode)); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	a := &Agent{opts: opts, log: opts.Logger, builder: NewBuilder(opts.Node, opts.Mode), metrics: m}
	a.cache = cache.NewSnapshotCache(true, cache.IDHash{}, cacheLogger(opts.Logger))
	if opts.StateDir != "" {
		// A restarted agent serves what it last published until its first
		// registry read succeeds: a proxy that reconnects meanwhile gets
		// the configuration it had, not an empty one. A state file that
		// cannot be served is logged and left alone; the registry decides.
		if err := a.restore(); err != nil {
			a.log.Error("not serving the last good snapshot", "err", err)
		}
	}
	return a, nil
}

// LastGoodFile is the state dir's record of the last published snapshot.
const LastGoodFile = "last-good.json"

func (a *Agent) restore() error {
	path := filepath.Join(a.opts.StateDir, LastGoodFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read %q: %w", path, err)
	}
	d, res, err := ParseDump(path, data)
	if err != nil {
		return err
	}
	if d.Node != a.opts.Node {
		return fmt.Errorf("%s: field node: written for node %q, this agent serves %q", path, d.Node, a.opts.Node)
	}
	if d.Mode != a.opts.Mode {
		return fmt.Errorf("%s: field mode: written in capture mode %q, this agent runs %q", path, d.Mode, a.opts.Mode)
	}
	serial, err := strconv.Atoi(strings.TrimPrefix(d.Version, "v"))
	if err != nil || !strings.HasPrefix(d.Version, "v") {
		return fmt.Errorf("%s: field version: %q is not an agent version (v<n>)", path, d.Version)
	}
	if err := validate.Check(res); err != nil {
		return fmt.Errorf("%s: fails the config gates: %w", path, err)
	}
	snap, err := cache.NewSnapshot(d.Version, res)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := a.cache.SetSnapshot(context.Background(), a.opts.Node, snap); err != nil {
		return fmt.Errorf("failed to serve %s: %w", path, err)
	}
	// Versions continue from the restored one, so a proxy never sees a
	// version go backwards across the restart.
	a.serial = serial
	a.current, a.version = &Output{Snapshot: snap, Resources: res}, d.Version
	a.restored = true
	a.log.Info("serving the last good snapshot until the registry is read", "file", path, "version", d.Version)
	return nil
}

// Restored reports whether the served snapshot is the one reloaded from
// the state dir, not yet replaced by one built from the registry.
func (a *Agent) Restored() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.restored
}

// Cache is the delta-capable snapshot cache the ADS server serves.
func (a *Agent) Cache() cache.SnapshotCache { return a.cache }

// Current returns the last published output and its version, or nil.
func (a *Agent) Current() (*Output, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current, a.version
}

// LastError is the reason of the last refusal, nil after a publish.
func (a *Agent) LastError() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastErr
}

// RefusedError says why a snapshot was not published.
type RefusedError struct {
	Node   string
	Reason string // the refusal metric's label: a gate name, "registry" or "build"
	Err    error
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("snapshot for node %q refused (%s): %v", e.Node, e.Reason, e.Err)
}

func (e *RefusedError) Unwrap() error { return e.Err }

// Apply builds the node's snapshot from st, checks it against every gate and
// publishes it. A snapshot that fails is refused: the cache keeps serving the
// last good one, the refusal is counted per gate, and the error says why.
func (a *Agent) Apply(st *registry.State) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	version := fmt.Sprintf("v%d", a.serial+1)
	out, err := a.builder.Build(st, version)
	if err != nil {
		return a.refuse(&RefusedError{Node: a.opts.Node, Reason: "build", Err: err})
	}
	if err := validate.Check(out.Resources); err != nil {
		var ve *validate.Error
		reason := "gate"
		if errors.As(err, &ve) {
			for _, g := range ve.Gates() {
				a.metrics.refused.WithLabelValues(g).Inc()
			}
			reason = fmt.Sprint(ve.Gates())
		}
		a.lastErr = &RefusedError{Node: a.opts.Node, Reason: reason, Err: err}
		a.log.Error("snapshot refused", "node", a.opts.Node, "version", version, "keeping", a.version, "err", err)
		return a.lastErr
	}
	if err := a.cache.SetSnapshot(context.Background(), a.opts.Node, out.Snapshot); err != nil {
		return a.refuse(&RefusedError{Node: a.opts.Node, Reason: "build", Err: err})
	}
	a.serial++
	a.current, a.version, a.lastErr, a.restored = out, version, nil, false
	a.metrics.observe(out)
	if a.opts.StateDir != "" {
		if err := a.writeState(out, version); err != nil {
			a.log.Warn("failed to write state dir", "dir", a.opts.StateDir, "err", err)
		}
	}
	a.log.Info("snapshot published", "node", a.opts.Node, "version", version, "mode", a.opts.Mode,
		"listeners", len(out.Resources["type.googleapis.com/envoy.config.listener.v3.Listener"]),
		"clusters", len(out.Resources["type.googleapis.com/envoy.config.cluster.v3.Cluster"]),
		"udp_arms", len(out.Selection.Arms), "udp_unsupported", len(out.Selection.Unsupported),
		"pods_without_netns", len(out.PodsWithoutNetns))
	return nil
}

// refuse is for refusals that are not gate failures; a.mu is held.
func (a *Agent) refuse(err *RefusedError) error {
	a.metrics.refused.WithLabelValues(err.Reason).Inc()
	a.lastErr = err
	a.log.Error("snapshot refused", "node", a.opts.Node, "reason", err.Reason, "keeping", a.version, "err", err.Err)
	return err
}

// RegistryError records a source that failed to produce a State (a broken
// scenario file, say): nothing is published, the last snapshot stays.
func (a *Agent) RegistryError(err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refuse(&RefusedError{Node: a.opts.Node, Reason: "registry", Err: err})
}

// Run applies every update from src until ctx ends. Refusals are logged and
// counted, never fatal: the data plane keeps its last good configuration.
func (a *Agent) Run(ctx context.Context, src registry.Source) error {
	for u := range src.Watch(ctx) {
		if u.Err != nil {
			_ = a.RegistryError(u.Err)
			continue
		}
		_ = a.Apply(u.State)
	}
	return ctx.Err()
}

// ConfigDump is the published snapshot as JSON (the /debug/config page).
func (a *Agent) ConfigDump() ([]byte, error) {
	out, version := a.Current()
	if out == nil {
		return nil, errors.New("no snapshot published yet")
	}
	return DumpResources(a.opts.Node, a.opts.Mode, version, out.Resources)
}

func (a *Agent) writeState(out *Output, version string) error {
	b, err := DumpResources(a.opts.Node, a.opts.Mode, version, out.Resources)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.opts.StateDir, 0o755); err != nil {
		return fmt.Errorf("failed to create state dir %q: %w", a.opts.StateDir, err)
	}
	tmp := filepath.Join(a.opts.StateDir, ".last-good.json.tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("failed to write %q: %w", tmp, err)
	}
	dst := filepath.Join(a.opts.StateDir, LastGoodFile)
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("failed to rename %q to %q: %w", tmp, dst, err)
	}
	return nil
}

func cacheLogger(l *slog.Logger) log.Logger {
	return log.LoggerFuncs{
		DebugFunc: func(f string, args ...any) { l.Debug(fmt.Sprintf(f, args...), "component", "xds-cache") },
		InfoFunc:  func(f string, args ...any) { l.Debug(fmt.Sprintf(f, args...), "component", "xds-cache") },
		WarnFunc:  func(f string, args ...any) { l.Warn(fmt.Sprintf(f, args...), "component", "xds-cache") },
		ErrorFunc: func(f string, args ...any) { l.Error(fmt.Sprintf(f, args...), "component", "xds-cache") },
	}
}
