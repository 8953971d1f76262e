package run

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

// The files a run writes into its folder, beside the manifest.
const (
	ManifestFile = "manifest.yaml"
	CountersFile = "prometheus/counters.json"
	ResultsFile  = "vegeta/results.json"
	ProbesFile   = "probes.jsonl"
	// ResourcesFile holds the resource gauges of a run with leak gates.
	ResourcesFile = "prometheus/resources.json"
	SpansFile     = "spans.json"
)

// Outline is what a manifest says about a run besides its spans.
type Outline struct {
	Name        string
	Description string
	Build       string
	Start, End  time.Time
	TargetRPS   float64
	MaxRatio    float64
	SLO         string
	// PrunedLive says the agents export the count of twins pruned in use.
	PrunedLive bool
	// Partial, when set, says why the run stopped before its schedule's end.
	Partial string
	// Graded are events the whole soak carried (SVID rotation).
	Graded []manifest.Event
	// DirectInterval, the direct probes' interval, scales the network
	// faults' failure bounds (Bounds).
	DirectInterval time.Duration
	// Leaks, when set, adds the leak gates over ResourcesFile for every
	// node's agent and proxy (Nodes); Goroutines and Pairs say the agents
	// exported those (their gates are left out otherwise), ProxyGoroutines
	// that the proxies exported their goroutines too (the goroutine gate
	// then expects them).
	Leaks                              *LeakConfig
	Nodes                              []string
	Goroutines, Pairs, ProxyGoroutines bool
	// ProbesPlanned, when set, is how many liveness probes the planned
	// rate starts over the soak: the probes-short gate allows
	// ProbesShortFraction of it.
	ProbesPlanned int64
}

// ProbesShortFraction is the share of its planned liveness probes a soak
// may fail to start: a prober on a loaded machine drops a tick now and
// then, but one that kept less than 95% of its rate did not probe at the
// scale the soak claims.
const ProbesShortFraction = 0.05

// Manifest builds the run's manifest from its spans: windows become the
// CPU gate's ABBA windows, excluded steps its exclusions and the other
// chaos steps its graded events. A window without a partner (a run cut
// short) is dropped, since it cannot be paired.
func Manifest(o Outline, spans []Span) *manifest.Manifest {
	m := &manifest.Manifest{
		Name: o.Name, Description: o.Description, Builds: []string{o.Build},
		Start: o.Start, End: o.End, TargetRPS: o.TargetRPS,
		Sources: manifest.Sources{
			ProxyCPU:       series(SeriesProxyCPU),
			ProxyRequests:  series(SeriesProxyRequests),
			ClientRequests: series(SeriesClientRequests),
			ProbesTotal:    series(SeriesProbes),
			ProbesFailed:   series(SeriesProbesFailed),
			LoadGen:        &manifest.LoadGen{Vegeta: ResultsFile},
		},
		Gates: manifest.Gates{
			CPURatio: &manifest.CPURatioGate{Max: o.MaxRatio},
			Liveness: &manifest.LivenessGate{SLO: o.SLO},
			Counts: []manifest.CountGate{
				{Name: grade.Gate503NC, Series: series(SeriesNC), About: aboutNC},
				{Name: grade.GateCrashes, Series: series(SeriesProxyExits), About: aboutCrashes},
				{Name: grade.GateLoadGenErrors, LoadGenErrors: true, About: aboutLoadErrors},
				{Name: grade.GateStepsNotRun, Series: series(SeriesStepsNotRun), About: aboutNotRun},
			},
		},
	}
	if o.PrunedLive {
		m.Gates.Counts = append(m.Gates.Counts[:1], append([]manifest.CountGate{{Name: grade.GatePrunedLive, Series: series(SeriesPrunedLive), About: aboutPrunedLive}}, m.Gates.Counts[1:]...)...)
	}
	if o.ProbesPlanned > 0 {
		m.Gates.Counts = append(m.Gates.Counts, manifest.CountGate{Name: grade.GateProbesShort, Series: series(SeriesProbesShort),
			Limit: int64(float64(o.ProbesPlanned) * ProbesShortFraction),
			About: fmt.Sprintf("liveness probes the plan starts in the soak (%s) that did not start: a prober starved of CPU drops its ticks; at most %.0f%% of the plan", grade.FormatCount(o.ProbesPlanned), ProbesShortFraction*100)})
	}
	if o.Leaks != nil {
		m.Gates.Leaks = leakGates(o)
	}
	if o.Partial != "" {
		m.Description = "PARTIAL: " + o.Partial + ". " + m.Description
	}
	m.Events = append(m.Events, o.Graded...)
	var windows []manifest.Window
	for _, sp := range spans {
		switch {
		case sp.Kind.IsNetwork():
			addFault(m, o, sp)
		case sp.Kind == Measure:
			windows = append(windows, manifest.Window{Name: sp.Name, Start: sp.Start, End: sp.End, Protocol: sp.Protocol, Build: o.Build})
		case sp.Kind.Excluded():
			m.Excluded = append(m.Excluded, manifest.Excluded{Name: sp.Name, Start: sp.Start, End: sp.End, Reason: reason(sp)})
		default:
			m.Events = append(m.Events, manifest.Event{Name: sp.Name, Start: sp.Start, End: sp.End, What: sp.Detail})
		}
	}
	m.Windows = windows[:len(windows)/2*2]
	if len(m.Windows) == 0 {
		// A run stopped before its first pair ended has no ratio to grade,
		// and a CPU gate without windows is no manifest at all; the steps
		// not run still fail it.
		m.Gates.CPURatio = nil
		m.Description += " No ABBA pair ran whole: the h3/h2 CPU gate is not graded."
	}
	return m
}

// addFault lists a network fault step: an event with its fault over the
// fault's own span (from the step's start, when it went on, for its hold,
// clipped to the soak), graded by gates.network_faults from the probe
// log; and the whole step, the allowance after the fault included, as an
// excluded span, so the load generator's requests that failed while the
// fault held or the mesh recovered are left out of its count (the
// liveness SLO leaves out the same span, the fault gates grade its
// probes).
func addFault(m *manifest.Manifest, o Outline, sp Span) {
	if m.Gates.NetworkFaults == nil {
		m.Gates.NetworkFaults = &manifest.NetworkFaultsGate{ProbeKinds: DirectKinds, Kinds: Bounds()}
		m.Sources.ProbeLog = ProbesFile
	}
	end := sp.Start.Add(sp.Step.Fault.Hold)
	if end.After(sp.End) {
		end = sp.End
	}
	f := &manifest.Fault{Kind: sp.Kind.FaultKind(), Node: sp.Node}
	if sp.Ran != nil {
		f.Links = sp.Ran.Links
	}
	m.Events = append(m.Events, manifest.Event{Name: sp.Name, Start: sp.Start, End: end, What: sp.Detail, Fault: f})
	m.Excluded = append(m.Excluded, manifest.Excluded{Name: sp.Name, Start: sp.Start, End: sp.End,
		Reason: "network fault: the load generator's failures while it held and its " + sp.Step.Fault.Allowance.String() + " allowance after; its probes are graded by the network fault gates"})
}

// leakGates are the leak gates of o.Leaks: resident memory and open files
// of every node's agent and proxy, fitted within each process's lives;
// the agents' goroutines, and the proxies' where they export them; the agents' recorded
// pairs, which outlive a process (the state file carries them over), so a
// node's agents are fitted as one life.
func leakGates(o Outline) []manifest.LeakGate {
	l := o.Leaks
	var both, agents []string
	for _, n := range o.Nodes {
		both = append(both, n+"/agent", n+"/proxy")
		agents = append(agents, n+"/agent")
	}
	gate := func(name, series, unit, about string, perHour float64, life string, expect []string) manifest.LeakGate {
		span := l.MinSpan
		if series == SeriesPairs {
			span = l.PairsMinSpan
		}
		return manifest.LeakGate{Name: name, About: about, Unit: unit, MaxPerHour: perHour,
			Series: &manifest.Series{Prometheus: ResourcesFile, Match: map[string]string{"__name__": series}},
			Group:  []string{"node", "component"}, Life: life,
			Settle: manifest.Duration{Duration: l.Settle}, MinSamples: l.MinSamples, MinSpan: manifest.Duration{Duration: span}, Expect: expect}
	}
	every := l.Every.String()
	out := []manifest.LeakGate{
		gate(grade.GateLeakResident, SeriesResident, "bytes", "resident memory of every agent (its process_resident_memory_bytes) and proxy (/proc/<pid>/statm), every "+every+"; growth fitted within each process's life", l.ResidentBytes, "life", both),
		gate(grade.GateLeakFDs, SeriesOpenFDs, "fds", "open file descriptors of every agent (its process_open_fds) and proxy (/proc/<pid>/fd), every "+every+"; growth fitted within each process's life", l.OpenFDs, "life", both),
	}
	switch {
	case o.Goroutines && o.ProxyGoroutines:
		out = append(out, gate(grade.GateLeakGoroutines, SeriesGoroutines, "goroutines", "goroutines of every agent and proxy (its go_goroutines), every "+every+", fitted within each life", l.Goroutines, "life", both))
	case o.Goroutines:
		out = append(out, gate(grade.GateLeakGoroutines, SeriesGoroutines, "goroutines", "goroutines of every agent (its go_goroutines), every "+every+", fitted within each life; the proxies exported no Go runtime metrics, so theirs are not measured", l.Goroutines, "life", agents))
	}
	if o.Pairs {
		out = append(out, gate(grade.GateLeakPairs, SeriesPairs, "pairs", "QUIC pairs each agent holds recorded, live and dormant (aether_agent_pairs), every "+every+"; the state file carries them across restarts, so each node's agents are fitted as one", l.Pairs, "", agents))
	}
	return out
}

// What each count gate counts, for the report's reader. Only the load
// generator's errors leave the excluded spans out: a 503 NC, a prune of a
// live twin or a crash inside a switch or a hot restart is the mesh's
// failure all the same.
const (
	aboutNC = "requests the source pods' proxies answered 503 with flag NC (no cluster: the route's cluster, such as a QUIC twin, " +
		"was not there when the request came), counted by the proxies themselves, excluded spans included"
	aboutPrunedLive = "twins the agents pruned although they had served a request in the last minute " +
		"(" + metricPrunedLive + "), excluded spans included"
	aboutCrashes    = "proxy processes that exited on their own (a hot restart's handover excepted), excluded spans included"
	aboutLoadErrors = "the load generator's requests that failed or answered 1xx, 4xx or 5xx, outside the excluded spans"
	aboutNotRun     = "schedule steps (windows, switches, chaos) that did not run whole: a run cut short never passes"
)

func series(name string) *manifest.Series {
	return &manifest.Series{Prometheus: CountersFile, Match: map[string]string{"__name__": name}}
}

func reason(sp Span) string {
	switch sp.Kind {
	case Warmup:
		return fmt.Sprintf("warm-up on %s (--mesh-transport %s): discarded", sp.Protocol, transport(sp.Protocol))
	case Switch:
		return "transport switch: " + sp.Detail
	}
	return "chaos: " + sp.Detail
}

// WriteManifest writes m as the run folder's manifest.yaml and checks it
// loads back as the graders will read it.
func WriteManifest(dir string, m *manifest.Manifest) (string, error) {
	b, err := yaml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("failed to encode the soak manifest: %w", err)
	}
	head := "# Written by aether-soak run; the graders read it as any recorded soak's.\n"
	path := filepath.Join(dir, ManifestFile)
	if err := os.WriteFile(path, append([]byte(head), b...), 0o644); err != nil {
		return "", fmt.Errorf("failed to write the soak manifest: %w", err)
	}
	if _, err := manifest.Load(path); err != nil {
		return "", fmt.Errorf("the run's own manifest does not load: %w", err)
	}
	return path, nil
}

// SpanName names a step as the manifest lists it: windows w01-h2, w02-h3,
// …; every other step by its kind and sequence number.
func SpanName(s Step, window, seq int) string {
	if s.Kind == Measure {
		return fmt.Sprintf("w%02d-%s", window, s.Protocol)
	}
	name := fmt.Sprintf("s%02d-%s", seq, s.Kind)
	if s.Kind == Warmup || s.Kind == Switch {
		name += "-" + s.Protocol
	}
	if s.Node != "" && s.Kind != PodChurn {
		name += "-" + strings.TrimPrefix(s.Node, "node-")
	}
	return name
}
