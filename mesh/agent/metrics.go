package agent

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus series. The two l4route series are
// gauges over the published configuration: each rebuild re-evaluates every
// route, so a counter would count rebuilds, not routes.
type Metrics struct {
	published   prometheus.Counter
	refused     *prometheus.CounterVec
	unsupported *prometheus.GaugeVec
	noHealthy   prometheus.Gauge
	udpArms     prometheus.Gauge
	podsNoNetns prometheus.Gauge
	// The agent's side of on-demand CDS (odcds.go): names admitted, names
	// refused by reason, and the twins served.
	odcdsAdmitted prometheus.Counter
	odcdsRefused  *prometheus.CounterVec
	twins         prometheus.Gauge
	// The pair lifecycle's series are package pairs'.
}

var unsupportedReasons = []string{ReasonWeightedSplit, ReasonMultipleRules, ReasonBackendKind, ReasonParentConflict}

func newMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_agent_snapshot_published_total",
			Help: "Snapshots that passed every config gate and were published."}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aether_agent_snapshot_refused_total",
			Help: "Snapshots refused, by failing gate (or registry/build); the last good snapshot stays published."}, []string{"gate"}),
		unsupported: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "aether_agent_l4route_udp_unsupported",
			Help: "UDPRoute shapes in the published configuration the mesh cannot express (UnsupportedUDPRouteShapes), by reason."}, []string{"reason"}),
		noHealthy: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_agent_l4route_udp_no_healthy_backend",
			Help: "UDPRoute arms in the published configuration with no healthy backend."}),
		udpArms: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_agent_udp_capture_arms",
			Help: "Destination-IP arms of the UDP capture matcher."}),
		podsNoNetns: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_agent_pods_without_netns",
			Help: "Local pods without a netns path, hence without capture listeners."}),
		odcdsAdmitted: prometheus.NewCounter(prometheus.CounterOpts{Name: "aether_agent_odcds_admitted_total",
			Help: "Twin names a proxy subscribed to on demand that the agent admitted and published."}),
		odcdsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "aether_agent_odcds_refused_total",
			Help: "Cluster names a proxy subscribed to on demand that the agent answered absent, by reason."}, []string{"reason"}),
		twins: prometheus.NewGauge(prometheus.GaugeOpts{Name: "aether_agent_twins",
			Help: "QUIC twins served: recorded (source account, destination) pairs the registry still admits."}),
	}
	for _, c := range []prometheus.Collector{m.published, m.refused, m.unsupported, m.noHealthy, m.udpArms, m.podsNoNetns, m.odcdsAdmitted, m.odcdsRefused, m.twins} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("failed to register agent metric: %w", err)
		}
	}
	for _, r := range unsupportedReasons {
		m.unsupported.WithLabelValues(r)
	}
	for _, r := range refusedReasons {
		m.odcdsRefused.WithLabelValues(r)
	}
	return m, nil
}

func (m *Metrics) observe(out *Output) {
	m.published.Inc()
	counts := map[string]int{}
	for _, u := range out.Selection.Unsupported {
		counts[u.Reason]++
	}
	for _, r := range unsupportedReasons {
		m.unsupported.WithLabelValues(r).Set(float64(counts[r]))
	}
	m.noHealthy.Set(float64(len(out.Selection.NoHealthyBackend)))
	m.udpArms.Set(float64(len(out.Selection.Arms)))
	m.podsNoNetns.Set(float64(len(out.PodsWithoutNetns)))
}
