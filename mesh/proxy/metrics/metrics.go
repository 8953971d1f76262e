// Package metrics holds the proxy's Prometheus counters: per UDP listener
// datagrams, bytes, sessions and drops by reason (aether_proxy_udp_*), per
// TCP listener connections, refusals, errors and bytes (aether_proxy_tcp_*),
// per cluster traffic and errors, and xDS updates by outcome. Each listener
// registers only its own protocol's series. The suites read them as the
// independent witness of where a datagram went (or that it went nowhere).
//
// Handles are resolved once per listener or cluster, never per datagram.
package metrics

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/aether-mesh/aether/mesh/proxy/passthrough"
)

// Drop reasons on aether_proxy_udp_dropped_total.
const (
	// DropNoRoute: the matcher selected nothing (no arm, no on_no_match).
	DropNoRoute = "no_route"
	// DropNoCluster: the selected cluster is unknown or still warming.
	DropNoCluster = "no_cluster"
	// DropNoHealthy: the cluster has no host; the blackhole cluster's drops.
	DropNoHealthy = "none_healthy"
	// DropUpstreamError: the upstream socket could not be made or written.
	DropUpstreamError = "upstream_error"
	// DropNoOriginalDestination: the datagram carried no IP_PKTINFO, so
	// its ClusterIP, and with it its route, is unknown.
	DropNoOriginalDestination = "no_original_destination"
)

// Metrics is one proxy's registry.
type Metrics struct {
	Registry *prometheus.Registry

	udpRx, udpRxBytes, udpTx, udpTxBytes *prometheus.CounterVec
	udpSessions, udpDropped              *prometheus.CounterVec
	udpActive                            *prometheus.GaugeVec
	clTx, clTxBytes, clRx, clRxBytes     *prometheus.CounterVec
	clSessions, clNoneHealthy, clErrors  *prometheus.CounterVec
	tcpConns, tcpNoChain, tcpNoCluster   *prometheus.CounterVec
	tcpErrors, tcpAcceptErrors           *prometheus.CounterVec
	tcpIdleTimeouts, tcpBytes            *prometheus.CounterVec
	xdsUpdates                           *prometheus.CounterVec
	accessLogErrors                      *prometheus.CounterVec
	httpRequests, httpRefused, httpConns *prometheus.CounterVec
	httpAcceptErrors, httpProtocolErrors *prometheus.CounterVec
	quicRefused, quicAccepted, quicDrops *prometheus.CounterVec
	quicStarted                          *prometheus.CounterVec

	mu           sync.Mutex
	udpListeners map[string]*UDPListener
	tcpListeners map[string]*TCPListener
	clusters     map[string]*Cluster

	// bounds holds the UDP refusal counters (bounds.go).
	bounds *bounds
	// Passthrough is the east-west gateway listeners' counters.
	Passthrough *passthrough.Metrics
}

// New makes a registry with every family registered.
func New() *Metrics {
	m := &Metrics{
		Registry:     prometheus.NewRegistry(),
		udpListeners: map[string]*UDPListener{}, tcpListeners: map[string]*TCPListener{}, clusters: map[string]*Cluster{},
	}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.Registry.MustRegister(v)
		return v
	}
	m.udpRx = cv("aether_proxy_udp_downstream_rx_datagrams_total", "Datagrams received on a UDP listener.", "listener")
	m.udpRxBytes = cv("aether_proxy_udp_downstream_rx_bytes_total", "Payload bytes received on a UDP listener.", "listener")
	m.udpTx = cv("aether_proxy_udp_downstream_tx_datagrams_total", "Reply datagrams sent to downstream clients.", "listener")
	m.udpTxBytes = cv("aether_proxy_udp_downstream_tx_bytes_total", "Reply payload bytes sent to downstream clients.", "listener")
	m.udpSessions = cv("aether_proxy_udp_sessions_total", "Sessions created, per downstream 5-tuple.", "listener")
	m.udpDropped = cv("aether_proxy_udp_dropped_total", "Downstream datagrams dropped, by reason.", "listener", "reason")
	m.udpActive = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "aether_proxy_udp_sessions_active", Help: "Live sessions."}, []string{"listener"})
	m.Registry.MustRegister(m.udpActive)
	m.clTx = cv("aether_proxy_cluster_upstream_tx_datagrams_total", "Datagrams sent to a cluster's hosts.", "cluster")
	m.clTxBytes = cv("aether_proxy_cluster_upstream_tx_bytes_total", "Payload bytes sent to a cluster's hosts.", "cluster")
	m.clRx = cv("aether_proxy_cluster_upstream_rx_datagrams_total", "Datagrams received from a cluster's hosts.", "cluster")
	m.clRxBytes = cv("aether_proxy_cluster_upstream_rx_bytes_total", "Payload bytes received from a cluster's hosts.", "cluster")
	m.clSessions = cv("aether_proxy_cluster_sessions_total", "Sessions (UDP) and connections (TCP) opened to a cluster.", "cluster")
	m.clNoneHealthy = cv("aether_proxy_cluster_none_healthy_total", "Sessions refused because the cluster had no host.", "cluster")
	m.clErrors = cv("aether_proxy_cluster_errors_total", "Upstream socket errors.", "cluster")
	m.tcpConns = cv("aether_proxy_tcp_connections_total", "Accepted TCP connections handed to tcp_proxy, by chosen cluster.", "listener", "cluster")
	m.tcpNoChain = cv("aether_proxy_tcp_no_filter_chain_match_total", "Accepted connections no filter chain matched.", "listener")
	m.tcpNoCluster = cv("aether_proxy_tcp_no_cluster_total", "Accepted connections closed because the chain's cluster is unknown or still warming.", "listener")
	m.tcpErrors = cv("aether_proxy_tcp_errors_total", "TCP connections closed on an upstream error.", "listener")
	m.tcpAcceptErrors = cv("aether_proxy_tcp_accept_errors_total", "Failed accepts on a TCP listener (each is followed by a backoff).", "listener")
	m.tcpIdleTimeouts = cv("aether_proxy_tcp_idle_timeouts_total", "Connections closed by tcp_proxy's idle_timeout.", "listener")
	m.tcpBytes = cv("aether_proxy_tcp_bytes_total", "Bytes proxied over TCP, by direction.", "listener", "direction")
	m.httpRequests = cv("aether_proxy_http_requests_total", "HTTP requests answered by an HTTP listener, by routed cluster, status and response flags.", "listener", "cluster", "code", "flags")
	m.httpRefused = cv("aether_proxy_http_tls_refused_total", "Downstream TLS handshakes refused by an HTTP listener, by reason.", "listener", "reason")
	m.httpAcceptErrors = cv("aether_proxy_http_accept_errors_total", "Failed accepts on an HTTP listener (each is followed by a backoff).", "listener")
	m.httpProtocolErrors = cv("aether_proxy_http_downstream_protocol_errors_total", "HTTP/2 protocol errors a downstream connection caused at an HTTP listener, by reason: x/net's (conn_ENHANCE_YOUR_CALM_too_many_early_resets is a rapid reset cut off), or conn_<code>_read for a frame read (conn_PROTOCOL_ERROR_read: a CONTINUATION flood among them), or http1_request_headers_timeout and http1_request_headers_too_large for an HTTP/1.1 connection closed before its request reached the router, or h3_request_headers_too_large for an HTTP/3 request answered 431 before it reached the router, or stream_idle_timeout for a request body that stalled past the connection manager's stream_idle_timeout (any HTTP version).", "listener", "reason")
	m.httpConns = cv("aether_proxy_http_upstream_connections_total", "Upstream connections an HTTP cluster's pool opened, by the identity its handshake presented.", "cluster", "identity")
	m.quicStarted = cv("aether_proxy_quic_inbound_connections_started_total", "Connections a QUIC inbound began for a new client's Initial, whether or not their handshake ends.", "listener")
	m.quicRefused = cv("aether_proxy_quic_inbound_refused_total", "Handshakes a QUIC inbound refused, by reason.", "listener", "reason")
	m.quicAccepted = cv("aether_proxy_quic_inbound_handshakes_total", "Handshakes a QUIC inbound accepted, by the peer's SPIFFE ID and whether the session resumed.", "listener", "peer", "resumed")
	m.quicDrops = cv("aether_proxy_quic_inbound_dropped_datagrams_total", "Datagrams a QUIC inbound dropped before any connection took them, by quic-go's trigger (not_quic: not a QUIC packet at all).", "listener", "reason")
	m.xdsUpdates = cv("aether_proxy_xds_updates_total", "xDS responses by type and outcome (ack or nack).", "type", "result")
	m.accessLogErrors = cv("aether_proxy_access_log_errors_total", "Access log lines lost (the request was still served), by the errno that lost them: ENOSPC for a full disk.", "reason")
	m.bounds = newBounds(m.Registry)
	m.Passthrough = passthrough.NewMetrics(m.Registry)
	return m
}

// AccessLogError counts an access log line lost for reason.
func (m *Metrics) AccessLogError(reason string) {
	m.accessLogErrors.WithLabelValues(reason).Inc()
}

// Handler serves the registry in the Prometheus text format.

func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// UDPListener is one UDP listener's counters.
type UDPListener struct {
	Rx, RxBytes, Tx, TxBytes, Sessions prometheus.Counter
	Active                             prometheus.Gauge
	NoRoute, NoCluster, NoHealthy      prometheus.Counter
	UpstreamError, NoOriginalDst       prometheus.Counter
}

// UDPListener returns the handles for a UDP listener name.
func (m *Metrics) UDPListener(name string) *UDPListener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.udpListeners[name]; ok {
		return l
	}
	l := &UDPListener{
		Rx: m.udpRx.WithLabelValues(name), RxBytes: m.udpRxBytes.WithLabelValues(name),
		Tx: m.udpTx.WithLabelValues(name), TxBytes: m.udpTxBytes.WithLabelValues(name),
		Sessions: m.udpSessions.WithLabelValues(name), Active: m.udpActive.WithLabelValues(name),
		NoRoute:       m.udpDropped.WithLabelValues(name, DropNoRoute),
		NoCluster:     m.udpDropped.WithLabelValues(name, DropNoCluster),
		NoHealthy:     m.udpDropped.WithLabelValues(name, DropNoHealthy),
		UpstreamError: m.udpDropped.WithLabelValues(name, DropUpstreamError),
		NoOriginalDst: m.udpDropped.WithLabelValues(name, DropNoOriginalDestination),
	}
	m.udpListeners[name] = l
	return l
}

// TCPListener is one TCP listener's counters.
type TCPListener struct {
	NoChain, NoCluster, Errors prometheus.Counter
	AcceptErrors, IdleTimeouts prometheus.Counter
	BytesUp, BytesDown         prometheus.Counter

	conns *prometheus.CounterVec
	name  string
}

// Conn counts a connection handed to cluster.
func (l *TCPListener) Conn(cluster string) { l.conns.WithLabelValues(l.name, cluster).Inc() }

// TCPListener returns the handles for a TCP listener name.
func (m *Metrics) TCPListener(name string) *TCPListener {
	m.mu.Lock()
	defer m.mu.Unlock()
	if l, ok := m.tcpListeners[name]; ok {
		return l
	}
	l := &TCPListener{
		NoChain: m.tcpNoChain.WithLabelValues(name), NoCluster: m.tcpNoCluster.WithLabelValues(name),
		Errors: m.tcpErrors.WithLabelValues(name), AcceptErrors: m.tcpAcceptErrors.WithLabelValues(name),
		IdleTimeouts: m.tcpIdleTimeouts.WithLabelValues(name),
		BytesUp:      m.tcpBytes.WithLabelValues(name, "upstream"), BytesDown: m.tcpBytes.WithLabelValues(name, "downstream"),
		conns: m.tcpConns, name: name,
	}
	m.tcpListeners[name] = l
	return l
}

// Cluster is one cluster's counters.
type Cluster struct {
	Tx, TxBytes, Rx, RxBytes, Sessions, NoneHealthy, Errors prometheus.Counter
}

// Cluster returns the handles for a cluster name.
func (m *Metrics) Cluster(name string) *Cluster {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.clusters[name]; ok {
		return c
	}
	c := &Cluster{
		Tx: m.clTx.WithLabelValues(name), TxBytes: m.clTxBytes.WithLabelValues(name),
		Rx: m.clRx.WithLabelValues(name), RxBytes: m.clRxBytes.WithLabelValues(name),
		Sessions: m.clSessions.WithLabelValues(name), NoneHealthy: m.clNoneHealthy.WithLabelValues(name),
		Errors: m.clErrors.WithLabelValues(name),
	}
	m.clusters[name] = c
	return c
}

// Reasons a TLS handshake at an HTTP listener is refused.
const (
	RefusedNoClientCert = "no_client_certificate"
	RefusedPeer         = "peer_rejected"
	RefusedNoChain      = "no_filter_chain"
	RefusedHandshake    = "handshake_failed"
	// RefusedHandshakeTimeout: the client did not finish its handshake in
	// time (one that connects and never handshakes).
	RefusedHandshakeTimeout = "handshake_timeout"
)

// HTTPListener is one HTTP listener's counters.
type HTTPListener struct {
	AcceptErrors prometheus.Counter

	name           string
	requests       *prometheus.CounterVec
	protocolErrors *prometheus.CounterVec
	// answered holds the counter of each (cluster, code, flags) series
	// the listener has answered: a request then costs one map read, not
	// the vector's label hashing, its lock and a code formatted anew.
	mu       sync.RWMutex
	answered map[requestKey]prometheus.Counter
}

type requestKey struct {
	cluster, flags string
	code           int
}

// HTTPListener returns the handles for an HTTP listener name, and makes
// its refusal series, each at zero, so a scraper sees the listener before
// its first refusal.
func (m *Metrics) HTTPListener(name string) *HTTPListener {
	for _, r := range []string{RefusedNoClientCert, RefusedPeer, RefusedNoChain, RefusedHandshake, RefusedHandshakeTimeout} {
		m.httpRefused.WithLabelValues(name, r)
	}
	m.httpProtocolErrors.WithLabelValues(name, ProtocolEarlyResets)
	m.httpProtocolErrors.WithLabelValues(name, ProtocolReadError)
	m.httpProtocolErrors.WithLabelValues(name, ProtocolHeadersTimeout)
	m.httpProtocolErrors.WithLabelValues(name, ProtocolHeadersTooLarge)
	m.httpProtocolErrors.WithLabelValues(name, ProtocolH3HeadersTooLarge)
	m.httpProtocolErrors.WithLabelValues(name, ProtocolStreamIdleTimeout)
	return &HTTPListener{AcceptErrors: m.httpAcceptErrors.WithLabelValues(name), name: name, requests: m.httpRequests,
		protocolErrors: m.httpProtocolErrors, answered: map[requestKey]prometheus.Counter{}}
}

// Request counts one answered request.
func (l *HTTPListener) Request(cluster string, code int, flags string) {
	k := requestKey{cluster: cluster, flags: flags, code: code}
	l.mu.RLock()
	c := l.answered[k]
	l.mu.RUnlock()
	if c == nil {
		c = l.requests.WithLabelValues(l.name, cluster, strconv.Itoa(code), flags)
		l.mu.Lock()
		l.answered[k] = c
		l.mu.Unlock()
	}
	c.Inc()
}

// Reasons on aether_proxy_http_downstream_protocol_errors_total. x/net
// names its own as <conn|stream>_<HTTP/2 error code>_<what>; the proxy
// adds conn_<code>_read for a connection error raised while a frame was
// read, which x/net only logs.
const (
	// ProtocolEarlyResets: streams were reset faster than their handlers
	// ended (a rapid reset), and the connection was closed.
	ProtocolEarlyResets = "conn_ENHANCE_YOUR_CALM_too_many_early_resets"
	// ProtocolReadError: a frame broke the protocol as it was read; a
	// header block run past the header limit by CONTINUATION frames is
	// one.
	ProtocolReadError = ProtocolReadPrefix + "PROTOCOL_ERROR" + ProtocolReadSuffix

	ProtocolReadPrefix, ProtocolReadSuffix = "conn_", "_read"

	// ProtocolHeadersTimeout: an HTTP/1.1 connection closed because a
	// request's headers did not arrive within the request headers
	// timeout (a slowloris).
	ProtocolHeadersTimeout = "http1_request_headers_timeout"
	// ProtocolHeadersTooLarge: net/http answered an HTTP/1.1 request 431,
	// its headers past the limit, and closed the connection.
	ProtocolHeadersTooLarge = "http1_request_headers_too_large"
	// ProtocolH3HeadersTooLarge: quic-go answered an HTTP/3 request 431,
	// its HEADERS frame or its decoded field section past the limit (a
	// QPACK bomb among them); the connection serves on.
	ProtocolH3HeadersTooLarge = "h3_request_headers_too_large"
	// ProtocolStreamIdleTimeout: a request's body sent no byte for the
	// connection manager's stream_idle_timeout while the proxy waited
	// for it (a slow body), and the request was answered 408 or reset.
	ProtocolStreamIdleTimeout = "stream_idle_timeout"
)

// ProtocolError counts one HTTP/2 protocol error by x/net's reason: it is
// the http2.Server's CountError.
func (l *HTTPListener) ProtocolError(reason string) {
	l.protocolErrors.WithLabelValues(l.name, reason).Inc()
}

// HTTPRefused counts one refused downstream handshake.
func (m *Metrics) HTTPRefused(listener, reason string) {
	m.httpRefused.WithLabelValues(listener, reason).Inc()
}

// HTTPUpstreamConn counts one upstream connection opened presenting identity.
func (m *Metrics) HTTPUpstreamConn(cluster, identity string) {
	m.httpConns.WithLabelValues(cluster, identity).Inc()
}

// QUICInbound is one QUIC inbound's refusals, accepted peers and drops:
// the destination's count of who reached it.
type QUICInbound struct {
	m    *Metrics
	name string
}

// QUICInbound returns the handles of QUIC inbound listener name.
func (m *Metrics) QUICInbound(name string) *QUICInbound { return &QUICInbound{m: m, name: name} }

// Started counts one connection begun for a new client's Initial.
func (q *QUICInbound) Started() { q.m.quicStarted.WithLabelValues(q.name).Inc() }

// Refused counts one refused handshake.
func (q *QUICInbound) Refused(reason string) { q.m.quicRefused.WithLabelValues(q.name, reason).Inc() }

// Accepted counts one handshake from peer.
func (q *QUICInbound) Accepted(peer string, resumed bool) {
	q.m.quicAccepted.WithLabelValues(q.name, peer, strconv.FormatBool(resumed)).Inc()
}

// Dropped counts one datagram dropped before a connection took it.
func (q *QUICInbound) Dropped(reason string) { q.m.quicDrops.WithLabelValues(q.name, reason).Inc() }

// XDS counts one xDS response of typeURL by outcome.
func (m *Metrics) XDS(typeURL string, acked bool) {
	r := "ack"
	if !acked {
		r = "nack"
	}
	m.xdsUpdates.WithLabelValues(typeURL, r).Inc()
}

// Value reads one sample from the registry: the family name and its full
// label set. A missing series reads as 0, as a scraper would see it.
func (m *Metrics) Value(family string, labels map[string]string) (float64, error) {
	fams, err := m.Registry.Gather()
	if err != nil {
		return 0, fmt.Errorf("failed to gather metrics: %w", err)
	}
	for _, f := range fams {
		if f.GetName() != family {
			continue
		}
		for _, s := range f.GetMetric() {
			if sameLabels(s.GetLabel(), labels) {
				switch {
				case s.Counter != nil:
					return s.GetCounter().GetValue(), nil
				case s.Gauge != nil:
					return s.GetGauge().GetValue(), nil
				}
			}
		}
	}
	return 0, nil
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if want[l.GetName()] != l.GetValue() {
			return false
		}
	}
	return true
}
