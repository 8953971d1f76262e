// Package manifest describes one soak run: the build(s) it ran, its
// measurement windows, the windows excluded from grading and why, where its
// evidence lives, and the thresholds each gate is graded against.
//
// Paths inside a manifest are relative to the manifest's own directory, so
// a recorded soak moves as one folder.
package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// Manifest is one soak run.
type Manifest struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// Builds lists every build revision that ran in the soak; each window
	// names one of them.
	Builds []string `json:"builds"`
	// Start and End bound the soak; like every window's and exclusion's,
	// they must be sample times of the series the gates read (Window).
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// TargetRPS is the paced load each measurement window was driven at.
	TargetRPS float64    `json:"target_rps,omitempty"`
	Windows   []Window   `json:"windows,omitempty"`
	Excluded  []Excluded `json:"excluded,omitempty"`
	// Events are chaos steps graded like the rest of the soak: nothing is
	// left out of any gate for them. They are listed so the report can say
	// what the mesh carried and when.
	Events  []Event `json:"events,omitempty"`
	Sources Sources `json:"sources"`
	Gates   Gates   `json:"gates"`

	// Dir is the directory the manifest was read from.
	Dir string `json:"-"`
	// Path is the manifest file.
	Path string `json:"-"`
	// SHA256 is the hex sha256 of the bytes Load decoded: a grade binds
	// the manifest it was graded from by it. Empty for a manifest built in
	// memory.
	SHA256 string `json:"-"`
}

// Window is one measurement window of the per-request CPU gate. Windows are
// declared in time order and paired in that order (1st with 2nd, 3rd with
// 4th, ...), and must follow an ABBA schedule: h2,h3,h3,h2 gives the pairs
// (h2,h3) and (h3,h2), which cancels a linear drift between them. A
// schedule that is not ABBA (h2,h3,h2,h3 would let a drift add to every
// pair alike) is refused, naming the first window out of order.
//
// Start and End must be sample times of every Prometheus series the gate
// reads (a query_range whose start lies on the windows' grid and whose step
// divides their lengths): growth between two samples cannot be split
// between windows without a guess, so a boundary between samples is
// refused with the samples either side of it.
type Window struct {
	Name     string    `json:"name"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Protocol string    `json:"protocol"`
	Build    string    `json:"build"`
	// CPUProfiles, when set, are pprof CPU profiles of the proxies for this
	// window; their summed CPU replaces sources.proxy_cpu.
	CPUProfiles []string `json:"cpu_profiles,omitempty"`
}

// Excluded is a span left out of the load-generator error count and the
// count gates that say so (a planned roll, a chaos step), with the reason.
type Excluded struct {
	Name   string    `json:"name"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Reason string    `json:"reason"`
}

// Event is a graded chaos step (an agent restart, a pod leaving and
// returning, SVID rotation, a network fault), with what was done.
type Event struct {
	Name  string    `json:"name"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	What  string    `json:"what"`
	// Fault makes the event a network fault, its Start..End the fault's
	// own span: gates.network_faults grades it from sources.probe_log, and
	// the liveness SLO leaves out its span and its kind's allowance after.
	Fault *Fault `json:"fault,omitempty"`
}

// Fault is what a network fault event put where.
type Fault struct {
	// Kind is one of FaultKinds.
	Kind string `json:"kind"`
	// Node is the node whose link carried the fault, Links its ends.
	Node  string   `json:"node"`
	Links []string `json:"links,omitempty"`
}

// The network fault kinds.
const (
	FaultNetem     = "netem"
	FaultLinkFlap  = "link-flap"
	FaultPartition = "partition"
)

// FaultKinds are the network fault kinds a manifest may name.
var FaultKinds = []string{FaultNetem, FaultLinkFlap, FaultPartition}

// Duration is a time.Duration written as Go writes one ("3s", "1m30s").
type Duration struct{ time.Duration }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"3s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// NetworkFaultsGate holds every network fault event to its kind's bound,
// read from the probe log (sources.probe_log).
type NetworkFaultsGate struct {
	// ProbeKinds are the probe kinds (the log's "kind") each fault must see
	// recover.
	ProbeKinds []string `json:"probe_kinds"`
	// Kinds bound each fault kind.
	Kinds map[string]FaultBound `json:"kinds"`
}

// FaultBound is what one fault kind is held to.
type FaultBound struct {
	// Allowance is how long after a fault's end its probes are still the
	// fault's: failures there count against MaxFailed, not the liveness
	// SLO.
	Allowance Duration `json:"allowance"`
	// MaxFailed bounds, per probe kind, the time its probes failed in the
	// fault's span or its allowance: the span's length times the share of
	// the kind's probes started there that failed. A bound in time, not a
	// count, holds every kind to the same outage whatever its rate: a kind
	// probing 30 targets a cycle fails 30 times as many probes in the
	// same second down.
	MaxFailed Duration `json:"max_failed"`
	// MaxRecovery bounds, per probe kind in ProbeKinds, the time from the
	// fault's end to the end of the first probe of that kind that
	// succeeded after it. At most Allowance: a slower recovery would fail
	// probes the SLO counts.
	MaxRecovery Duration `json:"max_recovery"`
}

// Series names the series of a Prometheus query_range file.
type Series struct {
	Prometheus string            `json:"prometheus"`
	Match      map[string]string `json:"match"`
}

// LoadGen names a load generator's records.
type LoadGen struct {
	// K6Summary is an end-of-test summary in any of k6's shapes.
	K6Summary string `json:"k6_summary,omitempty"`
	// K6Events is a k6 --out json file holding (at least) every failed
	// request, so failures can be placed in time.
	K6Events string `json:"k6_events,omitempty"`
	// Vegeta is a vegeta results file (json or csv encoding).
	Vegeta string `json:"vegeta,omitempty"`
}

// Sources says where each measured quantity comes from.
type Sources struct {
	// ProxyCPU: CPU-seconds counters of the proxies on the request path
	// (container_cpu_usage_seconds_total), summed.
	ProxyCPU *Series `json:"proxy_cpu,omitempty"`
	// ProxyRequests: requests the proxy counted (the denominator of CPU per
	// request).
	ProxyRequests *Series `json:"proxy_requests,omitempty"`
	// ClientRequests: requests the load generator sent, as a counter.
	ClientRequests *Series `json:"client_requests,omitempty"`
	// ProbesTotal and ProbesFailed: the liveness prober's counters.
	ProbesTotal  *Series  `json:"probes_total,omitempty"`
	ProbesFailed *Series  `json:"probes_failed,omitempty"`
	LoadGen      *LoadGen `json:"loadgen,omitempty"`
	// ProbeLog is the prober's own record, one JSON object a line (time,
	// kind, ok, latency_ms): what gates.network_faults reads.
	ProbeLog string `json:"probe_log,omitempty"`
}

// Gates holds the thresholds. A gate present in the manifest is required.
type Gates struct {
	CPURatio      *CPURatioGate      `json:"cpu_ratio,omitempty"`
	Liveness      *LivenessGate      `json:"liveness,omitempty"`
	Counts        []CountGate        `json:"counts,omitempty"`
	NetworkFaults *NetworkFaultsGate `json:"network_faults,omitempty"`
	Leaks         []LeakGate         `json:"leaks,omitempty"`
}

// LeakGate bounds how fast a resource of the mesh's processes (resident
// memory, open files, goroutines, recorded pairs) grows over the soak: a
// gauge sampled over the run, its growth per hour fitted (Theil–Sen)
// process by process.
type LeakGate struct {
	Name string `json:"name"`
	// About says, for the report's reader, what is sampled and from where.
	About string `json:"about,omitempty"`
	// Series selects the gauge's samples.
	Series *Series `json:"series"`
	// Group names the labels that tell one process apart from another
	// (node, component): each group is fitted on its own and held to the
	// bound. Life, when set, is the label that tells a group's lives
	// apart (a restarted process starts again from its own level), and
	// growth is fitted within each life only; unset, a group is one life
	// (a resource carried across restarts, as the agent's recorded pairs
	// are, through its state file).
	Group []string `json:"group"`
	Life  string   `json:"life,omitempty"`
	// MaxPerHour is the fastest growth that passes, in Unit per hour.
	MaxPerHour float64 `json:"max_per_hour"`
	// Unit names the gauge's unit: "bytes" is shown in MiB.
	Unit string `json:"unit,omitempty"`
	// Settle leaves out each life's first samples: a process's start-up
	// growth (heaps and pools filling) is not a leak.
	Settle Duration `json:"settle,omitempty"`
	// MinSamples and MinSpan are the least a group must hold, after
	// settling and summed over its lives, for its slope to decide
	// anything: fewer samples or a shorter span leave the gate
	// inconclusive, never passed.
	MinSamples int      `json:"min_samples"`
	MinSpan    Duration `json:"min_span"`
	// Expect names the groups (their Group label values joined by "/",
	// "node-a/proxy") that must be measured: one missing is not measured,
	// and the gate inconclusive.
	Expect []string `json:"expect,omitempty"`
}

// CPURatioGate: h3/h2 per-request proxy CPU.
type CPURatioGate struct {
	// Max is the highest ratio that passes (proposal 038: 1.5).
	Max float64 `json:"max"`
	// Confidence of the interval (default 0.95).
	Confidence float64 `json:"confidence,omitempty"`
	// MinAchieved: a window whose achieved rate is below this fraction of
	// target_rps is invalid (default 0.95).
	MinAchieved float64 `json:"min_achieved,omitempty"`
	// MaxCountSkew: a window whose proxy and client request counts differ
	// by more than this fraction is invalid (default 0.01).
	MaxCountSkew float64 `json:"max_count_skew,omitempty"`
}

// LivenessGate: the prober SLO.
type LivenessGate struct {
	// SLO is the success ratio in percent as a decimal string ("99.999"),
	// read exactly: 9 failures in 719,984 fails 99.999 % and passes 99.99 %,
	// a difference binary floating point would blur at the boundary.
	SLO string `json:"slo"`
}

// CountGate: a count that must stay at or below Limit.
type CountGate struct {
	Name string `json:"name"`
	// About says, for the report's reader, what the gate counts and why
	// its limit holds.
	About string `json:"about,omitempty"`
	// Exactly one of Series and LoadGenErrors.
	Series        *Series `json:"series,omitempty"`
	LoadGenErrors bool    `json:"loadgen_errors,omitempty"`
	Limit         int64   `json:"limit"`
	// ApplyExclusions leaves the excluded windows out of the count.
	// Load-generator errors always leave them out.
	ApplyExclusions bool `json:"apply_exclusions,omitempty"`
}

// Protocols a window may be labelled with.
const (
	H2 = "h2"
	H3 = "h3"
)

// Load reads and validates a manifest (YAML or JSON).
func Load(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read soak manifest: %w", err)
	}
	m, err := decode(path, b)
	if err != nil {
		return nil, err
	}
	m.Path = path
	m.Dir = filepath.Dir(path)
	sum := sha256.Sum256(b)
	m.SHA256 = hex.EncodeToString(sum[:])
	if err := m.Validate(); err != nil {
		return nil, err
	}
	return m, nil
}

// decode reads YAML or JSON strictly. An unknown field is reported with its
// path from the top of the manifest (gates.cpu_ratio.maxx,
// windows[3].protocl): a misspelt threshold silently dropped would grade
// against a default nobody chose.
func decode(path string, b []byte) (*Manifest, error) {
	js, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, fmt.Errorf("soak manifest %s: %w", path, err)
	}
	var m Manifest
	strict, err := kjson.UnmarshalStrict(js, &m)
	if err != nil {
		if field := badTime(js); field != "" {
			return nil, fmt.Errorf("soak manifest %s: field %s: %w", path, field, err)
		}
		return nil, fmt.Errorf("soak manifest %s: %w", path, err)
	}
	if len(strict) > 0 {
		return nil, fmt.Errorf("soak manifest %s: %w", path, errors.Join(strict...))
	}
	return &m, nil
}

// badTime returns the path of the first start or end that is not an
// RFC 3339 time, or "". The decoder's own error names the value but not
// which of the manifest's many starts and ends holds it.
func badTime(js []byte) string {
	var doc struct {
		Start, End any
		Windows    []struct{ Start, End any }
		Excluded   []struct{ Start, End any }
	}
	if json.Unmarshal(js, &doc) != nil {
		return ""
	}
	type field struct {
		path string
		v    any
	}
	fields := []field{{"start", doc.Start}, {"end", doc.End}}
	for i, w := range doc.Windows {
		fields = append(fields, field{fmt.Sprintf("windows[%d].start", i), w.Start}, field{fmt.Sprintf("windows[%d].end", i), w.End})
	}
	for i, x := range doc.Excluded {
		fields = append(fields, field{fmt.Sprintf("excluded[%d].start", i), x.Start}, field{fmt.Sprintf("excluded[%d].end", i), x.End})
	}
	for _, f := range fields {
		if s, ok := f.v.(string); ok {
			if _, err := time.Parse(time.RFC3339, s); err != nil {
				return f.path
			}
		} else if f.v != nil {
			return f.path
		}
	}
	return ""
}

// FileNames are the names a soak folder's manifest may have.
var FileNames = []string{"manifest.yaml", "manifest.json"}

// Find returns the manifest of every soak folder directly under dir, in
// folder order. A folder holding more than one is an error: which of them
// is the soak would be a guess.
func Find(dir string) ([]string, error) {
	byFolder := map[string][]string{}
	var folders []string
	for _, name := range FileNames {
		found, err := filepath.Glob(filepath.Join(dir, "*", name))
		if err != nil {
			return nil, fmt.Errorf("failed to list soak manifests under %s: %w", dir, err)
		}
		for _, p := range found {
			f := filepath.Dir(p)
			if byFolder[f] == nil {
				folders = append(folders, f)
			}
			byFolder[f] = append(byFolder[f], p)
		}
	}
	if len(folders) == 0 {
		return nil, fmt.Errorf("no soak manifest (*/%s) under %s", strings.Join(FileNames, " or */"), dir)
	}
	sort.Strings(folders)
	out := make([]string, 0, len(folders))
	for _, f := range folders {
		if ps := byFolder[f]; len(ps) > 1 {
			return nil, fmt.Errorf("soak folder %s holds %s: keep one manifest", f, strings.Join(ps, " and "))
		}
		out = append(out, byFolder[f][0])
	}
	return out, nil
}

// Folder is the name of the folder the manifest was read from, which is
// the name of the soak's report folder (reports/latest/soaks/<folder>,
// reports/runs/<folder>).
func (m *Manifest) Folder() (string, error) {
	abs, err := filepath.Abs(m.Dir)
	if err != nil {
		return "", fmt.Errorf("soak manifest %s: failed to resolve its folder: %w", m.Path, err)
	}
	name := filepath.Base(abs)
	if name == string(filepath.Separator) || name == "." {
		return "", fmt.Errorf("soak manifest %s: folder %s has no name to file its reports under", m.Path, abs)
	}
	return name, nil
}

// Resolve turns a manifest-relative path into one usable from here.
func (m *Manifest) Resolve(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(m.Dir, p)
}

func (m *Manifest) errf(field, format string, args ...any) error {
	return fmt.Errorf("soak manifest %s: field %s: %s", m.Path, field, fmt.Sprintf(format, args...))
}

// Validate checks what can be checked without reading the evidence and
// fills the CPU gate's defaults.
// Windows of different builds are allowed here: the CPU gate refuses to
// pair them and says so in the report, where the reader needs it.
func (m *Manifest) Validate() error {
	if m.Name == "" {
		return m.errf("name", "empty")
	}
	if len(m.Builds) == 0 {
		return m.errf("builds", "empty: a grade must say which build it judges")
	}
	if m.Start.IsZero() || m.End.IsZero() || !m.End.After(m.Start) {
		return m.errf("start/end", "the soak must have a start before its end (got %s .. %s)", m.Start, m.End)
	}
	builds := map[string]bool{}
	for _, b := range m.Builds {
		builds[b] = true
	}
	for i, w := range m.Windows {
		f := fmt.Sprintf("windows[%d] (%s)", i, w.Name)
		if w.Name == "" {
			return m.errf(f+".name", "empty")
		}
		if w.Protocol != H2 && w.Protocol != H3 {
			return m.errf(f+".protocol", "%q is neither h2 nor h3", w.Protocol)
		}
		if !builds[w.Build] {
			return m.errf(f+".build", "%q is not one of builds %v", w.Build, m.Builds)
		}
		if !w.End.After(w.Start) {
			return m.errf(f+".end", "not after start")
		}
		if w.Start.Before(m.Start) || w.End.After(m.End) {
			return m.errf(f, "lies outside the soak %s .. %s", m.Start.Format(time.RFC3339), m.End.Format(time.RFC3339))
		}
		if i > 0 && w.Start.Before(m.Windows[i-1].End) {
			return m.errf(f+".start", "overlaps or precedes the window before it")
		}
	}
	if err := m.checkABBA(); err != nil {
		return err
	}
	for i, x := range m.Excluded {
		f := fmt.Sprintf("excluded[%d] (%s)", i, x.Name)
		if x.Reason == "" {
			return m.errf(f+".reason", "empty: an exclusion must say why")
		}
		if !x.End.After(x.Start) {
			return m.errf(f+".end", "not after start")
		}
		for _, w := range m.Windows {
			if x.Start.Before(w.End) && w.Start.Before(x.End) {
				return m.errf(f, "overlaps measurement window %s: a measured window cannot contain a roll or chaos step", w.Name)
			}
		}
	}
	for i, ev := range m.Events {
		f := fmt.Sprintf("events[%d] (%s)", i, ev.Name)
		if ev.Name == "" || ev.What == "" {
			return m.errf(f, "needs a name and what was done")
		}
		if !ev.End.After(ev.Start) {
			return m.errf(f+".end", "not after start")
		}
		if ev.Start.Before(m.Start) || ev.End.After(m.End) {
			return m.errf(f, "lies outside the soak %s .. %s", m.Start.Format(time.RFC3339), m.End.Format(time.RFC3339))
		}
		if ev.Fault != nil {
			nf := m.Gates.NetworkFaults
			if nf == nil {
				return m.errf(f+".fault", "a network fault needs gates.network_faults to bound it")
			}
			if _, ok := nf.Kinds[ev.Fault.Kind]; !ok {
				return m.errf(f+".fault.kind", "%q has no bound in gates.network_faults.kinds", ev.Fault.Kind)
			}
			if ev.Fault.Node == "" {
				return m.errf(f+".fault.node", "empty")
			}
		}
	}
	if err := m.validateFaults(); err != nil {
		return err
	}
	if err := m.validateLeaks(); err != nil {
		return err
	}
	g := m.Gates
	if g.CPURatio == nil && g.Liveness == nil && len(g.Counts) == 0 && g.NetworkFaults == nil && len(g.Leaks) == 0 {
		return m.errf("gates", "empty: nothing to grade")
	}
	if c := g.CPURatio; c != nil {
		if c.Max <= 0 {
			return m.errf("gates.cpu_ratio.max", "must be positive")
		}
		if c.Confidence == 0 {
			c.Confidence = 0.95
		}
		if c.Confidence <= 0 || c.Confidence >= 1 {
			return m.errf("gates.cpu_ratio.confidence", "%v is not in (0, 1)", c.Confidence)
		}
		if c.MinAchieved == 0 {
			c.MinAchieved = 0.95
		}
		if c.MaxCountSkew == 0 {
			c.MaxCountSkew = 0.01
		}
		if m.TargetRPS <= 0 {
			return m.errf("target_rps", "must be positive when gates.cpu_ratio is set")
		}
		if len(m.Windows) == 0 {
			return m.errf("windows", "empty while gates.cpu_ratio is set")
		}
		if m.Sources.ProxyRequests == nil || m.Sources.ClientRequests == nil {
			return m.errf("sources", "proxy_requests and client_requests are required by gates.cpu_ratio")
		}
		for _, w := range m.Windows {
			if len(w.CPUProfiles) == 0 && m.Sources.ProxyCPU == nil {
				return m.errf("sources.proxy_cpu", "missing, and window %s has no cpu_profiles", w.Name)
			}
		}
	}
	if l := g.Liveness; l != nil {
		if _, err := ParseSLO(l.SLO); err != nil {
			return m.errf("gates.liveness.slo", "%v", err)
		}
		if m.Sources.ProbesTotal == nil || m.Sources.ProbesFailed == nil {
			return m.errf("sources", "probes_total and probes_failed are required by gates.liveness")
		}
	}
	for i, c := range g.Counts {
		f := fmt.Sprintf("gates.counts[%d] (%s)", i, c.Name)
		if c.Name == "" {
			return m.errf(f+".name", "empty")
		}
		if (c.Series == nil) == !c.LoadGenErrors {
			return m.errf(f, "needs exactly one of series and loadgen_errors")
		}
		if c.LoadGenErrors && m.Sources.LoadGen == nil {
			return m.errf("sources.loadgen", "missing, required by %s", f)
		}
		if c.Limit < 0 {
			return m.errf(f+".limit", "negative")
		}
	}
	for name, s := range map[string]*Series{"proxy_cpu": m.Sources.ProxyCPU, "proxy_requests": m.Sources.ProxyRequests,
		"client_requests": m.Sources.ClientRequests, "probes_total": m.Sources.ProbesTotal, "probes_failed": m.Sources.ProbesFailed} {
		if s != nil && (s.Prometheus == "" || len(s.Match) == 0) {
			return m.errf("sources."+name, "needs prometheus (a file) and match (labels)")
		}
	}
	if lg := m.Sources.LoadGen; lg != nil {
		if lg.K6Summary == "" && lg.Vegeta == "" {
			return m.errf("sources.loadgen", "needs k6_summary or vegeta")
		}
		if lg.K6Events != "" && lg.K6Summary == "" {
			return m.errf("sources.loadgen.k6_events", "needs k6_summary: the events file carries the times, the summary the totals")
		}
	}
	return nil
}

func (m *Manifest) validateFaults() error {
	nf := m.Gates.NetworkFaults
	if nf == nil {
		return nil
	}
	if m.Sources.ProbeLog == "" {
		return m.errf("sources.probe_log", "missing, required by gates.network_faults")
	}
	if len(nf.ProbeKinds) == 0 {
		return m.errf("gates.network_faults.probe_kinds", "empty: a fault's recovery must be graded on some probe kind")
	}
	if len(nf.Kinds) == 0 {
		return m.errf("gates.network_faults.kinds", "empty")
	}
	for k, b := range nf.Kinds {
		f := "gates.network_faults.kinds." + k
		switch {
		case !slicesContains(FaultKinds, k):
			return m.errf(f, "%q is not a fault kind (%s)", k, strings.Join(FaultKinds, ", "))
		case b.Allowance.Duration <= 0:
			return m.errf(f+".allowance", "must be positive")
		case b.MaxRecovery.Duration <= 0 || b.MaxRecovery.Duration > b.Allowance.Duration:
			return m.errf(f+".max_recovery", "%s must lie in (0, allowance %s]: a recovery slower than the allowance fails probes the liveness SLO counts", b.MaxRecovery, b.Allowance)
		case b.MaxFailed.Duration < 0:
			return m.errf(f+".max_failed", "negative")
		}
	}
	return nil
}

// MinLeakSamples is the fewest samples a leak gate may ask a group for: a
// slope through two points is whatever those two points were.
const MinLeakSamples = 3

func (m *Manifest) validateLeaks() error {
	names := map[string]bool{}
	for i, lg := range m.Gates.Leaks {
		f := fmt.Sprintf("gates.leaks[%d] (%s)", i, lg.Name)
		switch {
		case lg.Name == "":
			return m.errf(f+".name", "empty")
		case names[lg.Name]:
			return m.errf(f+".name", "%q names two leak gates", lg.Name)
		case lg.Series == nil || lg.Series.Prometheus == "" || len(lg.Series.Match) == 0:
			return m.errf(f+".series", "needs prometheus (a file) and match (labels)")
		case len(lg.Group) == 0:
			return m.errf(f+".group", "empty: name the labels that tell one process from another")
		case slicesContains(lg.Group, lg.Life):
			return m.errf(f+".life", "%q is also a group label: a life must be told apart within its group", lg.Life)
		case !(lg.MaxPerHour > 0):
			return m.errf(f+".max_per_hour", "%v must be positive", lg.MaxPerHour)
		case lg.Settle.Duration < 0:
			return m.errf(f+".settle", "negative")
		case lg.MinSamples < MinLeakSamples:
			return m.errf(f+".min_samples", "%d: at least %d", lg.MinSamples, MinLeakSamples)
		case lg.MinSpan.Duration <= 0:
			return m.errf(f+".min_span", "must be positive: a slope over no time extrapolates nothing")
		}
		names[lg.Name] = true
	}
	return nil
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Faults returns the network fault events in declared order.
func (m *Manifest) Faults() []Event {
	var out []Event
	for _, ev := range m.Events {
		if ev.Fault != nil {
			out = append(out, ev)
		}
	}
	return out
}

// checkABBA refuses windows that cannot be paired in ABBA order: with A
// the first window's protocol, window i must be A when i mod 4 is 0 or 3
// and B otherwise, and every window needs a partner.
func (m *Manifest) checkABBA() error {
	ws := m.Windows
	if len(ws) == 0 {
		return nil
	}
	a, b := ws[0].Protocol, H3
	if a == H3 {
		b = H2
	}
	for i, w := range ws {
		want := a
		if k := i % 4; k == 1 || k == 2 {
			want = b
		}
		if w.Protocol != want {
			return m.errf(fmt.Sprintf("windows[%d] (%s).protocol", i, w.Name),
				"%s breaks the ABBA order %s,%s,%s,%s,... begun by %s: window %d of pair %d must be %s", w.Protocol, a, b, b, a, ws[0].Name, i%2+1, i/2+1, want)
		}
	}
	if n := len(ws); n%2 == 1 {
		return m.errf(fmt.Sprintf("windows[%d] (%s)", n-1, ws[n-1].Name), "has no partner: %d windows cannot be paired", n)
	}
	return nil
}

// ParseSLO reads a success-ratio percentage ("99.999") as an exact
// fraction of one.
func ParseSLO(s string) (*big.Rat, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, fmt.Errorf("%q is not a decimal percentage", s)
	}
	if r.Sign() <= 0 || r.Cmp(big.NewRat(100, 1)) > 0 {
		return nil, fmt.Errorf("%s%% is not in (0, 100]", s)
	}
	return r.Quo(r, big.NewRat(100, 1)), nil
}

// InExcluded returns the exclusion containing t, if any.
func (m *Manifest) InExcluded(t time.Time) (Excluded, bool) {
	for _, x := range m.Excluded {
		if !t.Before(x.Start) && t.Before(x.End) {
			return x, true
		}
	}
	return Excluded{}, false
}
