package run

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/procstat"
)

// The proxy's and agent's own counters the sampler reads.
const (
	metricHTTPRequests = "aether_proxy_http_requests_total"
	metricPrunedLive   = "aether_agent_pairs_pruned_live_total"
)

// nodeState is what the sampler keeps per node between ticks.
type nodeState struct {
	n *node.Node
	// pid is the node's current proxy process (SetPID).
	// cpu is each proxy process's last CPU reading: a process that exited
	// keeps its last one, so the node's total never falls.
	cpu         map[int]time.Duration
	pid         int
	crashedPIDs map[int]bool
	requests    Monotonic
	nc          Monotonic
	pruned      Monotonic
	// last totals, carried over a tick whose scrape failed.
	lastReq, lastNC, lastPruned float64
	prunedSeen                  bool
	// instants are the moments the proxy was scraped, one per tick.
	instants []time.Time
	// proxyLife and agentLife number the node's processes for the
	// resource series.
	proxyLife, agentLife life
}

// Sampler reads, on every tick, each node's proxy CPU from /proc and its
// proxy's and agent's counters, and records them.
type Sampler struct {
	rec     *Recorder
	sources map[string][]string // node -> the outbound listeners of its load sources
	nodes   []*nodeState
	ticks   []time.Time
	// missed counts scrapes that failed, by node and what was scraped.
	mu       sync.Mutex
	missed   map[string]int
	exits    int
	replaced map[int]bool
	last     time.Time
	// res, when set, samples the processes' resources (SampleResources).
	res *resources
}

// NewSampler samples the nodes; sources names, per node, the outbound
// listeners whose requests are the load's.
func NewSampler(rec *Recorder, nodes []*node.Node, sources map[string][]string) *Sampler {
	s := &Sampler{rec: rec, sources: sources, missed: map[string]int{}, replaced: map[int]bool{}}
	for _, n := range nodes {
		s.nodes = append(s.nodes, &nodeState{n: n, pid: n.ProxyPID(), cpu: map[int]time.Duration{}, crashedPIDs: map[int]bool{}})
	}
	return s
}

// SetPID says which process is node's proxy now. The sampler reads the
// cluster's nodes only through this: a hot restart replaces a node's proxy
// on the executor's goroutine.
func (s *Sampler) SetPID(node string, pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ns := range s.nodes {
		if ns.n.Name == node {
			ns.pid = pid
		}
	}
}

func (s *Sampler) pid(ns *nodeState) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ns.pid
}

// Replaced marks a proxy process the run itself replaced (a hot restart):
// its exit is not a crash.
func (s *Sampler) Replaced(pid int) {
	s.mu.Lock()
	s.replaced[pid] = true
	s.mu.Unlock()
}

// Run samples at start, start+tick, … until ctx ends. It returns the last
// tick sampled.
func (s *Sampler) Run(ctx context.Context, start time.Time, tick time.Duration) time.Time {
	for k := 0; ; k++ {
		at := start.Add(time.Duration(k) * tick)
		select {
		case <-ctx.Done():
			return s.Last()
		case <-time.After(time.Until(at)):
		}
		s.sample(ctx, at)
	}
}

// Last is the last tick sampled (zero before the first).
func (s *Sampler) Last() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *Sampler) sample(ctx context.Context, at time.Time) {
	s.mu.Lock()
	res := s.res != nil && len(s.ticks)%s.res.every == 0
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, ns := range s.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.sampleNode(ctx, ns, at, res)
		}()
	}
	wg.Wait()
	s.mu.Lock()
	s.ticks = append(s.ticks, at)
	s.last = at
	exits := s.exits
	s.mu.Unlock()
	s.add(SeriesProxyExits, nil, at, float64(exits))
}

func (s *Sampler) add(name string, labels map[string]string, at time.Time, v float64) {
	if err := s.rec.Add(name, labels, at, v); err != nil {
		panic(err) // ticks are strictly increasing by construction
	}
}

func (s *Sampler) sampleNode(ctx context.Context, ns *nodeState, at time.Time, res bool) {
	lbl := map[string]string{"node": ns.n.Name}
	instant := time.Now()
	body, err := ns.n.Get(ctx, ns.n.ProxyMetrics, "/metrics")
	pid := s.pid(ns)
	var sc scrape
	if err == nil {
		if sc, err = parseText(body, metricHTTPRequests, metricGoroutine, metricStart); err == nil {
			reqs := sc[metricHTTPRequests]
			listeners := s.sources[ns.n.Name]
			ns.lastReq = ns.requests.Observe(where(reqs, func(l string) bool { return contains(listeners, label(l, "listener")) }))
			ns.lastNC = ns.nc.Observe(where(reqs, func(l string) bool {
				return label(l, "code") == "503" && strings.Contains(","+label(l, "flags")+",", ",NC,")
			}))
		}
	}
	if err != nil {
		s.miss(ns.n.Name + " proxy metrics")
	}
	ns.instants = append(ns.instants, instant)
	s.add(SeriesProxyRequests, lbl, at, ns.lastReq)
	s.add(SeriesNC, lbl, at, ns.lastNC)
	s.add(SeriesProxyCPU, lbl, at, s.readCPU(ns, pid).Seconds())
	if res {
		s.sampleProxyResources(ns, pid, sc, at)
	}
	s.sampleAgent(ctx, ns, at, lbl, res)
}

// readCPU reads every known proxy process of the node and returns their
// CPU time together. The current process being gone is a crash unless the
// run replaced it.
func (s *Sampler) readCPU(ns *nodeState, current int) time.Duration {
	if _, ok := ns.cpu[current]; !ok {
		ns.cpu[current] = 0
	}
	var total time.Duration
	for pid := range ns.cpu {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		alive := err == nil && !zombie(stat)
		if alive {
			if cpu, err := procstat.ParseProcStat(stat); err == nil {
				ns.cpu[pid] = cpu
			}
		}
		if !alive && pid == current && !ns.crashedPIDs[pid] {
			s.mu.Lock()
			if !s.replaced[pid] {
				ns.crashedPIDs[pid] = true
				s.exits++
			}
			s.mu.Unlock()
		}
		total += ns.cpu[pid]
	}
	return total
}

// zombie says the process has exited and waits to be reaped.
func zombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// sampleAgent records the agent's count of twins pruned while in use, once
// the agent is seen to export it; an agent that does not leaves the series
// absent and the gate unmeasured.
func (s *Sampler) sampleAgent(ctx context.Context, ns *nodeState, at time.Time, lbl map[string]string, res bool) {
	body, err := ns.n.Get(ctx, ns.n.AgentMetrics, "/metrics")
	if err == nil {
		var sc scrape
		if sc, err = parseText(body, metricPrunedLive, metricResident, metricOpenFDs, metricStart, metricGoroutine, metricPairs); err == nil {
			if v, ok := sc[metricPrunedLive]; ok {
				ns.prunedSeen = true
				ns.lastPruned = ns.pruned.Observe(v)
			}
			if res {
				s.sampleAgentResources(ns, sc, at)
			}
		}
	}
	if err != nil {
		s.miss(ns.n.Name + " agent metrics")
	}
	if ns.prunedSeen {
		s.add(SeriesPrunedLive, lbl, at, ns.lastPruned)
	}
}

func (s *Sampler) miss(what string) {
	s.mu.Lock()
	s.missed[what]++
	s.mu.Unlock()
}

// Missed says which scrapes failed and how often.
func (s *Sampler) Missed() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.missed {
		out[k] = v
	}
	return out
}

// Exits is how many proxy processes exited on their own so far.
func (s *Sampler) Exits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exits
}

// Ticks returns the ticks sampled.
func (s *Sampler) Ticks() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.ticks...)
}

// Finish writes the client's request counter and the prober's counters on
// the ticks sampled. They are counted from the records after the load and
// the prober stopped: a load request counts at the tick whose scrape
// instant it completed before, as the proxy counts it once answered; a
// probe counts by its start.
func (s *Sampler) Finish(load *Load, prober *Prober) error {
	s.mu.Lock()
	ticks := append([]time.Time(nil), s.ticks...)
	s.mu.Unlock()
	for _, ns := range s.nodes {
		if len(s.sources[ns.n.Name]) == 0 {
			continue
		}
		counts := load.DoneBefore(ns.n.Name, ns.instants[:len(ticks)])
		for i, t := range ticks {
			if err := s.rec.Add(SeriesClientRequests, map[string]string{"node": ns.n.Name}, t, float64(counts[i])); err != nil {
				return err
			}
		}
	}
	total, failed := prober.Before(ticks)
	for i, t := range ticks {
		if err := s.rec.Add(SeriesProbes, nil, t, float64(total[i])); err != nil {
			return err
		}
		if err := s.rec.Add(SeriesProbesFailed, nil, t, float64(failed[i])); err != nil {
			return err
		}
	}
	if len(ticks) == 0 {
		return fmt.Errorf("no tick was sampled")
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
