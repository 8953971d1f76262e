// Package registry holds the mesh model the agent computes configuration
// from: nodes, pods, services with their ports, endpoints, service accounts
// and UDPRoutes, and each node's dependency set. Two sources fill it: a
// scenario file (file.go, the format is documented in scenario.go) and a
// Kubernetes cluster (package registry/kube). Both deliver a whole, checked
// State; the agent never sees a half-applied change.
package registry

import (
	"net/netip"
	"sort"
)

// Protocol is a service port's transport, as a Kubernetes ServicePort spells
// it. ProtocolUDP is the registry's PORT_PROTOCOL_UDP: it is what tells the
// agent that a port is served by a udp: cluster, and which application port
// that cluster's load assignment rewrites to (038 "Dependencies").
type Protocol string

const (
	ProtocolTCP Protocol = "TCP"
	ProtocolUDP Protocol = "UDP"
)

// Key names a namespaced object.
type Key struct {
	Namespace string
	Name      string
}

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// Node is a node of the mesh; the agent serves exactly one.
type Node struct {
	Name string
	// Gateway is set on the node that is its cluster's east-west
	// gateway (ARCHITECTURE.md, "The east-west gateway's passthrough
	// (18009)"); nil on every other node.
	Gateway *Gateway
}

// Gateway is what makes a node its cluster's east-west gateway: the
// address its 18009 listeners bind (one on the network the clusters
// share) and the services of this cluster it lets other clusters reach.
// Each exposed service is forwarded by the SNI of its HTTP port, to its
// pods' 18008 inbound.
type Gateway struct {
	Address netip.Addr
	// Exposes lists the services, in key order.
	Exposes []Key
	// NetnsPath is where the listeners bind (network_namespace_filepath);
	// empty, as on a real node, is the proxy's own netns. A rig whose
	// proxy runs outside the node's netns fills it, as it fills a pod's.
	NetnsPath string
}

// Gateway returns node's gateway, or nil when node is not a gateway.
func (s *State) Gateway(node string) *Gateway {
	for i := range s.Nodes {
		if s.Nodes[i].Name == node {
			return s.Nodes[i].Gateway
		}
	}
	return nil
}

// Pod is a workload instance. NetnsPath is the path the data plane binds its
// capture listeners into (network_namespace_filepath); it is known only once
// the pod's sandbox exists, so a pod without one gets no capture listener.
// WithHandoff fills it from what the CNI handed over.
type Pod struct {
	Name      string
	Namespace string
	// UID is the Kubernetes pod UID; empty in a scenario file.
	UID            string
	Node           string
	ServiceAccount string
	IP             netip.Addr
	Labels         map[string]string
	NetnsPath      string
	Ready          bool
	// DependsOn restricts the services this pod calls; empty means every
	// service in the mesh (see DependencySet).
	DependsOn []Key
}

func (p *Pod) Key() Key { return Key{p.Namespace, p.Name} }

// ServicePort is one port of a service. TargetPort is the backend's
// application port; the mesh spelling (18082) is what clients dial, and the
// service's cluster carries TargetPort.
type ServicePort struct {
	Name       string
	Port       uint16
	TargetPort uint16
	Protocol   Protocol
	// AppProtocol is Kubernetes' appProtocol. AppProtocolHTTP on a TCP
	// port puts it on the mTLS HTTP/2 path: apps call it on 18081 by
	// authority, and its backends serve it on 18008.
	AppProtocol string
}

// AppProtocolHTTP marks a TCP service port as HTTP (the mTLS path).
const AppProtocolHTTP = "http"

// HTTPPort returns the service's first HTTP port: the one its authority on
// 18081 reaches (the authority carries no port).
func (s *Service) HTTPPort() (ServicePort, bool) {
	for _, sp := range s.Ports {
		if sp.Protocol == ProtocolTCP && sp.AppProtocol == AppProtocolHTTP {
			return sp, true
		}
	}
	return ServicePort{}, false
}

// Service is a ClusterIP service.
type Service struct {
	Name      string
	Namespace string
	ClusterIP netip.Addr
	Ports     []ServicePort
	Selector  map[string]string
	// Labels are the service's own labels; WaypointLabel among them
	// sends its traffic through a waypoint.
	Labels map[string]string
}

func (s *Service) Key() Key { return Key{s.Namespace, s.Name} }

// FirstPort returns the first declared port of the given protocol. The L4
// mesh spelling is one dialled port per transport (R3/D1), so a service can
// expose one application port per transport through it: the first declared.
func (s *Service) FirstPort(p Protocol) (ServicePort, bool) {
	for _, sp := range s.Ports {
		if sp.Protocol == p {
			return sp, true
		}
	}
	return ServicePort{}, false
}

// Endpoint is one backend of a service.
type Endpoint struct {
	Pod    string
	IP     netip.Addr
	Node   string
	Ready  bool
	Weight uint32
}

// ServiceAccount is a workload identity.
type ServiceAccount struct {
	Name      string
	Namespace string
}

// ParentRef is a gateway-api ParentReference as far as the mesh reads it. A
// mesh (GAMMA) route attaches to a Service: traffic for that service's
// ClusterIP follows the route.
type ParentRef struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
	Port      uint16
}

// BackendRef is a gateway-api BackendRef. Weight nil means the API default
// of 1; 0 means drain.
type BackendRef struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
	Port      uint16
	Weight    *int32
}

// UDPRouteRule is one rule of a UDPRoute; UDP rules carry no match, only
// backends.
type UDPRouteRule struct {
	Name        string
	BackendRefs []BackendRef
}

// UDPRoute is a gateway-api v1alpha2 UDPRoute.
type UDPRoute struct {
	Name       string
	Namespace  string
	ParentRefs []ParentRef
	Rules      []UDPRouteRule
}

func (r *UDPRoute) Key() Key { return Key{r.Namespace, r.Name} }

// State is one complete, checked view of the mesh. Every slice is sorted by
// key so that two equal meshes produce byte-equal configuration.
type State struct {
	Nodes           []Node
	Pods            []Pod
	Services        []Service
	Endpoints       map[Key][]Endpoint
	ServiceAccounts []ServiceAccount
	UDPRoutes       []UDPRoute
	// Remote are the services other clusters export (export.go) that this
	// cluster does not define, in key order; empty in a single cluster.
	Remote []RemoteService
}

// Sort puts every slice in key order; sources call it before delivering.
func (s *State) Sort() {
	sort.Slice(s.Nodes, func(i, j int) bool { return s.Nodes[i].Name < s.Nodes[j].Name })
	sort.Slice(s.Pods, func(i, j int) bool { return keyLess(s.Pods[i].Key(), s.Pods[j].Key()) })
	sort.Slice(s.Services, func(i, j int) bool { return keyLess(s.Services[i].Key(), s.Services[j].Key()) })
	sort.Slice(s.ServiceAccounts, func(i, j int) bool {
		return keyLess(Key{s.ServiceAccounts[i].Namespace, s.ServiceAccounts[i].Name}, Key{s.ServiceAccounts[j].Namespace, s.ServiceAccounts[j].Name})
	})
	sort.Slice(s.UDPRoutes, func(i, j int) bool { return keyLess(s.UDPRoutes[i].Key(), s.UDPRoutes[j].Key()) })
	for k, eps := range s.Endpoints {
		sort.Slice(eps, func(i, j int) bool {
			if eps[i].IP != eps[j].IP {
				return eps[i].IP.Less(eps[j].IP)
			}
			return eps[i].Pod < eps[j].Pod
		})
		s.Endpoints[k] = eps
	}
}

func keyLess(a, b Key) bool {
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// Service returns the service with key k.
func (s *State) Service(k Key) (*Service, bool) {
	i := sort.Search(len(s.Services), func(i int) bool { return !keyLess(s.Services[i].Key(), k) })
	if i < len(s.Services) && s.Services[i].Key() == k {
		return &s.Services[i], true
	}
	return nil, false
}

// LocalPods returns the pods scheduled on node, in key order.
func (s *State) LocalPods(node string) []Pod {
	var out []Pod
	for _, p := range s.Pods {
		if p.Node == node {
			out = append(out, p)
		}
	}
	return out
}

// WaypointLabel is Istio ambient's label that sends the traffic of a
// service or of a pod through the waypoint proxy it names; "none" opts out
// (a pod's own value wins over its service's).
const WaypointLabel = "istio.io/use-waypoint"

// Waypointed reports whether an endpoint of service k, ready or not, is
// reached through a waypoint: its pod's WaypointLabel decides when the pod
// carries it, else the service's. Such a destination is never eligible
// for an east-west twin: a twin would bypass the waypoint.
func (s *State) Waypointed(k Key) bool {
	svc, ok := s.Service(k)
	if !ok {
		return false
	}
	for _, ep := range s.Endpoints[k] {
		w, set := svc.Labels[WaypointLabel]
		for i := range s.Pods {
			p := &s.Pods[i]
			if p.Namespace == k.Namespace && p.Name == ep.Pod {
				if v, ok := p.Labels[WaypointLabel]; ok {
					w, set = v, true
				}
				break
			}
		}
		if set && w != "" && w != "none" {
			return true
		}
	}
	return false
}

// ReadyEndpoints returns the ready endpoints of service k.
func (s *State) ReadyEndpoints(k Key) []Endpoint {
	var out []Endpoint
	for _, ep := range s.Endpoints[k] {
		if ep.Ready {
			out = append(out, ep)
		}
	}
	return out
}

// Deps is a node's dependency set in a form that is cheap to compute and to
// compare on every rebuild: All stands for every service of the mesh without
// listing 10,000 keys, and Keys holds the declared dependencies otherwise
// (whether or not the service exists yet; callers ask Has of services they
// found).
type Deps struct {
	All  bool
	Keys map[Key]bool
}

// Has reports whether the node depends on service k.
func (d Deps) Has(k Key) bool { return d.All || d.Keys[k] }

// Equal reports whether d and o select the same services.
func (d Deps) Equal(o Deps) bool {
	if d.All || o.All {
		return d.All == o.All
	}
	if len(d.Keys) != len(o.Keys) {
		return false
	}
	for k := range d.Keys {
		if !o.Keys[k] {
			return false
		}
	}
	return true
}

// Dependencies returns the services the proxies on node need configuration
// for: the union of its local pods' DependsOn, where a pod that declares none
// depends on every service. A node with no local pods needs nothing.
func (s *State) Dependencies(node string) Deps {
	d := Deps{Keys: map[Key]bool{}}
	for i := range s.Pods {
		p := &s.Pods[i]
		if p.Node != node {
			continue
		}
		if len(p.DependsOn) == 0 {
			return Deps{All: true}
		}
		for _, k := range p.DependsOn {
			d.Keys[k] = true
		}
	}
	return d
}

// DependencySet is Dependencies as the set of existing services.
func (s *State) DependencySet(node string) map[Key]bool {
	d := s.Dependencies(node)
	deps := map[Key]bool{}
	for i := range s.Services {
		if k := s.Services[i].Key(); d.Has(k) {
			deps[k] = true
		}
	}
	return deps
}

// DeriveEndpoints fills Endpoints for every service that has a selector and
// no endpoints given explicitly: the pods of its namespace whose labels carry
// every selector pair, weight 1, ready as the pod is.
func (s *State) DeriveEndpoints() {
	if s.Endpoints == nil {
		s.Endpoints = map[Key][]Endpoint{}
	}
	for i := range s.Services {
		svc := &s.Services[i]
		if _, given := s.Endpoints[svc.Key()]; given || len(svc.Selector) == 0 {
			continue
		}
		var eps []Endpoint
		for _, p := range s.Pods {
			if p.Namespace == svc.Namespace && selects(svc.Selector, p.Labels) {
				eps = append(eps, Endpoint{Pod: p.Name, IP: p.IP, Node: p.Node, Ready: p.Ready, Weight: 1})
			}
		}
		s.Endpoints[svc.Key()] = eps
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}
