package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// The bounds families count what the UDP data path refuses so that its
// per-peer state stays bounded: sessions over a cluster's max_connections
// circuit breaker, datagrams that found no room, and capture socket read
// errors. Each refusal is counted; none is silent.

// Reasons on aether_proxy_udp_downstream_rx_datagrams_dropped_total.
const (
	// DropOverflow: the cluster's max_connections circuit breaker was
	// full, so no session was made (Envoy's upstream_cx_overflow).
	DropOverflow = "overflow"
	// DropDialQueue: the datagram waited for its session's upstream
	// socket and the queue was full, or the session closed first.
	DropDialQueue = "dial_queue"
)

type bounds struct {
	clOverflow *prometheus.CounterVec
	udpDropped *prometheus.CounterVec
	udpRxErrs  *prometheus.CounterVec

	mu        sync.Mutex
	listeners map[string]*UDPBounds
	clusters  map[string]prometheus.Counter
}

func newBounds(reg *prometheus.Registry) *bounds {
	b := &bounds{listeners: map[string]*UDPBounds{}, clusters: map[string]prometheus.Counter{}}
	cv := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		reg.MustRegister(v)
		return v
	}
	b.clOverflow = cv("aether_proxy_cluster_upstream_cx_overflow_total", "Sessions refused because the cluster's max_connections circuit breaker was full.", "cluster")
	b.udpDropped = cv("aether_proxy_udp_downstream_rx_datagrams_dropped_total", "Downstream datagrams dropped for want of room, by reason.", "listener", "reason")
	b.udpRxErrs = cv("aether_proxy_udp_downstream_rx_errors_total", "Failed reads on a UDP capture socket.", "listener")
	return b
}

// UDPBounds is one UDP listener's refusal counters.
type UDPBounds struct {
	Overflow, DialQueue, RxErrors prometheus.Counter
}

// UDPBounds returns the refusal counters for a UDP listener name.
func (m *Metrics) UDPBounds(listener string) *UDPBounds {
	b := m.bounds
	b.mu.Lock()
	defer b.mu.Unlock()
	if l, ok := b.listeners[listener]; ok {
		return l
	}
	l := &UDPBounds{
		Overflow:  b.udpDropped.WithLabelValues(listener, DropOverflow),
		DialQueue: b.udpDropped.WithLabelValues(listener, DropDialQueue),
		RxErrors:  b.udpRxErrs.WithLabelValues(listener),
	}
	b.listeners[listener] = l
	return l
}

// ClusterOverflow returns the circuit breaker overflow counter for a
// cluster name.
func (m *Metrics) ClusterOverflow(cluster string) prometheus.Counter {
	b := m.bounds
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.clusters[cluster]; ok {
		return c
	}
	c := b.clOverflow.WithLabelValues(cluster)
	b.clusters[cluster] = c
	return c
}
