// Package agent is the per-node control plane: it turns the registry's mesh
// model into the node's xDS resources (build.go, then one file per resource
// kind), applies #914's UDPRoute rules (selection.go), passes every snapshot
// through the config gates (package validate) and serves the last good one
// over delta ADS. The on-demand QUIC pairs the twins are built for live in
// package pairs; pairs.go is what the agent tells them.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/agent/pairs"
	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
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
	// Transport is auto (the default: HTTP/3 twins wherever eligible)
	// or h2, which refuses every twin.
	Transport MeshTransport
	Logger    *slog.Logger
	// Registerer receives the agent's metrics; nil means a private
	// registry, never the global one.
	Registerer prometheus.Registerer
	// HTTP, when set, serves the mTLS HTTP/2 path: SDS from HTTP.Identities
	// and the 18008/18081 listeners (ARCHITECTURE.md, "The mTLS HTTP/2 path").
	HTTP *HTTPPath
	// Issuer, when set, is told the node's accounts before every build,
	// so that HTTP.Identities holds their SVIDs (the embedded CA's
	// rotator). A Workload API source that already serves them needs none.
	Issuer Issuer
	// PairFetchWindow is how long after start a persisted QUIC pair may
	// show no evidence of use before it is pruned with its twin; zero is
	// pairs.DefaultFetchWindow (ARCHITECTURE.md, "Pair lifecycle").
	PairFetchWindow time.Duration
	// ProxyMetricsURL, when set, is the node proxy's loopback /metrics:
	// sampled every ProxyMetricsInterval (zero is
	// pairs.DefaultProxyMetricsInterval) and at each prune, it tells
	// which twins served requests (aether_agent_pairs_pruned_live_total).
	ProxyMetricsURL      string
	ProxyMetricsInterval time.Duration
	// Controls are test-only behaviours a suite's controls need; the
	// zero value is the agent as shipped.
	Controls Controls
}

// Controls are behaviours the agent has only for tests: each breaks
// something on purpose, so that a suite's control shows what the mesh
// would do without it. None is for production.
type Controls struct {
	// RefuseTwin refuses on-demand twin name (reason test-only-refused)
	// whatever the registry says: a refusable pair in a consistent
	// snapshot, where every routed pair is otherwise admissible.
	RefuseTwin string
	// UnansweredRefusals leaves a refused name unanswered, as Envoy's
	// LinearCache does, instead of stating it absent in removed_resources:
	// the proxy then waits out its on-demand timeout.
	UnansweredRefusals bool
	// TwinSharesBaseEDS gives each twin its base h2 cluster's EDS name
	// instead of its own (#1008): a twin added after the base was
	// subscribed gets no EDS response and never warms. It passes the
	// gates it breaks, logged TEST ONLY: twin_eds_name_own, and
	// eds_names_resolve (the twin's own load assignment goes unused).
	TwinSharesBaseEDS bool
	// PruneUnfetchedSinceStart is the pre-#1073 fetch-window rule: at
	// the window's end every live pair whose twin was not fetched by name
	// since start is pruned, a held or re-subscribed twin included, so
	// the twins of an agent restart's carry-over are pruned while in use.
	PruneUnfetchedSinceStart bool
	// DropPairOnRemoval drops a pair whose source leaves the node or
	// whose destination leaves the dependency set, instead of keeping it
	// dormant (pre-#1036): the proxy, still subscribed, never asks again.
	DropPairOnRemoval bool

	// TwinSharedCert makes every twin present this SPIFFE ID's SVID,
	// whatever its source account: twins that share one certificate, so
	// every source arrives as this one (#831 on QUIC).
	TwinSharedCert string
	// TwinPoolPerDownstream sets connection_pool_per_downstream_connection
	// on every twin, past the twin_pooling_pinned_off gate: each
	// downstream connection gets QUIC connections of its own (#1021).
	TwinPoolPerDownstream bool
	// QUICResumption states enable_resumption and enable_early_data true
	// on every QUIC chain, past the quic_r4_pinned gate: a resumed
	// session is not re-verified before its 0-RTT request is served (R4).
	QUICResumption bool
	// QUICInboundWildcard binds each QUIC inbound to 0.0.0.0 with
	// IP_TRANSPARENT: a pod app's own dial of a peer's 18008, diverted
	// into its netns, lands in its own inbound.
	QUICInboundWildcard bool
	// OmitDNSSANs issues the node's SVIDs without their DNS SANs, so a
	// twin's name check fails after the peer's identity verified (Q5).
	OmitDNSSANs bool
	// GatewayFirstService makes a gateway forward every exposed
	// service's SNI to the first exposed service's pods, past the
	// gateway_chain_routes_own_service gate: a gateway that routes by
	// something other than the SNI delivers clients to a destination they
	// did not name.
	GatewayFirstService bool
	// keepGates keeps the gates the controls above pass: a test sets it
	// to show the gate refusing what a control emits.
	keepGates bool
}

// passes says whether the controls let a snapshot that failed only the
// gates they break be published, and which gates those were.
func (c Controls) passes(err error) ([]string, bool) {
	var ve *validate.Error
	if c.keepGates || !errors.As(err, &ve) {
		return nil, false
	}
	gates := ve.Gates()
	for _, g := range gates {
		if !(g == validate.GateTwinPooling && c.TwinPoolPerDownstream || g == validate.GateQuicR4 && c.QUICResumption ||
			(g == validate.GateTwinEDSName || g == validate.GateEDSNames) && c.TwinSharesBaseEDS ||
			g == validate.GateGatewayChainRoutes && c.GatewayFirstService) {
			return nil, false
		}
	}
	return gates, true
}

// Issuer keeps an SVID current in the identity source for each account it
// is given, and stops for those it no longer is.
type Issuer interface {
	Keep(accounts []identity.Account) error
}

// Agent owns one node's snapshot.
type Agent struct {
	opts    Options
	log     *slog.Logger
	builder *Builder
	// pairs is the pair lifecycle, under its own lock, taken after a.mu
	// (pairs.go).
	pairs *pairs.Set
	// caches holds one delta-native cache per resource type (in typeURLs
	// order) behind mux, the cache the ADS server serves: a build's
	// changes are published resource by resource, so the builder's index
	// is never shared and never copied.
	caches  [numTypes]*cache.LinearCache
	mux     *cache.MuxCache
	served  *holdCache
	metrics *Metrics
	// resync: what is served may differ from the builder's last build (a
	// build was refused after the builder moved on), so the next publish
	// is of the whole output, not of its changes.
	resync bool

	mu      sync.Mutex
	serial  int
	current *Output
	version string
	lastErr error
	// restored: current came from the state dir, not from a build.
	restored bool
	// last is the last State applied: an identity change rebuilds it.
	last *registry.State
	// state is the registry view of the last publish, which on-demand
	// twins are admitted against; twins are the twins served for the
	// pairs that dialled (odcds.go).
	state *registry.State
	twins map[string]servedTwin
	// servers are the ADS servers made, each numbering its streams from 1.
	servers int64
	// unjudged are the CDS watches whose request subscribed to names
	// before the first build: answered when it lands (odcds.go).
	unjudged []*unjudgedWatch
	// built is set once a build is published (state is no longer nil):
	// read without a.mu by the stream loops, which must not wait on it.
	built atomic.Bool
	// judging orders each stream's CDS watches behind the judgment of
	// the names its requests subscribe to, made off the stream's loop
	// (odcds.go).
	judging judging
	// admitting, when set (by tests), is called before each name is
	// judged, a.mu held: it stands for a slow admission.
	admitting func(name string)
}

// New returns an agent with an empty snapshot cache: with a state dir,
// one serving the pairs and the snapshot a previous agent left.
func New(opts Options) (*Agent, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	// The pairs first: the restored snapshot serves the twins of the
	// live ones and of no other (#1033).
	ps, err := newPairs(opts)
	if err != nil {
		return nil, err
	}
	opts.HTTP = opts.httpPath()
	a := &Agent{opts: opts, log: opts.Logger, builder: NewBuilder(opts.Node, opts.Mode), metrics: m,
		pairs: ps, twins: map[string]servedTwin{}}
	a.builder.HTTP = opts.HTTP
	a.makeCaches()
	if opts.StateDir != "" {
		// A restarted agent serves what it last published until its first
		// registry read succeeds: a proxy that reconnects meanwhile gets
		// the configuration it had, not an empty one. A state file that
		// cannot be served is logged and left alone; the registry decides.
		if err := a.restore(); err != nil {
			a.log.Error("not serving the last good snapshot", "err", err)
		}
	}
	time.AfterFunc(opts.PairFetchWindow, a.endFetchWindow)
	return a, nil
}

// withDefaults checks opts and fills in what is left zero.
func (opts Options) withDefaults() (Options, error) {
	if opts.Node == "" {
		return opts, errors.New("agent: node name is required")
	}
	if _, err := constants.ParseCaptureMode(string(opts.Mode)); err != nil {
		return opts, fmt.Errorf("agent: %w", err)
	}
	switch opts.Transport {
	case "":
		opts.Transport = TransportAuto
	case TransportAuto, TransportH2:
	default:
		return opts, fmt.Errorf("agent: invalid mesh transport %q: want %q or %q", opts.Transport, TransportAuto, TransportH2)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	if opts.PairFetchWindow == 0 {
		opts.PairFetchWindow = pairs.DefaultFetchWindow
	}
	return opts, nil
}

// httpPath is the mTLS path the builder is given: opts.HTTP, or a copy
// of it with the transport's and the controls' say, never opts.HTTP
// changed in place.
func (opts Options) httpPath() *HTTPPath {
	h := opts.HTTP
	if opts.Transport == TransportH2 && h != nil && h.EastWest {
		// The h2 floor for this node's egress: no route may name a twin.
		// Its QUIC inbounds stay (HTTPPath.H2Egress).
		c := *h
		c.H2Egress = true
		h = &c
	}
	if ctl := opts.Controls; (ctl.QUICResumption || ctl.QUICInboundWildcard || ctl.GatewayFirstService) && h != nil {
		c := *h
		c.QUICResumption, c.QUICInboundWildcard = ctl.QUICResumption, ctl.QUICInboundWildcard
		c.GatewayFirstService = ctl.GatewayFirstService
		h = &c
	}
	return h
}

// makeCaches makes one delta-native cache per resource type behind the
// mux the ADS server serves, and the hold in front of it.
func (a *Agent) makeCaches() {
	a.mux = &cache.MuxCache{
		Classify:      func(r *cache.Request) string { return r.GetTypeUrl() },
		ClassifyDelta: func(r *cache.DeltaRequest) string { return r.GetTypeUrl() },
		Caches:        make(map[string]cache.Cache, numTypes),
	}
	for i, typ := range typeURLs {
		a.caches[i] = cache.NewLinearCache(typ, cache.WithLogger(cacheLogger(a.log)))
		a.mux.Caches[typ] = a.caches[i]
	}
	a.served = newHoldCache(a.mux)
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
	for typ := range res {
		if !slices.Contains(typeURLs[:], typ) {
			return fmt.Errorf("%s: resources[%q]: not a type the agent serves", path, typ)
		}
	}
	res = a.withoutUnpairedTwins(res)
	restored := &Output{Resources: res, Full: true}
	if err := a.publish(restored); err != nil {
		return fmt.Errorf("failed to serve %s: %w", path, err)
	}
	// Versions continue from the restored one, so a proxy never sees a
	// version go backwards across the restart.
	a.serial = serial
	a.current, a.version = restored, d.Version
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

// Cache is the delta-capable cache the ADS server serves, on-demand CDS
// included.
func (a *Agent) Cache() cache.Cache { return &onDemandCDS{Cache: a.served, a: a} }

// publish makes out what is served: its changes, or all of it after a full
// build or a refusal. Every type's additions and updates go out before any
// removal, clusters first and listeners last, so a proxy never holds a
// listener naming a cluster it was told to drop. a.mu is held (or a is
// not shared yet).
func (a *Agent) publish(out *Output) error {
	var changes [numTypes]Changes
	full := out.Full || a.resync
	for i, typ := range typeURLs {
		if !full {
			changes[i] = out.Changes[typ]
			continue
		}
		// The whole output against what the cache holds: the cache works
		// out which resources really moved from their content.
		// A message the cache already holds is left there: the builder
		// never changes a message it has output.
		held := a.caches[i].GetResources()
		c := Changes{Updated: make(map[string]types.Resource, len(out.Resources[typ]))}
		for _, r := range out.Resources[typ] {
			name := cache.GetResourceName(r)
			if held[name] != r {
				c.Updated[name] = r
			}
			delete(held, name)
		}
		for name := range held {
			c.Removed = append(c.Removed, name)
		}
		changes[i] = c
	}
	// Until every step below has succeeded, what is served is neither
	// the old output nor out.
	a.resync = true
	for i, typ := range typeURLs {
		if len(changes[i].Updated) == 0 {
			continue
		}
		if err := a.caches[i].UpdateResources(changes[i].Updated, nil); err != nil {
			return fmt.Errorf("failed to publish %d %s resources: %w", len(changes[i].Updated), typ, err)
		}
	}
	for i := numTypes - 1; i >= 0; i-- {
		if len(changes[i].Removed) == 0 {
			continue
		}
		if err := a.caches[i].UpdateResources(nil, changes[i].Removed); err != nil {
			return fmt.Errorf("failed to remove %d %s resources: %w", len(changes[i].Removed), typeURLs[i], err)
		}
	}
	a.resync = false
	if err := a.served.release(); err != nil {
		// Published all the same: only the streams whose watch failed
		// go unanswered, as they would have on any publish.
		a.log.Error("a waiting xDS watch failed", "err", err)
	}
	return nil
}

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
	return a.applyLocked(st)
}

// applyLocked is Apply with a.mu held.
func (a *Agent) applyLocked(st *registry.State) error {
	version := fmt.Sprintf("v%d", a.serial+1)
	a.last = st
	out, twins, err := a.build(st, version)
	if err != nil {
		return err
	}
	if err := a.check(out, version); err != nil {
		return err
	}
	if err := a.publish(out); err != nil {
		return a.refuse(&RefusedError{Node: a.opts.Node, Reason: "publish", Err: err})
	}
	a.published(st, out, twins, version)
	return nil
}

// build is st's output, the recorded pairs' twins overlaid, and those
// twins; a refusal, counted, if the node's identities or the build fail.
func (a *Agent) build(st *registry.State, version string) (*Output, map[string]servedTwin, error) {
	if a.opts.Issuer != nil {
		if err := a.opts.Issuer.Keep(LocalAccounts(st, a.opts.Node)); err != nil {
			return nil, nil, a.refuse(&RefusedError{Node: a.opts.Node, Reason: "identity", Err: err})
		}
	}
	out, err := a.builder.Build(st, version)
	if err != nil {
		// The builder starts over; its next build is a full one.
		return nil, nil, a.refuse(&RefusedError{Node: a.opts.Node, Reason: "build", Err: err})
	}
	// A full publish sends what the cache holds against out, so the
	// twins must be in out, or it would drop them.
	twins, err := overlay(a.pairs.Twins(), out, st, a.opts.Node, a.opts.HTTP, a.opts.Controls, a.twins)
	if err != nil {
		a.resync = true
		return nil, nil, a.refuse(&RefusedError{Node: a.opts.Node, Reason: "build", Err: err})
	}
	return out, twins, nil
}

// check passes out through the config gates, or refuses it, counted per
// failing gate. A test-only control may let it past the gates it breaks.
func (a *Agent) check(out *Output, version string) error {
	err := validate.Check(out.Resources)
	if gates, ok := a.opts.Controls.passes(err); ok {
		a.log.Warn("TEST ONLY: a test-only control publishes a snapshot the config gates refuse", "node", a.opts.Node, "version", version, "gates", gates, "err", err)
		return nil
	}
	if err == nil {
		return nil
	}
	var ve *validate.Error
	reason := "gate"
	if errors.As(err, &ve) {
		for _, g := range ve.Gates() {
			a.metrics.refused.WithLabelValues(g).Inc()
		}
		reason = fmt.Sprint(ve.Gates())
	}
	// The builder has moved on to out, which is not served: the next
	// build's changes would be relative to out, so the next publish is
	// of the whole output.
	a.resync = true
	a.lastErr = &RefusedError{Node: a.opts.Node, Reason: reason, Err: err}
	a.log.Error("snapshot refused", "node", a.opts.Node, "version", version, "keeping", a.version, "err", err)
	return a.lastErr
}

// published records out, just published from st, as what is served:
// the pairs settle on st, the watches made before the first build are
// answered, and the state dir is written.
func (a *Agent) published(st *registry.State, out *Output, twins map[string]servedTwin, version string) {
	a.serial++
	a.current, a.version, a.lastErr, a.restored = out, version, nil, false
	a.state, a.twins = st, twins
	a.built.Store(true)
	a.settlePairs()
	a.metrics.twins.Set(float64(len(twins)))
	a.judgeUnjudged()
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
// An identity change (a rotated SVID, a new bundle, a federated trust
// domain's bundle arriving or changing) rebuilds the last State, so the
// new secrets are pushed on the same stream.
func (a *Agent) Run(ctx context.Context, src registry.Source) error {
	var changed, federated <-chan struct{}
	if a.opts.HTTP != nil {
		ch, cancel := a.opts.HTTP.Identities.Subscribe()
		defer cancel()
		changed = ch
		if a.opts.HTTP.Federated != nil {
			ch, cancel := a.opts.HTTP.Federated.Subscribe()
			defer cancel()
			federated = ch
		}
	}
	go a.pairs.SampleProxy(ctx)
	updates := src.Watch(ctx)
	for {
		select {
		case u, ok := <-updates:
			if !ok {
				return ctx.Err()
			}
			if u.Err != nil {
				_ = a.RegistryError(u.Err)
				continue
			}
			_ = a.Apply(u.State)
		case <-changed:
			a.rebuild()
		case <-federated:
			a.rebuild()
		}
	}
}

// rebuild applies the last State again, for its secrets changed: an
// SVID rotated, the local bundle or a federated one moved.
func (a *Agent) rebuild() {
	a.mu.Lock()
	st := a.last
	a.mu.Unlock()
	if st != nil {
		_ = a.Apply(st)
	}
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
	// The state file keeps the secrets whole (a restart serves them), so
	// it is readable by the agent alone.
	b, err := dumpResources(a.opts.Node, a.opts.Mode, version, out.Resources, false)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(a.opts.StateDir, 0o755); err != nil {
		return fmt.Errorf("failed to create state dir %q: %w", a.opts.StateDir, err)
	}
	tmp := filepath.Join(a.opts.StateDir, ".last-good.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("failed to write %q: %w", tmp, err)
	}
	dst := filepath.Join(a.opts.StateDir, LastGoodFile)
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("failed to rename %q to %q: %w", tmp, dst, err)
	}
	return nil
}

func cacheLogger(l *slog.Logger) log.Logger {
	// go-control-plane logs every watch and response with the stream's
	// subscription maps as arguments: they are formatted only when their
	// level is on, or each xDS response pays for printing every name.
	at := func(level slog.Level) func(string, ...any) {
		return func(f string, args ...any) {
			if l.Enabled(context.Background(), level) {
				l.Log(context.Background(), level, fmt.Sprintf(f, args...), "component", "xds-cache")
			}
		}
	}
	return log.LoggerFuncs{
		DebugFunc: at(slog.LevelDebug),
		InfoFunc:  at(slog.LevelDebug),
		WarnFunc:  at(slog.LevelWarn),
		ErrorFunc: at(slog.LevelError),
	}
}
