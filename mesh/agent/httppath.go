package agent

import (
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"net/netip"
	"slices"
	"strings"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
	"github.com/aether-mesh/aether/mesh/agent/gateway"
	"github.com/aether-mesh/aether/mesh/agent/mtls"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// HTTPPath configures the mTLS HTTP/2 path (ARCHITECTURE.md, "The mTLS HTTP/2 path"). A
// builder without one emits none of it.
type HTTPPath struct {
	TrustDomain spiffeid.TrustDomain
	MeshDomain  string
	// AccessLog is the file each proxy appends its JSON access log to.
	AccessLog string
	// StaticCert makes every h2 cluster present the first local account's
	// SVID for every source: the #831 control, never a mesh setting.
	StaticCert bool
	// UnhashedIdentity stamps the source identity with Envoy's default
	// envoy.string factory, which is not Hashable: the certificate is still
	// chosen per connection, but the identity stays out of the pool key and
	// a source rides another's connection (#831). A control, never a mesh
	// setting.
	UnhashedIdentity bool
	// Identities serves the SVIDs of the node's accounts and the bundle.
	Identities identity.Source
	// Federated serves the bundles of the trust domains the mesh
	// federates with (ARCHITECTURE.md, "Federation"): each is one more
	// trust domain entry of the trust bundle secret, beside the local
	// one. Nil: the local trust domain alone.
	Federated FederatedBundles
	// EastWest adds east-west QUIC (ARCHITECTURE.md, "On-demand twins"):
	// each pod's QUIC inbound beside its TCP one, and outbound routes that
	// select each local account's twin, fetched on demand.
	EastWest bool
	// H2Egress keeps the node's own requests on HTTP/2 (--mesh-transport
	// h2): no route selects a twin. Its pods' QUIC inbounds stay, since a
	// transport switch rolls node by node: a peer still on auto keeps its
	// twins to this node's pods, and withdrawing the inbounds under it
	// would fail its requests (503 UF) until it switched too.
	H2Egress bool
	// QUICResumption states the R4 fields true on every QUIC chain
	// (Controls.QUICResumption), and QUICInboundWildcard binds QUIC
	// inbounds to 0.0.0.0, transparent (Controls.QUICInboundWildcard):
	// controls, never mesh settings.
	QUICResumption, QUICInboundWildcard bool
	// GatewayFirstService forwards every gateway chain to the first
	// exposed service (Controls.GatewayFirstService): a control, never a
	// mesh setting.
	GatewayFirstService bool
}

// FederatedBundles are other trust domains' bundles the agent trusts
// beside its own: what identity/federation's Fetcher serves.
type FederatedBundles interface {
	// Bundles are the current bundles, one per trust domain.
	Bundles() []*x509bundle.Bundle
	// Subscribe is as identity.Source's: a coalescing channel that
	// receives after any bundle changed.
	Subscribe() (changed <-chan struct{}, cancel func())
}

// LocalAccounts are the service accounts of the node's pods in the mesh:
// the SVIDs the node's proxy presents, which an issuer must keep current.
// A pod is in the mesh once the CNI handed it over (it has a netns path);
// one the CNI left out (an excluded namespace, the mesh's own installer)
// has no listener and its account is not the node's.
func LocalAccounts(st *registry.State, node string) []identity.Account {
	var out []identity.Account
	for i := range st.Pods {
		p := &st.Pods[i]
		if p.Node != node || p.NetnsPath == "" {
			continue
		}
		a := identity.Account{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(x, y identity.Account) int {
		if c := strings.Compare(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return strings.Compare(x.ServiceAccount, y.ServiceAccount)
	})
	return out
}

// httpResources is the node's whole mTLS path: its accounts' SVID
// secrets and the bundle, each local pod's inbound and outbound listener
// and inbound clusters, and an h2 cluster with its load assignment per
// HTTP service the node depends on. A service with no endpoint has no
// peer to pin, so it gets neither cluster nor route; its authority is
// answered by the unknown-authority 404.
func (h *HTTPPath) httpResources(st *registry.State, node string, deps registry.Deps) (map[resource.Type][]types.Resource, error) {
	out := map[resource.Type][]types.Resource{}
	if !slices.ContainsFunc(st.Pods, func(p registry.Pod) bool { return p.Node == node && p.NetnsPath != "" }) {
		// No local pod can listen yet: clusters would serve no one, and
		// their secrets would have no listener to be presented by.
		return out, nil
	}
	ids := map[registry.Key]string{}
	for i := range st.Pods {
		p := &st.Pods[i]
		id, err := identity.ID(h.TrustDomain, identity.Account{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount})
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", p.Key(), err)
		}
		ids[p.Key()] = id.String()
	}
	m := mtls.Mesh{Domain: h.MeshDomain, AccessLog: h.AccessLog}
	up := mtls.Upstream{}
	if local := LocalAccounts(st, node); h.StaticCert && len(local) > 0 {
		id, err := identity.ID(h.TrustDomain, local[0])
		if err != nil {
			return nil, err
		}
		up.StaticSecret = id.String()
	}
	routes, err := h.services(st, deps, ids, m, up, out)
	if err != nil {
		return nil, err
	}
	sels, err := h.selections(st, node, routes)
	if err != nil {
		return nil, err
	}
	var served []string
	for i := range st.Pods {
		p := &st.Pods[i]
		if p.Node != node || p.NetnsPath == "" {
			continue
		}
		listens, err := h.podListeners(st, p, ids[p.Key()], routes, sels, m, out)
		if err != nil {
			return nil, err
		}
		if listens && !slices.Contains(served, ids[p.Key()]) {
			served = append(served, ids[p.Key()])
		}
	}
	if up.StaticSecret != "" && len(routes) > 0 && !slices.Contains(served, up.StaticSecret) {
		served = append(served, up.StaticSecret)
	}
	if err := h.secrets(served, out); err != nil {
		return nil, err
	}
	return out, nil
}

// secrets emits the SVID of every identity a local listener presents, and
// the trust bundle when there is any: the local bundle and each federated
// one.
func (h *HTTPPath) secrets(ids []string, out map[resource.Type][]types.Resource) error {
	if len(ids) == 0 {
		return nil
	}
	b, err := h.Identities.GetX509BundleForTrustDomain(h.TrustDomain)
	if err != nil {
		return fmt.Errorf("trust bundle secret: %w", err)
	}
	bundles := []*x509bundle.Bundle{b}
	if h.Federated != nil {
		for _, fb := range h.Federated.Bundles() {
			if fb.TrustDomain() == h.TrustDomain {
				// The local trust domain is the local CA's alone; a peer
				// claiming it could mint the mesh's own identities.
				return fmt.Errorf("trust bundle secret: a federated bundle claims the local trust domain %q", h.TrustDomain)
			}
			bundles = append(bundles, fb)
		}
	}
	bs, err := mtls.BundleSecret(bundles)
	if err != nil {
		return err
	}
	out[resource.SecretType] = append(out[resource.SecretType], bs)
	for _, s := range ids {
		id, err := spiffeid.FromString(s)
		if err != nil {
			return err
		}
		svid, err := h.Identities.GetX509SVIDFor(id)
		if err != nil {
			return fmt.Errorf("SVID secret of %s: %w", id, err)
		}
		s, err := mtls.SVIDSecret(svid)
		if err != nil {
			return err
		}
		out[resource.SecretType] = append(out[resource.SecretType], s)
	}
	return nil
}

// services emits the h2 cluster and load assignment of every HTTP service
// the node depends on that has endpoints, and returns their routes.
func (h *HTTPPath) services(st *registry.State, deps registry.Deps, ids map[registry.Key]string, m mtls.Mesh, up mtls.Upstream, out map[resource.Type][]types.Resource) ([]mtls.Route, error) {
	var routes []mtls.Route
	for i := range st.Services {
		s := &st.Services[i]
		sp, ok := s.HTTPPort()
		if !ok || !deps.Has(s.Key()) {
			continue
		}
		var accounts []string
		var ips []netip.Addr
		for _, ep := range st.Endpoints[s.Key()] {
			id := ids[registry.Key{Namespace: s.Namespace, Name: ep.Pod}]
			if !ep.Ready || id == "" {
				continue
			}
			if !slices.Contains(accounts, id) {
				accounts = append(accounts, id)
			}
			ips = append(ips, ep.IP)
		}
		if len(accounts) == 0 {
			continue
		}
		slices.Sort(accounts)
		c, err := mtls.H2ClusterFor(m, mtls.Service{Name: s.Name, Namespace: s.Namespace, Port: sp.Port, Accounts: accounts}, up)
		if err != nil {
			return nil, err
		}
		out[resource.ClusterType] = append(out[resource.ClusterType], c)
		out[resource.EndpointType] = append(out[resource.EndpointType], mtls.H2Assignment(s.Name, s.Namespace, ips))
		routes = append(routes, mtls.Route{Service: s.Name, Namespace: s.Namespace})
	}
	for i := range st.Remote {
		r := &st.Remote[i]
		if !deps.Has(r.Key()) {
			continue
		}
		// The SNI is the remote cluster's own spelling of the service:
		// its gateway's chains and the destination inbound match it.
		rm := m
		rm.Domain = r.MeshDomain
		c, err := mtls.H2ClusterFor(rm, mtls.Service{Name: r.Name, Namespace: r.Namespace, Port: r.Port, Accounts: r.Accounts}, up)
		if err != nil {
			return nil, fmt.Errorf("remote service of cluster %q: %w", r.Cluster, err)
		}
		out[resource.ClusterType] = append(out[resource.ClusterType], c)
		out[resource.EndpointType] = append(out[resource.EndpointType], mtls.H2GatewayAssignment(r.Name, r.Namespace, r.Gateway))
		routes = append(routes, mtls.Route{Service: r.Name, Namespace: r.Namespace})
	}
	return routes, nil
}

// podListeners emits a local pod's outbound listener (every route) and, when
// it backs an HTTP service, its inbound listener and clusters. It reports
// whether the pod got either, and with it a use for its SVID.
func (h *HTTPPath) podListeners(st *registry.State, p *registry.Pod, id string, routes []mtls.Route, sels map[string]eastwest.Selection, m mtls.Mesh, out map[resource.Type][]types.Resource) (bool, error) {
	pod := mtls.Pod{Namespace: p.Namespace, Name: p.Name, ID: id, IP: p.IP, NetnsPath: p.NetnsPath}
	for i := range st.Services {
		s := &st.Services[i]
		sp, ok := s.HTTPPort()
		if !ok || s.Namespace != p.Namespace {
			continue
		}
		for _, ep := range st.Endpoints[s.Key()] {
			if ep.Pod == p.Name {
				pod.Serves = append(pod.Serves, mtls.Port{Service: s.Name, Namespace: s.Namespace, Port: sp.Port, TargetPort: sp.TargetPort})
				break
			}
		}
	}
	in, cls, err := mtls.InboundListenerFor(m, pod)
	if err != nil {
		return false, err
	}
	if in != nil {
		out[resource.ListenerType] = append(out[resource.ListenerType], in)
		for _, c := range cls {
			out[resource.ClusterType] = append(out[resource.ClusterType], c)
		}
		if h.EastWest {
			q, err := eastwest.QuicInbound(in, p.Namespace, p.Name, p.NetnsPath)
			if err == nil && h.QUICResumption {
				q, err = eastwest.WithResumption(q)
			}
			if err == nil && h.QUICInboundWildcard {
				q = eastwest.WithWildcard(q)
			}
			if err != nil {
				return false, err
			}
			out[resource.ListenerType] = append(out[resource.ListenerType], q)
		}
	}
	if len(routes) == 0 {
		return in != nil, nil
	}
	factory := mtls.HashableString
	if h.UnhashedIdentity {
		factory = mtls.PlainString
	}
	ol, err := mtls.OutboundListenerFor(m, pod, routes, factory)
	if err != nil {
		return false, err
	}
	if ol, err = eastwest.WithTwins(ol, sels); err != nil {
		return false, err
	}
	out[resource.ListenerType] = append(out[resource.ListenerType], ol)
	return true, nil
}

// selections are the twin choices of every routed destination: one arm
// per local account, to the twin quic:<svc>.<ns>@<sa>.<sa-ns>, and the h2
// cluster for any other source. Without EastWest, or with H2Egress, there
// are none, and a destination with a waypointed endpoint has none: a twin
// would bypass its waypoint.
func (h *HTTPPath) selections(st *registry.State, node string, routes []mtls.Route) (map[string]eastwest.Selection, error) {
	if !h.EastWest || h.H2Egress {
		return nil, nil
	}
	sels := map[string]eastwest.Selection{}
	local := LocalAccounts(st, node)
	for _, r := range routes {
		key := registry.Key{Namespace: r.Namespace, Name: r.Service}
		if st.Waypointed(key) {
			continue
		}
		// A destination whose accounts do not name the twin's SNI would
		// fail every QUIC handshake; it stays on its h2 cluster. For a
		// remote service (another cluster's, through its gateway) the
		// export says so.
		if svc, ok := st.Service(key); !ok {
			if r, ok := st.RemoteService(key); !ok || !r.QUIC {
				continue
			}
		} else {
			if sp, ok := svc.HTTPPort(); ok {
				if _, ready, err := h.quicAccounts(st, svc, sp.Port); err != nil {
					return nil, err
				} else if !ready {
					continue
				}
			}
		}
		sel := eastwest.Selection{Key: xdsnames.CertMapperFilterStateKey, Twins: map[string]string{}, Floor: xdsnames.H2Cluster(r.Service, r.Namespace)}
		for _, a := range local {
			id, err := identity.ID(h.TrustDomain, a)
			if err != nil {
				return nil, err
			}
			sel.Twins[id.String()] = xdsnames.TwinCluster(xdsnames.Twin{Service: r.Service, Namespace: r.Namespace, SA: a.ServiceAccount, SANamespace: a.Namespace})
		}
		sels[sel.Floor] = sel
	}
	return sels, nil
}

// gatewayResources adds the east-west gateway's listeners, clusters and
// load assignments when the registry makes node its cluster's gateway
// (ARCHITECTURE.md, "The east-west gateway's passthrough (18009)"). It
// rides the mTLS path: what it forwards is that path's sessions, named by
// the SNIs the path spells.
func (h *HTTPPath) gatewayResources(st *registry.State, node string, out map[resource.Type][]types.Resource) error {
	g := st.Gateway(node)
	if g == nil {
		return nil
	}
	c := gateway.Config{Node: node, Address: g.Address, NetnsPath: g.NetnsPath, Domain: h.MeshDomain, FirstServiceOnly: h.GatewayFirstService}
	for _, k := range g.Exposes {
		svc, ok := st.Service(k)
		if !ok {
			return fmt.Errorf("exposed service %s is not in the registry", k)
		}
		sp, ok := svc.HTTPPort()
		if !ok {
			return fmt.Errorf("exposed service %s has no HTTP port", k)
		}
		s := gateway.Service{Name: svc.Name, Namespace: svc.Namespace, Port: sp.Port}
		for _, ep := range st.ReadyEndpoints(k) {
			s.Pods = append(s.Pods, ep.IP)
		}
		c.Services = append(c.Services, s)
	}
	res, err := gateway.Resources(c)
	if err != nil {
		return err
	}
	for typ, list := range res {
		out[typ] = append(out[typ], list...)
	}
	return nil
}

// twin is t's cluster on the mTLS path: the destination's HTTP port and
// accounts, the source account's SVID. It says why not when st gives
// the destination no HTTP port or no account.
func (h *HTTPPath) twin(st *registry.State, t xdsnames.Twin) (*clusterv3.Cluster, string, error) {
	svc, ok := st.Service(registry.Key{Namespace: t.Namespace, Name: t.Service})
	if !ok {
		return h.remoteTwin(st, t)
	}
	sp, ok := svc.HTTPPort()
	if !ok {
		return nil, RefusedNotHTTP, nil
	}
	accounts, ready, err := h.quicAccounts(st, svc, sp.Port)
	if err != nil {
		return nil, "", err
	}
	if !ready {
		return nil, RefusedNotIdentityReady, nil
	}
	src, err := identity.ID(h.TrustDomain, identity.Account{Namespace: t.SANamespace, ServiceAccount: t.SA})
	if err != nil {
		return nil, "", err
	}
	c, err := eastwest.TwinCluster(eastwest.Twin{Twin: t, Port: sp.Port, Domain: h.MeshDomain, SourceID: src.String(), Accounts: accounts})
	return c, "", err
}

// remoteTwin is the twin of a remote service: the SNI in the exporting
// cluster's mesh domain, its accounts as the export lists them.
func (h *HTTPPath) remoteTwin(st *registry.State, t xdsnames.Twin) (*clusterv3.Cluster, string, error) {
	r, ok := st.RemoteService(registry.Key{Namespace: t.Namespace, Name: t.Service})
	if !ok {
		return nil, RefusedUnknownDestination, nil
	}
	if !r.QUIC {
		return nil, RefusedNotIdentityReady, nil
	}
	src, err := identity.ID(h.TrustDomain, identity.Account{Namespace: t.SANamespace, ServiceAccount: t.SA})
	if err != nil {
		return nil, "", err
	}
	c, err := eastwest.TwinCluster(eastwest.Twin{Twin: t, Port: r.Port, Domain: r.MeshDomain, SourceID: src.String(), Accounts: r.Accounts})
	return c, "", err
}

// quicAccounts are the SPIFFE IDs of svc's ready endpoints' accounts,
// sorted. svc is identity-ready for QUIC when it has one and each names
// the twin's SNI <port>.<svc>.<ns>.<mesh-domain> in its DNS SANs: the
// twin's client checks the server's SANs against the SNI after its SPIFFE
// ID (Q5), so an account named otherwise fails every handshake.
func (h *HTTPPath) quicAccounts(st *registry.State, svc *registry.Service, port uint16) ([]string, bool, error) {
	sni := xdsnames.SNI(port, svc.Name, svc.Namespace, h.MeshDomain)
	var accounts []string
	ready := true
	for _, ep := range st.ReadyEndpoints(svc.Key()) {
		for i := range st.Pods {
			p := &st.Pods[i]
			if p.Namespace != svc.Namespace || p.Name != ep.Pod {
				continue
			}
			a := identity.Account{Namespace: p.Namespace, ServiceAccount: p.ServiceAccount}
			id, err := identity.ID(h.TrustDomain, a)
			if err != nil {
				return nil, false, err
			}
			if !slices.Contains(accounts, id.String()) {
				accounts = append(accounts, id.String())
				ready = ready && identity.NamesServer(a, h.MeshDomain, sni)
			}
		}
	}
	slices.Sort(accounts)
	return accounts, ready && len(accounts) > 0, nil
}

// addHTTPPath appends the mTLS path's resources to out and records in the
// index those that differ from the previous build's, so an unchanged SVID
// or listener is not published again. The path is small (a few resources
// per local pod and HTTP service), so it is generated whole every build.
func (b *Builder) addHTTPPath(st *registry.State, deps registry.Deps, out *Output) error {
	if b.HTTP == nil {
		if st.Gateway(b.Node) != nil {
			// Silence would leave a cluster without its gateway and no
			// word of why.
			return fmt.Errorf("the registry makes node %q its cluster's east-west gateway, which forwards the mTLS path's sessions by their SNI, but the mTLS path is off (--trust-domain, --ca-dir)", b.Node)
		}
		return nil
	}
	res, err := b.HTTP.httpResources(st, b.Node, deps)
	if err != nil {
		return fmt.Errorf("mTLS path for node %q: %w", b.Node, err)
	}
	if err := b.HTTP.gatewayResources(st, b.Node, res); err != nil {
		return fmt.Errorf("east-west gateway on node %q: %w", b.Node, err)
	}
	next := map[resource.Type]map[string]types.Resource{}
	for i, typ := range typeURLs {
		list := res[typ]
		slices.SortFunc(list, func(x, y types.Resource) int {
			return strings.Compare(cache.GetResourceName(x), cache.GetResourceName(y))
		})
		next[typ] = make(map[string]types.Resource, len(list))
		for _, r := range list {
			name := cache.GetResourceName(r)
			next[typ][name] = r
			if old, ok := b.httpPrev[typ][name]; !ok || !proto.Equal(old, r) {
				b.idx[i].set(name, r)
			}
		}
		for name := range b.httpPrev[typ] {
			if _, ok := next[typ][name]; !ok {
				b.idx[i].del(name)
			}
		}
		if len(list) > 0 {
			// The builder's own lists are kept between builds: the path is
			// added to a copy.
			out.Resources[typ] = append(slices.Clip(out.Resources[typ]), list...)
		}
	}
	b.httpPrev = next
	return nil
}
