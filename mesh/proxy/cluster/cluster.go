// Package cluster holds the proxy's upstream clusters (CDS) and their
// endpoints (EDS): what the agent's udp:/tcp: clusters and the blackhole
// cluster compile to, and the weighted round-robin pick a new session makes.
//
// The implemented subset is the contract's: type EDS over ADS (eds_config
// ads{}, resource_api_version V3, service_name) or STATIC with an inline
// load assignment, round-robin load balancing, connect_timeout; for the
// mTLS path (ARCHITECTURE.md, "The mTLS HTTP/2 path") an UpstreamTlsContext transport socket,
// HTTP/2 as the explicit upstream protocol, and an endpoint socket made in
// a named netns. Anything else is an error naming the field, for the xDS
// client to NACK.
package cluster

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
	"github.com/aether-mesh/aether/mesh/proxy/mtls"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// HTTPProtocolOptions is the typed_extension_protocol_options key of the
// upstream HTTP protocol.
const HTTPProtocolOptions = xdsnames.HTTPProtocolOptions

// UpstreamHTTP is the HTTP version an HTTP route's requests go upstream
// with.
type UpstreamHTTP int

const (
	// HTTP1 is Envoy's default when a cluster states no protocol options.
	HTTP1 UpstreamHTTP = iota
	HTTP2
	HTTP3
)

// DefaultIdleTimeout is Envoy's common_http_protocol_options.idle_timeout
// when a cluster states none: an upstream connection with no stream for
// an hour is closed.
const DefaultIdleTimeout = time.Hour

// httpOptions reads the protocol options the contract uses: the explicit
// upstream protocol (HTTP/1.1, HTTP/2 or HTTP/3, each with no options of
// its own) and the pool's idle_timeout, where 0 is Envoy's "never".
func httpOptions(opts map[string]*anypb.Any, path string) (UpstreamHTTP, time.Duration, error) {
	for k, v := range opts {
		if k != HTTPProtocolOptions {
			return HTTP1, 0, fmt.Errorf("%s[%q]: not supported, only %s", path, k, HTTPProtocolOptions)
		}
		kp := fmt.Sprintf("%s[%q]", path, k)
		var o upstreamhttpv3.HttpProtocolOptions
		if err := v.UnmarshalTo(&o); err != nil {
			return HTTP1, 0, fmt.Errorf("%s: not an HttpProtocolOptions: %w", kp, err)
		}
		if err := fields.Only(&o, kp, "explicit_http_config", "common_http_protocol_options"); err != nil {
			return HTTP1, 0, err
		}
		idle, err := idleTimeout(o.GetCommonHttpProtocolOptions(), kp+".common_http_protocol_options")
		if err != nil {
			return HTTP1, 0, err
		}
		e := o.GetExplicitHttpConfig()
		if e == nil {
			return HTTP1, 0, fmt.Errorf("%s.explicit_http_config: missing; it is the only upstream_protocol_options supported", kp)
		}
		if err := fields.Only(e, kp+".explicit_http_config", "http_protocol_options", "http2_protocol_options", "http3_protocol_options"); err != nil {
			return HTTP1, 0, err
		}
		switch {
		case e.GetHttpProtocolOptions() != nil:
			return HTTP1, idle, fields.Only(e.GetHttpProtocolOptions(), kp+".explicit_http_config.http_protocol_options")
		case e.GetHttp2ProtocolOptions() != nil:
			return HTTP2, idle, fields.Only(e.GetHttp2ProtocolOptions(), kp+".explicit_http_config.http2_protocol_options")
		case e.GetHttp3ProtocolOptions() != nil:
			return HTTP3, idle, fields.Only(e.GetHttp3ProtocolOptions(), kp+".explicit_http_config.http3_protocol_options")
		}
		return HTTP1, 0, fmt.Errorf("%s.explicit_http_config: one of http_protocol_options, http2_protocol_options and http3_protocol_options is required", kp)
	}
	return HTTP1, DefaultIdleTimeout, nil
}

// idleTimeout reads common_http_protocol_options: idle_timeout alone,
// absent meaning Envoy's hour.
func idleTimeout(c *corev3.HttpProtocolOptions, path string) (time.Duration, error) {
	if c == nil {
		return DefaultIdleTimeout, nil
	}
	if err := fields.Only(c, path, "idle_timeout"); err != nil {
		return 0, err
	}
	d := c.GetIdleTimeout()
	if d == nil {
		return DefaultIdleTimeout, nil
	}
	if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
		return 0, fmt.Errorf("%s.idle_timeout: %v, want a duration of 0 (never) or more", path, d.AsDuration())
	}
	return d.AsDuration(), nil
}

// upstreamTransport compiles a cluster's transport socket: TLS, or QUIC
// wrapping the same UpstreamTlsContext (a twin).
func upstreamTransport(ts *corev3.TransportSocket, path string) (*mtls.Upstream, bool, error) {
	if ts.GetName() != xdsnames.QUICTransportSocket {
		u, err := mtls.UpstreamFromProto(ts, path)
		return u, false, err
	}
	utc, err := h3.UpstreamFromProto(ts, path)
	if err != nil {
		return nil, false, err
	}
	tc, err := anypb.New(utc)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	u, err := mtls.UpstreamFromProto(&corev3.TransportSocket{Name: xdsnames.TLSTransportSocket, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: tc}}, path+".typed_config.upstream_tls_context")
	return u, true, err
}

// Kind is how a cluster learns its endpoints.
type Kind int

const (
	EDS Kind = iota
	Static
)

// defaultConnectTimeout is Envoy's default for connect_timeout.
const defaultConnectTimeout = 5 * time.Second

// DefaultMaxConnections is Envoy's max_connections when a cluster sets no
// DEFAULT-priority threshold.
const DefaultMaxConnections = 1024

// Spec is a compiled Cluster resource.
type Spec struct {
	Name string
	Kind Kind
	// ServiceName is the EDS resource the cluster subscribes to.
	ServiceName    string
	ConnectTimeout time.Duration
	// Static holds a STATIC cluster's inline endpoints.
	Static *Assignment
	// MaxConnections is the DEFAULT priority's max_connections circuit
	// breaker: at most this many sessions to the cluster at once.
	MaxConnections uint32
	// TLS is the upstream transport socket; nil is plaintext.
	TLS *mtls.Upstream
	// HTTP is the version HTTP requests go upstream with.
	HTTP UpstreamHTTP
	// IdleTimeout closes a pooled upstream connection with no stream for
	// this long; 0 keeps it for as long as the peer does.
	IdleTimeout time.Duration
	// QUIC says the transport socket is QUIC (a twin): TLS is its
	// UpstreamTlsContext, and requests go as HTTP/3.
	QUIC bool
	// PerDownstreamPool is connection_pool_per_downstream_connection:
	// each downstream connection gets upstream connections of its own.
	// The mesh never sets it (#1021); a suite's control does, to count
	// what it costs.
	PerDownstreamPool bool
}

// Endpoint is one upstream host.
type Endpoint struct {
	Addr   netip.AddrPort
	Weight uint32
	// Netns is where the upstream socket is made (the inbound cluster's
	// app on the pod's loopback); empty is the proxy's upstream netns.
	Netns string
}

// Assignment is a compiled ClusterLoadAssignment: the hosts a pick may
// return. Hosts that are not healthy (or unknown) are already left out.
type Assignment struct {
	Name      string
	Endpoints []Endpoint
}

// FromProto compiles a Cluster resource.
func FromProto(c *clusterv3.Cluster) (*Spec, error) {
	path := fmt.Sprintf("Cluster %q", c.GetName())
	if err := c.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := fields.Only(c, path, "name", "type", "eds_cluster_config", "load_assignment", "connect_timeout", "lb_policy", "circuit_breakers", "transport_socket", "typed_extension_protocol_options", "connection_pool_per_downstream_connection"); err != nil {
		return nil, err
	}
	if c.GetLbPolicy() != clusterv3.Cluster_ROUND_ROBIN {
		return nil, fmt.Errorf("%s.lb_policy: %s is not supported, only ROUND_ROBIN", path, c.GetLbPolicy())
	}
	s := &Spec{Name: c.GetName(), ConnectTimeout: defaultConnectTimeout}
	var err error
	if s.MaxConnections, err = maxConnections(c.GetCircuitBreakers(), path+".circuit_breakers"); err != nil {
		return nil, err
	}
	if c.GetConnectTimeout() != nil {
		s.ConnectTimeout = c.GetConnectTimeout().AsDuration()
	}
	if ts := c.GetTransportSocket(); ts != nil {
		if s.TLS, s.QUIC, err = upstreamTransport(ts, path+".transport_socket"); err != nil {
			return nil, err
		}
	}
	if s.HTTP, s.IdleTimeout, err = httpOptions(c.GetTypedExtensionProtocolOptions(), path+".typed_extension_protocol_options"); err != nil {
		return nil, err
	}
	if s.QUIC != (s.HTTP == HTTP3) {
		return nil, fmt.Errorf("%s.typed_extension_protocol_options: HTTP/3 goes with a QUIC transport socket and only with one", path)
	}
	// Only the twin pool (h2/twins.go) keys its connections by downstream.
	if s.PerDownstreamPool = c.GetConnectionPoolPerDownstreamConnection(); s.PerDownstreamPool && !s.QUIC {
		return nil, fmt.Errorf("%s.connection_pool_per_downstream_connection: honoured on QUIC clusters only", path)
	}
	switch c.GetType() {
	case clusterv3.Cluster_EDS:
		s.Kind = EDS
		eds := c.GetEdsClusterConfig()
		if eds == nil {
			return nil, fmt.Errorf("%s.eds_cluster_config: missing on an EDS cluster", path)
		}
		if err := fields.Only(eds, path+".eds_cluster_config", "eds_config", "service_name"); err != nil {
			return nil, err
		}
		src := eds.GetEdsConfig()
		if src.GetAds() == nil {
			return nil, fmt.Errorf("%s.eds_cluster_config.eds_config: only ads{} is supported", path)
		}
		if err := fields.Only(src, path+".eds_cluster_config.eds_config", "ads", "resource_api_version", "initial_fetch_timeout"); err != nil {
			return nil, err
		}
		if src.GetResourceApiVersion() != corev3.ApiVersion_V3 {
			return nil, fmt.Errorf("%s.eds_cluster_config.eds_config.resource_api_version: %s, want V3", path, src.GetResourceApiVersion())
		}
		s.ServiceName = eds.GetServiceName()
		if s.ServiceName == "" {
			s.ServiceName = c.GetName()
		}
		if c.GetLoadAssignment() != nil {
			return nil, fmt.Errorf("%s.load_assignment: set on an EDS cluster", path)
		}
	case clusterv3.Cluster_STATIC:
		s.Kind = Static
		if c.GetEdsClusterConfig() != nil {
			return nil, fmt.Errorf("%s.eds_cluster_config: set on a STATIC cluster", path)
		}
		la := c.GetLoadAssignment()
		if la == nil {
			la = &endpointv3.ClusterLoadAssignment{}
		}
		a, err := assignment(la, path+".load_assignment")
		if err != nil {
			return nil, err
		}
		a.Name = c.GetName()
		s.Static = a
	default:
		return nil, fmt.Errorf("%s.type: %s is not supported, only EDS and STATIC", path, c.GetType())
	}
	return s, nil
}

// maxConnections reads the DEFAULT priority's max_connections. Envoy takes
// the first threshold of each priority; udp_proxy sessions are always
// DEFAULT priority, so a HIGH threshold is accepted and has nothing to cap.
func maxConnections(cb *clusterv3.CircuitBreakers, path string) (uint32, error) {
	if cb == nil {
		return DefaultMaxConnections, nil
	}
	if err := fields.Only(cb, path, "thresholds"); err != nil {
		return 0, err
	}
	limit, found := uint32(DefaultMaxConnections), false
	for i, th := range cb.GetThresholds() {
		if err := fields.Only(th, fmt.Sprintf("%s.thresholds[%d]", path, i), "priority", "max_connections"); err != nil {
			return 0, err
		}
		if th.GetPriority() == corev3.RoutingPriority_DEFAULT && !found {
			found = true
			if mc := th.GetMaxConnections(); mc != nil {
				limit = mc.GetValue()
			}
		}
	}
	return limit, nil
}

// AssignmentFromProto compiles a ClusterLoadAssignment resource.
func AssignmentFromProto(la *endpointv3.ClusterLoadAssignment) (*Assignment, error) {
	path := fmt.Sprintf("ClusterLoadAssignment %q", la.GetClusterName())
	if err := la.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return assignment(la, path)
}

func assignment(la *endpointv3.ClusterLoadAssignment, path string) (*Assignment, error) {
	if err := fields.Only(la, path, "cluster_name", "endpoints"); err != nil {
		return nil, err
	}
	a := &Assignment{Name: la.GetClusterName()}
	for i, loc := range la.GetEndpoints() {
		lp := fmt.Sprintf("%s.endpoints[%d]", path, i)
		if err := fields.Only(loc, lp, "locality", "lb_endpoints", "load_balancing_weight"); err != nil {
			return nil, err
		}
		for j, lbe := range loc.GetLbEndpoints() {
			ep := fmt.Sprintf("%s.lb_endpoints[%d]", lp, j)
			if err := fields.Only(lbe, ep, "endpoint", "health_status", "load_balancing_weight"); err != nil {
				return nil, err
			}
			sa := lbe.GetEndpoint().GetAddress().GetSocketAddress()
			if sa == nil {
				return nil, fmt.Errorf("%s.endpoint.address.socket_address: missing", ep)
			}
			// Envoy resolves an upstream host by address and port alone; the
			// protocol field is accepted either way (the agent marks udp:
			// clusters' hosts UDP), so only a value outside the enum is wrong.
			if _, ok := corev3.SocketAddress_Protocol_name[int32(sa.GetProtocol())]; !ok {
				return nil, fmt.Errorf("%s.endpoint.address.socket_address.protocol: unknown value %d", ep, sa.GetProtocol())
			}
			if err := fields.Only(sa, ep+".endpoint.address.socket_address", "protocol", "address", "port_value", "network_namespace_filepath"); err != nil {
				return nil, err
			}
			ip, err := netip.ParseAddr(sa.GetAddress())
			if err != nil {
				return nil, fmt.Errorf("%s.endpoint.address.socket_address.address: %w", ep, err)
			}
			if sa.GetPortValue() == 0 {
				return nil, fmt.Errorf("%s.endpoint.address.socket_address.port_value: missing", ep)
			}
			switch lbe.GetHealthStatus() {
			case corev3.HealthStatus_UNKNOWN, corev3.HealthStatus_HEALTHY:
			default:
				// Envoy's load balancer routes only to healthy hosts.
				continue
			}
			w := uint32(1)
			if lbe.GetLoadBalancingWeight() != nil {
				w = lbe.GetLoadBalancingWeight().GetValue()
			}
			a.Endpoints = append(a.Endpoints, Endpoint{Addr: netip.AddrPortFrom(ip.Unmap(), uint16(sa.GetPortValue())), Weight: w, Netns: sa.GetNetworkNamespaceFilepath()})
		}
	}
	return a, nil
}

// Errors a pick can return; the data plane counts each separately.
var (
	ErrNotFound  = errors.New("cluster not found")
	ErrNoHealthy = errors.New("no healthy upstream")
)

// Cluster is an active cluster: its spec and its current endpoints.
type Cluster struct {
	Spec *Spec

	mu      sync.Mutex
	hosts   []Endpoint
	current []int64
	total   int64
}

// SetAssignment replaces the endpoints, resetting the round-robin state.
func (c *Cluster) SetAssignment(a *Assignment) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hosts = c.hosts[:0]
	c.total = 0
	for _, e := range a.Endpoints {
		if e.Weight == 0 {
			continue
		}
		c.hosts = append(c.hosts, e)
		c.total += int64(e.Weight)
	}
	c.current = make([]int64, len(c.hosts))
}

// Endpoints returns a copy of the current hosts.
func (c *Cluster) Endpoints() []Endpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Endpoint(nil), c.hosts...)
}

// PickEndpoint is Pick with the host's netns.
func (c *Cluster) PickEndpoint() (Endpoint, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.hosts) == 0 {
		return Endpoint{}, fmt.Errorf("cluster %q: %w", c.Spec.Name, ErrNoHealthy)
	}
	return c.hosts[c.nextLocked()], nil
}

// Pick returns the next host by smooth weighted round robin, which gives
// each host its weight's share in every window of total-weight picks, as
// Envoy's weighted round robin does over time.
func (c *Cluster) Pick() (netip.AddrPort, error) {
	e, err := c.PickEndpoint()
	return e.Addr, err
}

func (c *Cluster) nextLocked() int {
	best := 0
	for i, h := range c.hosts {
		c.current[i] += int64(h.Weight)
		if c.current[i] > c.current[best] {
			best = i
		}
	}
	c.current[best] -= c.total
	return best
}

// New makes an active cluster from a spec; a STATIC cluster is warm at once.
func New(s *Spec) *Cluster {
	c := &Cluster{Spec: s}
	if s.Kind == Static {
		c.SetAssignment(s.Static)
	}
	return c
}
