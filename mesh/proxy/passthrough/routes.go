// Package passthrough forwards TLS over TCP and QUIC over UDP by the
// server name in the client's ClientHello, without terminating either:
// the east-west gateway's two halves. The TCP forwarder (TCP) is Envoy's
// tls_inspector + filter chains matched on server_names + tcp_proxy; the
// QUIC forwarder (QUIC) reads a new connection's Initial packets, picks
// the upstream by SNI the same way, and from then on relays that
// connection's datagrams both ways as they are. Neither holds a key:
// QUIC Initial keys are public by design (RFC 9001 §5.2).
//
// Both read their routes from Routes, the shape of an Envoy listener's
// filter chains (filter_chain_match.server_names → the chain's cluster)
// so that a listener resource can be compiled into one, and resolve a
// cluster to an address through Upstreams.
package passthrough

import (
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// FilterChain is what the forwarders read of an Envoy filter chain: its
// filter_chain_match.server_names and the cluster its tcp_proxy (or the
// QUIC passthrough's) names.
type FilterChain struct {
	// Name is the filter chain's name, for logs.
	Name string
	// ServerNames are exact names or "*.suffix" wildcards; none makes
	// the chain the default, taken by a connection whose name no chain
	// lists (and by one with no SNI).
	ServerNames []string
	Cluster     string
}

// Routes matches a server name to a filter chain as Envoy's filter chain
// match does for server_names: an exact name first, then the wildcard of
// the longest suffix ("*.b.c" before "*.c"), then the default chain.
type Routes struct {
	exact    map[string]*FilterChain
	wildcard map[string]*FilterChain // keyed by the suffix with its dot: ".b.c"
	fallback *FilterChain
}

// NewRoutes checks chains as Envoy checks a listener's: a server name in
// two chains, or two default chains, is an error naming them.
func NewRoutes(chains []FilterChain) (*Routes, error) {
	r := &Routes{exact: map[string]*FilterChain{}, wildcard: map[string]*FilterChain{}}
	for i := range chains {
		c := &chains[i]
		if c.Cluster == "" {
			return nil, fmt.Errorf("filter chain %d (%q) names no cluster", i, c.Name)
		}
		if len(c.ServerNames) == 0 {
			if r.fallback != nil {
				return nil, fmt.Errorf("filter chains %q and %q both match every server name", r.fallback.Name, c.Name)
			}
			r.fallback = c
			continue
		}
		for _, n := range c.ServerNames {
			name := strings.ToLower(strings.TrimSuffix(n, "."))
			m, key := r.exact, name
			if strings.HasPrefix(name, "*.") {
				m, key = r.wildcard, name[1:]
			}
			if key == "" || key == "." || strings.Contains(key[1:], "*") {
				return nil, fmt.Errorf("filter chain %q: server name %q is not a name or a *.suffix wildcard", c.Name, n)
			}
			if prev, ok := m[key]; ok {
				return nil, fmt.Errorf("filter chains %q and %q both list server name %q", prev.Name, c.Name, n)
			}
			m[key] = c
		}
	}
	return r, nil
}

// Match is the chain for serverName (already lower-cased, as sni returns
// it; empty for none), or false when none matches and there is no
// default.
func (r *Routes) Match(serverName string) (FilterChain, bool) {
	if r == nil {
		return FilterChain{}, false
	}
	if serverName != "" {
		if c, ok := r.exact[serverName]; ok {
			return *c, true
		}
		for i := strings.IndexByte(serverName, '.'); i >= 0; {
			if c, ok := r.wildcard[serverName[i:]]; ok {
				return *c, true
			}
			j := strings.IndexByte(serverName[i+1:], '.')
			if j < 0 {
				break
			}
			i += 1 + j
		}
	}
	if r.fallback != nil {
		return *r.fallback, true
	}
	return FilterChain{}, false
}

// Upstreams resolves a cluster to the address a new flow is sent to.
type Upstreams interface {
	Upstream(cluster string) (netip.AddrPort, bool)
}

// ConnectTimeouts is what Upstreams may add: a cluster's own
// connect_timeout, which the TCP forwarder then dials under instead of
// its listener-wide one.
type ConnectTimeouts interface {
	ConnectTimeout(cluster string) (time.Duration, bool)
}

// StaticUpstreams is a fixed cluster → address table.
type StaticUpstreams map[string]netip.AddrPort

// Upstream implements Upstreams.
func (s StaticUpstreams) Upstream(cluster string) (netip.AddrPort, bool) {
	a, ok := s[cluster]
	return a, ok
}

// table is the routes and upstreams a forwarder reads, swapped whole.
type table struct {
	mu        sync.RWMutex
	routes    *Routes
	upstreams Upstreams
}

func (t *table) set(r *Routes, u Upstreams) {
	t.mu.Lock()
	t.routes, t.upstreams = r, u
	t.mu.Unlock()
}

// connectTimeout is cluster's own connect timeout, when the upstreams
// state one.
func (t *table) connectTimeout(cluster string) (time.Duration, bool) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if ct, ok := t.upstreams.(ConnectTimeouts); ok {
		return ct.ConnectTimeout(cluster)
	}
	return 0, false
}

// route picks the chain and upstream address for serverName; reason is
// the drop reason when there is none.
func (t *table) route(serverName string) (FilterChain, netip.AddrPort, string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	c, ok := t.routes.Match(serverName)
	if !ok {
		return c, netip.AddrPort{}, DropUnknownSNI
	}
	if t.upstreams == nil {
		return c, netip.AddrPort{}, DropNoUpstream
	}
	a, ok := t.upstreams.Upstream(c.Cluster)
	if !ok {
		return c, netip.AddrPort{}, DropNoUpstream
	}
	return c, a, ""
}
