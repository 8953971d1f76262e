package run

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The resource gauges a run with leak gates writes into
// prometheus/resources.json, one series per process life: labels node,
// component (agent or proxy) and life (1, 2, … as the node's process of
// that component is replaced), except the agent's pairs, which outlive
// its processes through its state file and carry no life.
const (
	// SeriesResident: resident memory in bytes (a proxy's from
	// /proc/<pid>/statm, an agent's own process_resident_memory_bytes).
	SeriesResident = "aether_soak_resident_bytes"
	// SeriesOpenFDs: open file descriptors (a proxy's /proc/<pid>/fd, an
	// agent's process_open_fds).
	SeriesOpenFDs = "aether_soak_open_fds"
	// SeriesGoroutines: goroutines, from go_goroutines where the process
	// exports it (the agents, and the proxies that export the Go
	// collector's metrics).
	SeriesGoroutines = "aether_soak_goroutines"
	// SeriesPairs: the QUIC pairs an agent holds recorded, live and
	// dormant (aether_agent_pairs): the pair state it keeps in its state
	// file.
	SeriesPairs = "aether_soak_agent_pairs"
)

// The agent's (and the proxy's) own metrics the resource sampling reads.
const (
	metricResident  = "process_resident_memory_bytes"
	metricOpenFDs   = "process_open_fds"
	metricStart     = "process_start_time_seconds"
	metricGoroutine = "go_goroutines"
	metricPairs     = "aether_agent_pairs"
)

// LeakConfig is the leak gates' sampling and bounds (gates.leaks).
type LeakConfig struct {
	// Every is how often each process is sampled, a whole number of
	// ticks: a fit holds every pair of a life's samples, so an hour at one
	// a second would be six million slopes per process.
	Every time.Duration
	// Settle, MinSamples and MinSpan are each gate's (manifest.LeakGate);
	// PairsMinSpan is the pairs gate's MinSpan.
	Settle       time.Duration
	MinSamples   int
	MinSpan      time.Duration
	PairsMinSpan time.Duration
	// The bounds on each process's growth per hour.
	ResidentBytes, OpenFDs, Goroutines, Pairs float64
}

// DefaultLeaks are the long soak's leak gates. The bounds are loose
// against the mesh's steady state and tight against a leak proportional
// to its traffic: the soak carries some 450 requests and probes a
// second, so a leak of one file, goroutine or kilobyte per thousand of
// them grows 1,600 an hour, or 1.5 MiB.
//
//   - resident memory 32 MiB/h: a proxy or agent holds 20 to 60 MiB,
//     and a Go heap settles within minutes; doubling in two hours is a
//     leak.
//   - open files 60/h, one a minute: the processes hold their listeners
//     and pooled connections, bounded by the scenario, not by time.
//   - goroutines 300/h: a goroutine per leaked connection or stream
//     would add thousands.
//   - recorded pairs 20/h: bounded by the (source account, destination)
//     pairs of the scenario; more than that over an hour is a pair kept
//     that should have been pruned, or made twice.
//
// Each life settles for a minute (an agent's heap still grows for most
// of its first one), and a process needs 12 settled samples over 5
// minutes, its lives summed, to be decided at all. The pairs need 20
// minutes: an agent records them as the first HTTP/3 windows fetch their
// twins, a climb to the scenario's bound over the soak's first minutes
// that a shorter span would read as growth per hour.
func DefaultLeaks() LeakConfig {
	return LeakConfig{Every: 5 * time.Second, Settle: time.Minute, MinSamples: 12, MinSpan: 5 * time.Minute, PairsMinSpan: 20 * time.Minute,
		ResidentBytes: 32 << 20, OpenFDs: 60, Goroutines: 300, Pairs: 20}
}

func (l LeakConfig) check(tick time.Duration) error {
	switch {
	case tick <= 0 || l.Every < tick || l.Every%tick != 0:
		return fmt.Errorf("leak sampling every %s: must be a whole number of ticks (%s)", l.Every, tick)
	case l.Settle < 0 || l.MinSpan <= 0 || l.PairsMinSpan <= 0 || l.MinSamples < 3:
		return fmt.Errorf("leak gates: settle %s, min spans %s and %s, min samples %d: settle must not be negative, the spans must be positive, and a slope needs 3 samples",
			l.Settle, l.MinSpan, l.PairsMinSpan, l.MinSamples)
	case !(l.ResidentBytes > 0 && l.OpenFDs > 0 && l.Goroutines > 0 && l.Pairs > 0):
		return fmt.Errorf("leak gates: every bound must be positive, got resident %g B/h, fds %g/h, goroutines %g/h, pairs %g/h",
			l.ResidentBytes, l.OpenFDs, l.Goroutines, l.Pairs)
	}
	return nil
}

// resources is the sampler's resource sampling, on every every-th tick.
type resources struct {
	rec   *Recorder
	every int
}

// life numbers a node's successive processes of one component: a new
// identity (a pid, a start time) is a new life.
type life struct {
	id string
	n  int
}

func (l *life) of(id string) string {
	if id != l.id {
		l.id, l.n = id, l.n+1
	}
	return strconv.Itoa(l.n)
}

// SampleResources has the sampler record every agent's and proxy's
// resources into rec on every every-th tick.
func (s *Sampler) SampleResources(rec *Recorder, every int) {
	s.res = &resources{rec: rec, every: max(1, every)}
}

func (s *Sampler) addResource(name string, labels map[string]string, at time.Time, v float64) {
	if err := s.res.rec.Add(name, labels, at, v); err != nil {
		panic(err) // ticks are strictly increasing by construction
	}
}

// sampleProxyResources reads the node's current proxy process from /proc,
// and its goroutines from sc, the proxy's scrape of this tick, when the
// scrape is that process's: across a hot restart the metrics address
// moves from one epoch to the next between the scrape and the pid read,
// so the scrape's process_start_time_seconds must be the pid's own. A
// process gone between ticks (a hot restart's old epoch) is skipped: a
// gauge has no value to carry over.
func (s *Sampler) sampleProxyResources(ns *nodeState, pid int, sc scrape, at time.Time) {
	rss, fds, err := procResources(pid)
	if err != nil {
		s.miss(ns.n.Name + " proxy resources")
		return
	}
	lbl := map[string]string{"node": ns.n.Name, "component": "proxy", "life": ns.proxyLife.of(strconv.Itoa(pid))}
	s.addResource(SeriesResident, lbl, at, rss)
	s.addResource(SeriesOpenFDs, lbl, at, fds)
	g, ok := sc[metricGoroutine][""]
	if !ok {
		return
	}
	if start, ok := sc[metricStart][""]; !ok || !sameStart(pid, start) {
		s.miss(ns.n.Name + " proxy goroutines")
		return
	}
	s.addResource(SeriesGoroutines, lbl, at, g)
}

// sameStart says process pid started at start, a process collector's
// process_start_time_seconds, computed as the collector computes it: the
// boot time plus the process's start in clock ticks of 1/100 s.
func sameStart(pid int, start float64) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(stat), ')')
	if i < 0 {
		return false
	}
	// starttime is field 22; the fields after the command start at 3.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return false
	}
	ticks, err := strconv.ParseFloat(f[19], 64)
	if err != nil {
		return false
	}
	boot, err := bootTime()
	if err != nil {
		return false
	}
	return float64(boot)+ticks/100 == start
}

// bootTime is /proc/stat's btime, in seconds since the epoch.
func bootTime() (int64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "btime "); ok {
			return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/stat has no btime")
}

// procResources is a process's resident bytes and open descriptors.
func procResources(pid int) (rss, fds float64, err error) {
	statm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(statm))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("/proc/%d/statm: %q has no resident field", pid, statm)
	}
	pages, err := strconv.ParseFloat(f[1], 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/statm: %w", pid, err)
	}
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, 0, err
	}
	return pages * float64(os.Getpagesize()), float64(len(ents)), nil
}

// sampleAgentResources records what the agent's own metrics say of it;
// its life is told by its process start time.
func (s *Sampler) sampleAgentResources(ns *nodeState, sc scrape, at time.Time) {
	one := func(name string) (float64, bool) {
		v, ok := sc[name][""]
		return v, ok
	}
	start, ok := one(metricStart)
	if !ok {
		s.miss(ns.n.Name + " agent resources")
		return
	}
	lbl := map[string]string{"node": ns.n.Name, "component": "agent", "life": ns.agentLife.of(strconv.FormatFloat(start, 'f', -1, 64))}
	for _, m := range []struct{ metric, series string }{{metricResident, SeriesResident}, {metricOpenFDs, SeriesOpenFDs}, {metricGoroutine, SeriesGoroutines}} {
		if v, ok := one(m.metric); ok {
			s.addResource(m.series, lbl, at, v)
		}
	}
	if states, ok := sc[metricPairs]; ok {
		sum := 0.0
		for _, v := range states {
			sum += v
		}
		s.addResource(SeriesPairs, map[string]string{"node": ns.n.Name, "component": "agent"}, at, sum)
	}
}
