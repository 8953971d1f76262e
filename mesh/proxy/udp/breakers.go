package udp

import "sync"

// Breakers counts each cluster's open sessions against its max_connections
// circuit breaker, as Envoy's udp_proxy does: a session holds one of the
// cluster's connections from creation until it closes, and a datagram that
// would need a session beyond the limit is dropped and counted as overflow.
//
// One proxy shares one Breakers across its listeners, because the breaker
// is the cluster's, not the listener's; counts are keyed by cluster name so
// a CDS update that replaces the cluster does not forget the sessions
// already open.
type Breakers struct {
	mu   sync.Mutex
	open map[string]uint32
}

// NewBreakers makes an empty set of counts.
func NewBreakers() *Breakers { return &Breakers{open: map[string]uint32{}} }

// acquire takes one of the cluster's connections if fewer than limit are
// open.
func (b *Breakers) acquire(cluster string, limit uint32) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[cluster] >= limit {
		return false
	}
	b.open[cluster]++
	return true
}

// release returns a connection acquire took.
func (b *Breakers) release(cluster string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open[cluster]--; b.open[cluster] == 0 {
		delete(b.open, cluster)
	}
}

// Open is how many sessions to cluster are open.
func (b *Breakers) Open(cluster string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.open[cluster])
}
