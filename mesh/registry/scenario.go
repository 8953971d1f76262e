package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"

	"sigs.k8s.io/yaml"
)

// Scenario is the file form of the mesh, the registry's file source and the
// input the embedded netns cluster builds from. It is YAML, field names as
// below; an unknown field (spelling and case exact) is an error naming its
// object and path, so a typo cannot silently drop a setting.
//
//	nodes:
//	  - name: node-a
//	  - name: gw
//	    gateway:                # optional: this node is the cluster's east-west gateway
//	      address: 172.30.0.10  # the address its 18009 listeners bind (TCP and UDP)
//	      exposes: [svc-a.demo] # services reachable through it; each needs an HTTP port
//	      netns: /run/netns/gw  # optional; empty is the proxy's own netns (the node's)
//	serviceAccounts:            # "default" exists in every namespace implicitly
//	  - {name: client, namespace: demo}
//	pods:
//	  - name: client-0
//	    namespace: demo         # default "default"
//	    node: node-a            # must be a listed node
//	    serviceAccount: client  # default "default"
//	    ip: 10.244.1.10
//	    labels: {app: client}
//	    ready: true             # default true
//	    netns: /run/netns/x     # optional; the rig that creates the pod fills it
//	    dependsOn: [svc-a.demo] # optional; empty = every service
//	services:
//	  - name: svc-a
//	    namespace: demo
//	    clusterIP: 10.96.0.10
//	    selector: {app: a}      # endpoints = ready pods of the namespace it selects
//	    labels: {istio.io/use-waypoint: wp}  # optional; a waypoint bars east-west twins
//	    ports:
//	      - {name: dgram, port: 5000, targetPort: 5001, protocol: UDP}  # protocol TCP|UDP, default TCP; targetPort default port
//	      - {name: web, port: 8080, targetPort: 7080, appProtocol: http} # appProtocol http: a TCP port on the mTLS HTTP/2 path
//	endpoints:                  # optional; replaces the selector's endpoints of that service
//	  - service: svc-a
//	    namespace: demo
//	    addresses:
//	      - {pod: a-0, ip: 10.244.2.10, node: node-b, ready: true, weight: 3}  # weight default 1, at least 1
//	udpRoutes:                  # gateway-api v1alpha2 UDPRoute objects
//	  - metadata: {name: r, namespace: demo}
//	    spec:
//	      parentRefs: [{kind: Service, name: svc-a}]
//	      rules:
//	        - backendRefs: [{name: svc-a, port: 5000, weight: 1}]
type Scenario struct {
	Nodes           []ScenarioNode           `json:"nodes"`
	ServiceAccounts []ScenarioServiceAccount `json:"serviceAccounts,omitempty"`
	Pods            []ScenarioPod            `json:"pods"`
	Services        []ScenarioService        `json:"services"`
	Endpoints       []ScenarioEndpoints      `json:"endpoints,omitempty"`
	UDPRoutes       []ScenarioUDPRoute       `json:"udpRoutes,omitempty"`
}

type ScenarioNode struct {
	Name    string           `json:"name"`
	Gateway *ScenarioGateway `json:"gateway,omitempty"`
}

type ScenarioGateway struct {
	Address string   `json:"address"`
	Exposes []string `json:"exposes"`
	Netns   string   `json:"netns,omitempty"`
}

type ScenarioServiceAccount struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

type ScenarioPod struct {
	Name           string            `json:"name"`
	Namespace      string            `json:"namespace,omitempty"`
	Node           string            `json:"node"`
	ServiceAccount string            `json:"serviceAccount,omitempty"`
	IP             string            `json:"ip"`
	Labels         map[string]string `json:"labels,omitempty"`
	Ready          *bool             `json:"ready,omitempty"`
	Netns          string            `json:"netns,omitempty"`
	DependsOn      []string          `json:"dependsOn,omitempty"`
}

type ScenarioService struct {
	Name      string                `json:"name"`
	Namespace string                `json:"namespace,omitempty"`
	ClusterIP string                `json:"clusterIP"`
	Ports     []ScenarioServicePort `json:"ports"`
	Selector  map[string]string     `json:"selector,omitempty"`
	Labels    map[string]string     `json:"labels,omitempty"`
}

type ScenarioServicePort struct {
	Name        string `json:"name,omitempty"`
	Port        int    `json:"port"`
	TargetPort  int    `json:"targetPort,omitempty"`
	Protocol    string `json:"protocol,omitempty"`
	AppProtocol string `json:"appProtocol,omitempty"`
}

type ScenarioEndpoints struct {
	Service   string             `json:"service"`
	Namespace string             `json:"namespace,omitempty"`
	Addresses []ScenarioEndpoint `json:"addresses"`
}

type ScenarioEndpoint struct {
	Pod    string `json:"pod,omitempty"`
	IP     string `json:"ip"`
	Node   string `json:"node,omitempty"`
	Ready  *bool  `json:"ready,omitempty"`
	Weight *int   `json:"weight,omitempty"`
}

type ScenarioUDPRoute struct {
	APIVersion string `json:"apiVersion,omitempty"`
	Kind       string `json:"kind,omitempty"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace,omitempty"`
	} `json:"metadata"`
	Spec struct {
		ParentRefs []struct {
			Group       *string `json:"group,omitempty"`
			Kind        *string `json:"kind,omitempty"`
			Namespace   *string `json:"namespace,omitempty"`
			Name        string  `json:"name"`
			SectionName *string `json:"sectionName,omitempty"`
			Port        *int    `json:"port,omitempty"`
		} `json:"parentRefs,omitempty"`
		Rules []struct {
			Name        *string `json:"name,omitempty"`
			BackendRefs []struct {
				Group     *string `json:"group,omitempty"`
				Kind      *string `json:"kind,omitempty"`
				Name      string  `json:"name"`
				Namespace *string `json:"namespace,omitempty"`
				Port      *int    `json:"port,omitempty"`
				Weight    *int32  `json:"weight,omitempty"`
			} `json:"backendRefs,omitempty"`
		} `json:"rules"`
	} `json:"spec"`
}

// FieldError says which object and which field of a scenario is wrong.
type FieldError struct {
	File   string
	Kind   string
	Object string
	Field  string
	Err    error
}

func (e *FieldError) Error() string {
	if e.Object == "" {
		return fmt.Sprintf("%s: field %s: %v", e.File, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: %s %q: field %s: %v", e.File, e.Kind, e.Object, e.Field, e.Err)
}

func (e *FieldError) Unwrap() error { return e.Err }

// LoadScenarioFile reads, parses and checks a scenario file.
func LoadScenarioFile(path string) (*State, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read scenario file %q: %w", path, err)
	}
	return ParseScenario(path, data)
}

// ParseScenario parses and checks a scenario; name labels every error.
func ParseScenario(name string, data []byte) (*State, error) {
	sc, err := DecodeScenario(name, data)
	if err != nil {
		return nil, err
	}
	return sc.State(name)
}

// DecodeScenario parses a scenario without checking it, for a reader that
// edits it before State. Unknown fields are found first and each is named
// by its object and path (the typed decode alone matches field names
// without regard to case, so clusterIp would pass as clusterIP); the typed
// decode then catches values of the wrong type.
func DecodeScenario(name string, data []byte) (*Scenario, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("failed to parse scenario file %q: %w", name, err)
	}
	var doc any
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("failed to parse scenario file %q: %w", name, err)
	}
	if top, ok := doc.(map[string]any); ok && top["clusters"] != nil {
		return nil, fmt.Errorf("%s is a clusters file (clusters.go), not a scenario: an agent watches one cluster's scenario, and its peers come in by --remote-export", name)
	}
	if errs := unknownFields(name, doc); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var sc Scenario
	if err := yaml.UnmarshalStrict(data, &sc); err != nil {
		return nil, fmt.Errorf("failed to parse scenario file %q: %w", name, err)
	}
	return &sc, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func parsePort(v int) (uint16, error) {
	if v < 1 || v > 65535 {
		return 0, fmt.Errorf("must be 1-65535, got %d", v)
	}
	return uint16(v), nil
}

// ParseKey reads "name.namespace", the mesh's service spelling.
func ParseKey(s string) (Key, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			if i == 0 || i == len(s)-1 {
				break
			}
			return Key{Namespace: s[i+1:], Name: s[:i]}, nil
		}
	}
	return Key{}, fmt.Errorf("want <service>.<namespace>, got %q", s)
}

// State checks the scenario and converts it; file labels every error. All
// problems are reported at once, joined.
func (sc *Scenario) State(file string) (*State, error) {
	var errs []error
	bad := func(kind, obj, field string, err error) {
		errs = append(errs, &FieldError{File: file, Kind: kind, Object: obj, Field: field, Err: err})
	}
	st := &State{Endpoints: map[Key][]Endpoint{}}

	if len(sc.Nodes) == 0 {
		// An empty or truncated file parses as an empty mesh; publishing it
		// would withdraw every listener, so it is an error instead.
		bad("scenario", "nodes", "nodes", errors.New("must list at least one node"))
	}
	nodes := map[string]bool{}
	for i, n := range sc.Nodes {
		obj := fmt.Sprintf("nodes[%d]", i)
		switch {
		case n.Name == "":
			bad("node", obj, "name", errors.New("must not be empty"))
		case nodes[n.Name]:
			bad("node", n.Name, "name", errors.New("duplicate node"))
		default:
			nodes[n.Name] = true
			st.Nodes = append(st.Nodes, Node{Name: n.Name})
		}
	}
	// Gateways are checked once the services are known (below).

	sas := map[Key]bool{}
	for i, sa := range sc.ServiceAccounts {
		k := Key{orDefault(sa.Namespace, "default"), sa.Name}
		if sa.Name == "" {
			bad("serviceAccount", fmt.Sprintf("serviceAccounts[%d]", i), "name", errors.New("must not be empty"))
			continue
		}
		if sas[k] {
			bad("serviceAccount", k.String(), "name", errors.New("duplicate service account"))
			continue
		}
		sas[k] = true
		st.ServiceAccounts = append(st.ServiceAccounts, ServiceAccount{Name: k.Name, Namespace: k.Namespace})
	}

	pods := map[Key]bool{}
	podIPs := map[netip.Addr]string{}
	for i, sp := range sc.Pods {
		k := Key{orDefault(sp.Namespace, "default"), sp.Name}
		obj := k.String()
		if sp.Name == "" {
			bad("pod", fmt.Sprintf("pods[%d]", i), "name", errors.New("must not be empty"))
			continue
		}
		if pods[k] {
			bad("pod", obj, "name", errors.New("duplicate pod"))
			continue
		}
		pods[k] = true
		p := Pod{Name: k.Name, Namespace: k.Namespace, Node: sp.Node, Labels: sp.Labels, NetnsPath: sp.Netns, Ready: true,
			ServiceAccount: orDefault(sp.ServiceAccount, "default")}
		if sp.Ready != nil {
			p.Ready = *sp.Ready
		}
		if !nodes[sp.Node] {
			bad("pod", obj, "node", fmt.Errorf("unknown node %q", sp.Node))
		}
		if p.ServiceAccount != "default" && !sas[Key{k.Namespace, p.ServiceAccount}] {
			bad("pod", obj, "serviceAccount", fmt.Errorf("unknown service account %q in namespace %q", p.ServiceAccount, k.Namespace))
		}
		ip, err := netip.ParseAddr(sp.IP)
		if err != nil {
			bad("pod", obj, "ip", err)
		} else if other, dup := podIPs[ip]; dup {
			bad("pod", obj, "ip", fmt.Errorf("%s already belongs to pod %s", ip, other))
		} else {
			podIPs[ip] = obj
			p.IP = ip
		}
		for j, d := range sp.DependsOn {
			dk, err := ParseKey(d)
			if err != nil {
				bad("pod", obj, fmt.Sprintf("dependsOn[%d]", j), err)
				continue
			}
			p.DependsOn = append(p.DependsOn, dk)
		}
		st.Pods = append(st.Pods, p)
	}

	svcs := map[Key]bool{}
	clusterIPs := map[netip.Addr]string{}
	for i, ss := range sc.Services {
		k := Key{orDefault(ss.Namespace, "default"), ss.Name}
		obj := k.String()
		if ss.Name == "" {
			bad("service", fmt.Sprintf("services[%d]", i), "name", errors.New("must not be empty"))
			continue
		}
		if svcs[k] {
			bad("service", obj, "name", errors.New("duplicate service"))
			continue
		}
		svcs[k] = true
		svc := Service{Name: k.Name, Namespace: k.Namespace, Selector: ss.Selector, Labels: ss.Labels}
		ip, err := netip.ParseAddr(ss.ClusterIP)
		if err != nil {
			bad("service", obj, "clusterIP", err)
		} else if other, dup := clusterIPs[ip]; dup {
			bad("service", obj, "clusterIP", fmt.Errorf("%s already belongs to service %s", ip, other))
		} else if pod, dup := podIPs[ip]; dup {
			// A datagram to it would be captured as the service's and the
			// pod behind that address could never be reached directly.
			bad("service", obj, "clusterIP", fmt.Errorf("%s is the IP of pod %s", ip, pod))
		} else {
			clusterIPs[ip] = obj
			svc.ClusterIP = ip
		}
		if len(ss.Ports) == 0 {
			bad("service", obj, "ports", errors.New("must list at least one port"))
		}
		seen := map[string]bool{}
		for j, p := range ss.Ports {
			f := fmt.Sprintf("ports[%d]", j)
			sp := ServicePort{Name: p.Name, Protocol: Protocol(orDefault(p.Protocol, string(ProtocolTCP)))}
			if sp.Protocol != ProtocolTCP && sp.Protocol != ProtocolUDP {
				bad("service", obj, f+".protocol", fmt.Errorf("must be TCP or UDP, got %q", p.Protocol))
			}
			switch sp.AppProtocol = p.AppProtocol; {
			case sp.AppProtocol == "":
			case sp.AppProtocol != AppProtocolHTTP:
				bad("service", obj, f+".appProtocol", fmt.Errorf("must be %q or absent, got %q", AppProtocolHTTP, p.AppProtocol))
			case sp.Protocol != ProtocolTCP:
				bad("service", obj, f+".appProtocol", fmt.Errorf("%q needs protocol TCP, got %s", p.AppProtocol, sp.Protocol))
			}
			var err error
			if sp.Port, err = parsePort(p.Port); err != nil {
				bad("service", obj, f+".port", err)
			}
			tp := p.TargetPort
			if tp == 0 {
				tp = p.Port
			}
			if sp.TargetPort, err = parsePort(tp); err != nil {
				bad("service", obj, f+".targetPort", err)
			}
			id := fmt.Sprintf("%d/%s", sp.Port, sp.Protocol)
			if seen[id] {
				bad("service", obj, f+".port", fmt.Errorf("duplicate port %s", id))
			}
			seen[id] = true
			svc.Ports = append(svc.Ports, sp)
		}
		st.Services = append(st.Services, svc)
	}

	for i, se := range sc.Endpoints {
		k := Key{orDefault(se.Namespace, "default"), se.Service}
		obj := k.String()
		if !svcs[k] {
			bad("endpoints", fmt.Sprintf("endpoints[%d]", i), "service", fmt.Errorf("unknown service %s", obj))
			continue
		}
		if _, dup := st.Endpoints[k]; dup {
			bad("endpoints", obj, "service", errors.New("endpoints listed twice for this service"))
			continue
		}
		eps := []Endpoint{}
		for j, a := range se.Addresses {
			f := fmt.Sprintf("addresses[%d]", j)
			ep := Endpoint{Pod: a.Pod, Node: a.Node, Ready: true, Weight: 1}
			if a.Ready != nil {
				ep.Ready = *a.Ready
			}
			ip, err := netip.ParseAddr(a.IP)
			if err != nil {
				bad("endpoints", obj, f+".ip", err)
			}
			ep.IP = ip
			if a.Node != "" && !nodes[a.Node] {
				bad("endpoints", obj, f+".node", fmt.Errorf("unknown node %q", a.Node))
			}
			if a.Weight != nil {
				// Envoy's load_balancing_weight is at least 1; draining an
				// endpoint is ready: false.
				if *a.Weight < 1 || *a.Weight > 1<<24 {
					bad("endpoints", obj, f+".weight", fmt.Errorf("must be 1-%d, got %d", 1<<24, *a.Weight))
				} else {
					ep.Weight = uint32(*a.Weight)
				}
			}
			eps = append(eps, ep)
		}
		st.Endpoints[k] = eps
	}

	routes := map[Key]bool{}
	for i, sr := range sc.UDPRoutes {
		k := Key{orDefault(sr.Metadata.Namespace, "default"), sr.Metadata.Name}
		obj := k.String()
		if sr.Metadata.Name == "" {
			bad("udpRoute", fmt.Sprintf("udpRoutes[%d]", i), "metadata.name", errors.New("must not be empty"))
			continue
		}
		if routes[k] {
			bad("udpRoute", obj, "metadata.name", errors.New("duplicate UDPRoute"))
			continue
		}
		routes[k] = true
		if sr.Kind != "" && sr.Kind != "UDPRoute" {
			bad("udpRoute", obj, "kind", fmt.Errorf("must be UDPRoute, got %q", sr.Kind))
		}
		r := UDPRoute{Name: k.Name, Namespace: k.Namespace}
		if len(sr.Spec.ParentRefs) == 0 {
			bad("udpRoute", obj, "spec.parentRefs", errors.New("must list at least one parent"))
		}
		for j, pr := range sr.Spec.ParentRefs {
			f := fmt.Sprintf("spec.parentRefs[%d]", j)
			ref := ParentRef{Kind: deref(pr.Kind, "Gateway"), Namespace: deref(pr.Namespace, k.Namespace), Name: pr.Name}
			// The API's default group is the Gateway API's own; GAMMA asks for
			// group "" with kind Service, and a parent Service with the group
			// left out means the same thing to every reader of a scenario.
			ref.Group = deref(pr.Group, "gateway.networking.k8s.io")
			if pr.Group == nil && ref.Kind == "Service" {
				ref.Group = ""
			}
			if pr.Name == "" {
				bad("udpRoute", obj, f+".name", errors.New("must not be empty"))
			}
			if pr.Port != nil {
				p, err := parsePort(*pr.Port)
				if err != nil {
					bad("udpRoute", obj, f+".port", err)
				}
				ref.Port = p
			}
			r.ParentRefs = append(r.ParentRefs, ref)
		}
		if len(sr.Spec.Rules) == 0 || len(sr.Spec.Rules) > 16 {
			bad("udpRoute", obj, "spec.rules", fmt.Errorf("must list 1-16 rules, got %d", len(sr.Spec.Rules)))
		}
		for j, rule := range sr.Spec.Rules {
			rr := UDPRouteRule{Name: deref(rule.Name, "")}
			for b, br := range rule.BackendRefs {
				f := fmt.Sprintf("spec.rules[%d].backendRefs[%d]", j, b)
				ref := BackendRef{Group: deref(br.Group, ""), Kind: deref(br.Kind, "Service"),
					Namespace: deref(br.Namespace, k.Namespace), Name: br.Name, Weight: br.Weight}
				if br.Name == "" {
					bad("udpRoute", obj, f+".name", errors.New("must not be empty"))
				}
				if br.Port != nil {
					p, err := parsePort(*br.Port)
					if err != nil {
						bad("udpRoute", obj, f+".port", err)
					}
					ref.Port = p
				}
				if br.Weight != nil && (*br.Weight < 0 || *br.Weight > 1000000) {
					bad("udpRoute", obj, f+".weight", fmt.Errorf("must be 0-1000000, got %d", *br.Weight))
				}
				rr.BackendRefs = append(rr.BackendRefs, ref)
			}
			r.Rules = append(r.Rules, rr)
		}
		st.UDPRoutes = append(st.UDPRoutes, r)
	}

	gateways := 0
	for _, n := range sc.Nodes {
		ni := slices.IndexFunc(st.Nodes, func(x Node) bool { return x.Name == n.Name })
		if n.Gateway == nil || ni < 0 || st.Nodes[ni].Gateway != nil {
			continue
		}
		gateways++
		if gateways == 2 {
			bad("node", n.Name, "gateway", errors.New("a second east-west gateway: a cluster has one"))
		}
		g := &Gateway{NetnsPath: n.Gateway.Netns}
		ip, err := netip.ParseAddr(n.Gateway.Address)
		switch {
		case err != nil:
			bad("node", n.Name, "gateway.address", err)
		case !ip.IsGlobalUnicast() && !ip.IsPrivate():
			bad("node", n.Name, "gateway.address", fmt.Errorf("%s is not a unicast address a peer cluster can reach", ip))
		default:
			g.Address = ip.Unmap()
		}
		if len(n.Gateway.Exposes) == 0 {
			bad("node", n.Name, "gateway.exposes", errors.New("must list at least one service"))
		}
		for j, e := range n.Gateway.Exposes {
			f := fmt.Sprintf("gateway.exposes[%d]", j)
			k, err := ParseKey(e)
			if err != nil {
				bad("node", n.Name, f, err)
				continue
			}
			if slices.Contains(g.Exposes, k) {
				bad("node", n.Name, f, fmt.Errorf("service %s listed twice", k))
				continue
			}
			si := slices.IndexFunc(st.Services, func(s Service) bool { return s.Key() == k })
			if si < 0 {
				bad("node", n.Name, f, fmt.Errorf("unknown service %s", k))
				continue
			}
			if _, ok := st.Services[si].HTTPPort(); !ok {
				// The gateway forwards by the SNI of the service's HTTP
				// port, the only one its pods' 18008 inbound serves.
				bad("node", n.Name, f, fmt.Errorf("service %s has no port with appProtocol %q, so nothing to forward", k, AppProtocolHTTP))
				continue
			}
			g.Exposes = append(g.Exposes, k)
		}
		slices.SortFunc(g.Exposes, func(a, b Key) int {
			if keyLess(a, b) {
				return -1
			}
			if keyLess(b, a) {
				return 1
			}
			return 0
		})
		st.Nodes[ni].Gateway = g
	}

	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	st.DeriveEndpoints()
	st.Sort()
	return st, nil
}

func deref[T any](p *T, d T) T {
	if p == nil {
		return d
	}
	return *p
}
