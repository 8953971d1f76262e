package passthrough

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Drop reasons on aether_proxy_passthrough_dropped_total. A TCP drop is a
// refused connection, a UDP drop one datagram.
const (
	// DropUnknownSNI: no filter chain lists the server name and there is
	// no default chain (tls_inspector + filter chain match: no match).
	DropUnknownSNI = "unknown_sni"
	// DropNoUpstream: the chain's cluster has no address.
	DropNoUpstream = "no_upstream"
	// DropUpstreamError: the upstream could not be dialed or written.
	DropUpstreamError = "upstream_error"
	// DropTimeout: the ClientHello did not arrive whole in time
	// (listener_filters_timeout).
	DropTimeout = "client_hello_timeout"
	// DropTooLarge: the ClientHello exceeds the limit
	// (client_hello_too_large).
	DropTooLarge = "client_hello_too_large"
	// DropClientError: the client closed or failed before its
	// ClientHello was whole.
	DropClientError = "client_error"
	// DropNotQUIC: a datagram for no known flow that has no long
	// header: plaintext, junk, or a short-header packet of a connection
	// this forwarder does not know.
	DropNotQUIC = "not_quic"
	// DropNotInitial: a long header for no known flow that is not an
	// Initial (Handshake, 0-RTT, Retry, Version Negotiation).
	DropNotInitial = "not_initial"
	// DropSmallInitial: an Initial in a datagram under 1200 bytes, which
	// a server must discard too (RFC 9000 §14.1).
	DropSmallInitial = "initial_too_small"
	// DropUndecryptable: a long header that does not open under the
	// Initial keys of its DCID: forged, or garbage.
	DropUndecryptable = "initial_undecryptable"
	// DropMalformed: the Initial opens but its frames or ClientHello do
	// not parse.
	DropMalformed = "initial_malformed"
	// DropVersion: an unsupported version, answered with a Version
	// Negotiation.
	DropVersion = "version_negotiation"
	// DropFlowOverflow: the flow cap (udp_proxy's max_connections
	// circuit breaker) is reached.
	DropFlowOverflow = "flow_overflow"
	// DropPendingOverflow: the cap on flows still waiting for their
	// ClientHello is reached.
	DropPendingOverflow = "pending_overflow"
	// DropPendingBytes: a pending flow's buffered bytes would pass their
	// bound.
	DropPendingBytes = "pending_bytes"
)

// Metrics are the forwarders' counters; the suites read them as the
// witness of what the gateway passed and refused.
type Metrics struct {
	flows   *prometheus.CounterVec
	dropped *prometheus.CounterVec
	bytes   *prometheus.CounterVec
	active  *prometheus.GaugeVec
	events  *prometheus.CounterVec
}

// Events on aether_proxy_passthrough_events_total.
const (
	// EventMigrated: a flow's client was found by connection ID at a new
	// address.
	EventMigrated = "migrated"
	// EventExpired: a flow idle for its idle timeout was closed.
	EventExpired = "expired"
	// EventPendingExpired: a flow whose ClientHello never completed was
	// dropped.
	EventPendingExpired = "pending_expired"
	// EventCIDLearned: a connection ID was added to a flow's routes.
	EventCIDLearned = "cid_learned"
	// EventHeld: a pending flow's datagram with no Initial in it (0-RTT,
	// say) was held for the server until the flow is routed.
	EventHeld = "held_while_pending"
	// EventNoSNI: a TLS stream fell through with no server name (not
	// TLS, or a ClientHello that does not parse: tls_not_found).
	EventNoSNI = "sni_not_found"
)

// NewMetrics registers the counters on reg (nil: none).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		flows: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_proxy_passthrough_flows_total",
			Help: "Connections (TCP) or QUIC flows (UDP) routed by SNI, by listener, protocol and cluster.",
		}, []string{"listener", "protocol", "cluster"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_proxy_passthrough_dropped_total",
			Help: "Refused connections (TCP) or dropped datagrams (UDP), by reason.",
		}, []string{"listener", "protocol", "reason"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_proxy_passthrough_bytes_total",
			Help: "Bytes relayed, by direction (downstream_rx: from clients).",
		}, []string{"listener", "protocol", "direction"}),
		active: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aether_proxy_passthrough_active_flows",
			Help: "Flows held now, by state (pending: waiting for the ClientHello).",
		}, []string{"listener", "protocol", "state"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aether_proxy_passthrough_events_total",
			Help: "Flow events: migrations, expiries, connection IDs learned, TLS without SNI.",
		}, []string{"listener", "protocol", "event"}),
	}
	if reg != nil {
		reg.MustRegister(m.flows, m.dropped, m.bytes, m.active, m.events)
	}
	return m
}

// listenerMetrics are one listener's handles, resolved once.
type listenerMetrics struct {
	m                  *Metrics
	name, proto        string
	rx, tx             prometheus.Counter
	active, pending    prometheus.Gauge
	migrated, expired  prometheus.Counter
	pendExpired, cidLn prometheus.Counter
}

func (m *Metrics) listener(name, proto string) *listenerMetrics {
	if m == nil {
		m = NewMetrics(nil)
	}
	return &listenerMetrics{
		m: m, name: name, proto: proto,
		rx:          m.bytes.WithLabelValues(name, proto, "downstream_rx"),
		tx:          m.bytes.WithLabelValues(name, proto, "downstream_tx"),
		active:      m.active.WithLabelValues(name, proto, "active"),
		pending:     m.active.WithLabelValues(name, proto, "pending"),
		migrated:    m.events.WithLabelValues(name, proto, EventMigrated),
		expired:     m.events.WithLabelValues(name, proto, EventExpired),
		pendExpired: m.events.WithLabelValues(name, proto, EventPendingExpired),
		cidLn:       m.events.WithLabelValues(name, proto, EventCIDLearned),
	}
}

func (l *listenerMetrics) drop(reason string) {
	l.m.dropped.WithLabelValues(l.name, l.proto, reason).Inc()
}

func (l *listenerMetrics) flow(cluster string) {
	l.m.flows.WithLabelValues(l.name, l.proto, cluster).Inc()
}

func (l *listenerMetrics) event(ev string) {
	l.m.events.WithLabelValues(l.name, l.proto, ev).Inc()
}
