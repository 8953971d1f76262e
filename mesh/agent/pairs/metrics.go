package pairs

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metrics are the pair lifecycle's series. admitted and refused move with
// the agent's aether_agent_odcds_admitted_total and the sum of its
// aether_agent_odcds_refused_total.
type metrics struct {
	pairs        *prometheus.GaugeVec
	admitted     prometheus.Counter
	refused      prometheus.Counter
	pruned       *prometheus.CounterVec
	prunedLive   prometheus.Counter
	stateCorrupt prometheus.Counter
	// stateWrite counts state files not written, by the errno's name.
	stateWrite *prometheus.CounterVec
	windowOpen prometheus.Gauge
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		pairs: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "aether_agent_pairs",
			Help: "Recorded QUIC pairs, by state: live, or dormant (source or destination away, twin withdrawn, pair kept)."}, []string{"state"}),
		admitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_agent_pairs_admitted_total",
			Help: "QUIC pairs admitted on a twin subscribed by name (as aether_agent_odcds_admitted_total)."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_agent_pairs_refused_total",
			Help: "Cluster names subscribed on demand and answered absent (the sum of aether_agent_odcds_refused_total)."}),
		pruned: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aether_agent_pairs_pruned_total",
			Help: "QUIC pairs pruned with their twin, by reason."}, []string{"reason"}),
		prunedLive: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_agent_pairs_pruned_live_total",
			Help: "Pruned pairs whose twin served a request in the minute before (by the proxy's metrics with --proxy-metrics-url, else by evidence of use), for a dormant pair since it went dormant; must stay 0."}),
		stateCorrupt: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_agent_pair_state_corrupt_total",
			Help: "Unusable observed-upstreams.json files moved aside at start."}),
		stateWrite: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aether_agent_pair_state_write_errors_total",
			Help: "observed-upstreams.json rewrites that failed (the last whole file stays, and the pairs are served from memory), by the errno that failed them: ENOSPC for a full disk."}, []string{"reason"}),
		windowOpen: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_agent_pairs_fetch_window_open",
			Help: "1 until the pair fetch window after start has ended and its prunes are done, then 0."}),
	}
	for _, c := range []prometheus.Collector{m.pairs, m.admitted, m.refused, m.pruned, m.prunedLive, m.stateCorrupt, m.stateWrite, m.windowOpen} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register agent metric: %w", err)
		}
	}
	for _, r := range PrunedReasons {
		m.pruned.WithLabelValues(r)
	}
	m.pairs.WithLabelValues(Live)
	m.pairs.WithLabelValues(Dormant)
	m.windowOpen.Set(1)
	return m, nil
}

// observe sets the pairs gauge to the set's figures; s.mu is held.
func (s *Set) observe() {
	n := map[string]int{}
	for _, p := range s.pairs {
		n[p.state()]++
	}
	s.metrics.pairs.WithLabelValues(Live).Set(float64(n[Live]))
	s.metrics.pairs.WithLabelValues(Dormant).Set(float64(n[Dormant]))
}

// counts is Counts' counters, every prune reason listed.
func (m *metrics) counts() Counts {
	c := Counts{Admitted: counterValue(m.admitted), Refused: counterValue(m.refused),
		PrunedLive: counterValue(m.prunedLive), Pruned: map[string]float64{}}
	for _, r := range PrunedReasons {
		c.Pruned[r] = counterValue(m.pruned.WithLabelValues(r))
	}
	return c
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
