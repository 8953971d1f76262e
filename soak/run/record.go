package run

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aether-mesh/aether/soak/evidence"
)

// The series a run writes into prometheus/counters.json. Each is a counter
// sampled on the run's tick grid, so every boundary the manifest declares
// is a sample time (evidence.Increase).
const (
	// SeriesProxyCPU: CPU seconds (utime+stime from /proc/<pid>/stat) of a
	// node's proxy processes since the soak began, per node.
	SeriesProxyCPU = "aether_soak_proxy_cpu_seconds_total"
	// SeriesProxyRequests: requests of the load's source pods that their
	// node's proxy counted (aether_proxy_http_requests_total on their
	// outbound listeners), per node.
	SeriesProxyRequests = "aether_soak_proxy_requests_total"
	// SeriesClientRequests: requests of the node's source pods that the
	// load generator saw completed before the instant the node's proxy was
	// scraped, per node: the other witness of the count-skew check.
	SeriesClientRequests = "aether_soak_client_requests_total"
	// SeriesNC: responses the proxies answered 503 with flag NC.
	SeriesNC = "aether_soak_proxy_503_nc_total"
	// SeriesPrunedLive: twins an agent pruned while in use
	// (aether_agent_pairs_pruned_live_total).
	SeriesPrunedLive = "aether_soak_agent_pairs_pruned_live_total"
	// SeriesProxyExits: proxy processes that exited without the run
	// stopping them.
	SeriesProxyExits = "aether_soak_proxy_exits_total"
	// SeriesProbes and SeriesProbesFailed: the liveness prober's probes
	// started before the tick, and those of them that failed.
	SeriesProbes       = "aether_soak_probes_total"
	SeriesProbesFailed = "aether_soak_probes_failed_total"
	// SeriesStepsNotRun: steps of the schedule that did not run to their
	// end (a failed chaos step, an interrupted run), counted at the soak's
	// last tick: a soak cut short must not pass for a whole one.
	SeriesStepsNotRun = "aether_soak_steps_not_run_total"
	// SeriesProbesShort: with a planned probe rate, how many fewer
	// liveness probes started over the soak than its plan, counted at the
	// last tick: a prober starved of CPU drops its ticks, and a soak that
	// probed at a fraction of its rate must not pass for one at scale.
	SeriesProbesShort = "aether_soak_probes_short_total"
)

// Recorder holds the run's counter samples.
type Recorder struct {
	mu     sync.Mutex
	series map[string]*evidence.Series
}

// NewRecorder returns an empty recorder.
func NewRecorder() *Recorder { return &Recorder{series: map[string]*evidence.Series{}} }

func key(name string, labels map[string]string) string {
	l := maps.Clone(labels)
	if l == nil {
		l = map[string]string{}
	}
	l["__name__"] = name
	return evidence.FormatMatch(l)
}

// Add records the value v of counter name{labels} at t. Samples of one
// series must come in time order.
func (r *Recorder) Add(name string, labels map[string]string, t time.Time, v float64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := key(name, labels)
	s := r.series[k]
	if s == nil {
		l := maps.Clone(labels)
		if l == nil {
			l = map[string]string{}
		}
		l["__name__"] = name
		s = &evidence.Series{Labels: l}
		r.series[k] = s
	}
	if n := len(s.Points); n > 0 && !t.After(s.Points[n-1].T) {
		return fmt.Errorf("series %s: sample at %s is not after the one at %s", k, t.Format(time.RFC3339Nano), s.Points[n-1].T.Format(time.RFC3339Nano))
	}
	s.Points = append(s.Points, evidence.Point{T: t, V: v})
	return nil
}

// Has says whether series name has any sample.
func (r *Recorder) Has(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.series {
		if s.Labels["__name__"] == name {
			return true
		}
	}
	return false
}

// HasWith says some series name carries label k = v.
func (r *Recorder) HasWith(name, k, v string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.series {
		if s.Labels["__name__"] == name && s.Labels[k] == v {
			return true
		}
	}
	return false
}

// Trim drops every sample after end: a run stopped between ticks ends at
// the last tick every series reached.
func (r *Recorder) Trim(end time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, s := range r.series {
		s.Points = slices.DeleteFunc(s.Points, func(p evidence.Point) bool { return p.T.After(end) })
	}
}

// WriteMatrix writes every series as the JSON body of a Prometheus
// query_range answer, the shape the graders import.
func (r *Recorder) WriteMatrix(path string) error {
	r.mu.Lock()
	keys := slices.Sorted(maps.Keys(r.series))
	type result struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	res := make([]result, 0, len(keys))
	for _, k := range keys {
		s := r.series[k]
		out := result{Metric: s.Labels, Values: make([][2]any, len(s.Points))}
		for i, p := range s.Points {
			out.Values[i] = [2]any{json.Number(strconv.FormatFloat(float64(p.T.UnixMilli())/1000, 'f', 3, 64)), strconv.FormatFloat(p.V, 'f', -1, 64)}
		}
		res = append(res, out)
	}
	r.mu.Unlock()
	doc := map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": res}}
	b, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("failed to encode the run's counters: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("failed to write the run's counters: %w", err)
	}
	return nil
}

// Monotonic turns the samples of a process's own counters into growth
// since the soak began, the way Prometheus' increase() reads them: a
// series that falls was reset (a hot restart's new process counts from
// zero), so its new value is all growth; a series first seen after the
// first scrape counted from zero since it was made; series that vanish (a
// listener removed) add nothing. Like increase(), it cannot see a reset
// after which a counter grew past its old value before the next scrape.
type Monotonic struct {
	last  map[string]float64
	total float64
	seen  bool
}

// Observe takes one scrape's samples by series and returns the growth so
// far.
func (m *Monotonic) Observe(samples map[string]float64) float64 {
	for k, v := range samples {
		prev, ok := m.last[k]
		switch {
		case !m.seen:
		case !ok:
			m.total += v
		case v >= prev:
			m.total += v - prev
		default:
			m.total += v
		}
	}
	m.last = maps.Clone(samples)
	m.seen = true
	return m.total
}

// Values returns the last value of every series of the named counter.
func (r *Recorder) Values(name string) []float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []float64
	for _, s := range r.series {
		if s.Labels["__name__"] == name && len(s.Points) > 0 {
			out = append(out, s.Points[len(s.Points)-1].V)
		}
	}
	return out
}
