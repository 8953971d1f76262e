// Package proxy is aether's Go data plane: it consumes the agent's xDS
// (delta ADS) and runs what the resources describe. Clusters and their
// endpoints live in package cluster, listener resources compile in package
// listener, and the UDP and TCP data paths run in packages udp and tcp; this
// package applies updates to them with Envoy's ordering and warming rules.
//
//   - Every response is compiled in full before anything is applied; one
//     bad resource rejects the whole response (NACK), leaving the running
//     configuration untouched.
//   - CDS is requested first and LDS only once the first clusters are warm
//     (their EDS arrived) or the initial fetch timeout passed, as Envoy
//     initialises; a new EDS cluster serves nothing until its endpoints
//     arrive, and a cluster whose EDS name changes keeps serving the old
//     endpoints until the new ones arrive.
//   - A listener whose socket (protocol, address, netns, transparent) is
//     unchanged is updated in place, so its live sessions survive. A
//     changed socket is bound before the old one closes; only when the new
//     socket needs the very address a departing listener holds does that
//     one close first, and it is bound again if the update fails.
//   - A CDS response's EDS subscription is recorded even when its send
//     fails: that failure ends the stream, and the next stream requests it.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/ondemand"
	"github.com/aether-mesh/aether/mesh/proxy/passthrough"
	"github.com/aether-mesh/aether/mesh/proxy/secret"
	"github.com/aether-mesh/aether/mesh/proxy/tcp"
	"github.com/aether-mesh/aether/mesh/proxy/udp"
	"github.com/aether-mesh/aether/mesh/proxy/xds"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// InitialFetchTimeout is Envoy's default wait for a subscription's first
// response before initialisation proceeds without it.
const InitialFetchTimeout = 15 * time.Second

// DefaultBatch is the UDP batch size the binary uses; BenchmarkUDPProxy
// measures it against 1.
const DefaultBatch = 8

// Options configure a proxy.
type Options struct {
	// Node is the Envoy node id: the node's name.
	Node string
	// XDS is the agent's address: unix:///path or host:port.
	XDS string
	// Mark is SO_MARK on upstream sockets; zero, the default, sets none.
	// Upstream sockets are made in UpstreamNetns, the node's netns, where
	// no capture chain reads a mark and the node's own rules do (kube-proxy
	// drops 0xae7e): constants.PassthroughMark(constants.NodeNetns) is none.
	Mark uint32
	// Batch is the UDP batch size (1: no recvmmsg/sendmmsg).
	Batch int
	// UpstreamNetns is where upstream sockets are made; empty is the
	// proxy's own namespace.
	UpstreamNetns string
	Log           *slog.Logger
	Metrics       *metrics.Metrics
	// Restart is the proxy's part in a hot restart; nil is epoch 0 with
	// no parent.
	Restart *Restart
}

// Proxy is a running data plane.
type Proxy struct {
	opts   Options
	client *xds.Client
	// sub is client and listen is open; tests replace them.
	sub    subscriber
	listen func(*listener.Spec) (running, error)

	mu sync.Mutex
	// active clusters route traffic; warming ones wait for their EDS.
	active  map[string]*cluster.Cluster
	warming map[string]*cluster.Cluster
	// published is a copy of active the data path reads without p.mu, so
	// a listener closing under p.mu never waits on a datagram that waits
	// on p.mu.
	published atomic.Pointer[map[string]*cluster.Cluster]
	listeners map[string]running
	// breakers is shared by every UDP listener: a cluster's circuit
	// breaker counts its sessions from all of them.
	breakers  *udp.Breakers
	specs     map[string]*listener.Spec
	lds       bool
	ldsTimer  *time.Timer
	listening chan struct{}
	// onDemand is the on_demand filter's CDS state: told every cluster
	// that becomes active or goes, it releases the requests paused on it.
	onDemand *ondemand.Discovery

	// secrets are the SDS secrets; TLS handshakes read them, so an update
	// needs no listener change. pool and logs serve every HTTP listener.
	secrets *secret.Store
	pool    *h2.Pool
	logs    *h2.LogFiles

	// ids issue the QUIC listeners' connection IDs, tagged by epoch.
	ids *hotrestart.ConnectionIDs
	// ready is closed by the first listener update applied.
	ready     chan struct{}
	readyOnce sync.Once
	// drains end the windows of drains still running when the proxy
	// closes.
	drains []context.CancelFunc
}

// subscriber is the part of the xDS client updates use.
type subscriber interface {
	Subscribe(typeURL string, names ...string) error
	Want(typeURL string, names ...string) error
}

// New makes a proxy; Run connects it.
func New(o Options) *Proxy {
	if o.Batch < 1 {
		o.Batch = 1
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Metrics == nil {
		o.Metrics = metrics.New()
	}
	p := &Proxy{
		opts: o, active: map[string]*cluster.Cluster{}, warming: map[string]*cluster.Cluster{},
		listeners: map[string]running{}, specs: map[string]*listener.Spec{},
		listening: make(chan struct{}), breakers: udp.NewBreakers(),
		secrets: secret.NewStore(),
		logs:    &h2.LogFiles{},
		ready:   make(chan struct{}),
	}
	var epoch uint32
	if o.Restart != nil {
		epoch = o.Restart.Epoch
	}
	p.ids = hotrestart.NewConnectionIDs(epoch)
	p.logs.Err = func(err error) {
		reason := "other"
		if le, ok := errors.AsType[*h2.LogError](err); ok {
			reason = le.Reason()
		}
		o.Metrics.AccessLogError(reason)
		o.Log.Warn("access log write failed", "reason", reason, "err", err)
	}
	p.pool = &h2.Pool{Store: p.secrets, UpstreamNetns: o.UpstreamNetns, Mark: o.Mark, Metrics: o.Metrics}
	p.client = &xds.Client{
		Target: o.XDS, Node: &corev3.Node{Id: o.Node}, Handler: p, Log: o.Log,
		Observe: o.Metrics.XDS,
	}
	p.sub, p.listen = p.client, p.open
	p.onDemand = &ondemand.Discovery{Subscribe: p.subscribeOnDemand, Timeout: ondemand.DefaultTimeout}
	return p
}

// OnDemand is the proxy's on-demand CDS: a request whose cluster is
// missing awaits it there.
func (p *Proxy) OnDemand() *ondemand.Discovery { return p.onDemand }

// subscribeOnDemand adds name to the CDS subscription, which stays
// wildcard: the client sends resource_names_subscribe for name alone, and
// a fresh stream states the wildcard and every on-demand name.
func (p *Proxy) subscribeOnDemand(string) error {
	return p.sub.Subscribe(resource.ClusterType, append([]string{xds.Wildcard}, p.onDemand.Names()...)...)
}

// Metrics is the proxy's registry.
func (p *Proxy) Metrics() *metrics.Metrics { return p.opts.Metrics }

// ListenersRequested is closed once LDS has been subscribed.
func (p *Proxy) ListenersRequested() <-chan struct{} { return p.listening }

// Run serves until ctx ends, then closes every listener.
func (p *Proxy) Run(ctx context.Context) error {
	if err := p.sub.Subscribe(resource.ClusterType); err != nil {
		return err
	}
	// SDS by wildcard: the agent serves a node only its own accounts'
	// SVIDs and the bundle (ARCHITECTURE.md, "The mTLS HTTP/2 path", SDS).
	if err := p.sub.Subscribe(resource.SecretType); err != nil {
		return err
	}
	p.mu.Lock()
	p.ldsTimer = time.AfterFunc(InitialFetchTimeout, p.requestListeners)
	p.mu.Unlock()
	err := p.client.Run(ctx)
	p.Close()
	return err
}

// Close stops every listener.
func (p *Proxy) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ldsTimer != nil {
		p.ldsTimer.Stop()
	}
	for _, cancel := range p.drains {
		cancel()
	}
	for n, l := range p.listeners {
		l.close()
		delete(p.listeners, n)
	}
	p.pool.Close()
	_ = p.logs.Close()
}

// Secrets is the proxy's SDS store.
func (p *Proxy) Secrets() *secret.Store { return p.secrets }

// Active implements udp.Clusters and tcp.Clusters.
func (p *Proxy) Active(name string) *cluster.Cluster {
	if m := p.published.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

func (p *Proxy) publishLocked() {
	m := maps.Clone(p.active)
	p.published.Store(&m)
}

func (p *Proxy) requestListeners() {
	p.mu.Lock()
	if p.lds {
		p.mu.Unlock()
		return
	}
	p.lds = true
	close(p.listening)
	p.mu.Unlock()
	if err := p.sub.Subscribe(resource.ListenerType); err != nil {
		p.opts.Log.Warn("LDS subscription deferred to the next stream", "err", err)
	}
}

// OnUpdate implements xds.Handler.
func (p *Proxy) OnUpdate(typeURL string, rs []*discoveryv3.Resource, removed []string) error {
	switch typeURL {
	case resource.ClusterType:
		return p.onClusters(rs, removed)
	case resource.EndpointType:
		return p.onEndpoints(rs, removed)
	case resource.ListenerType:
		return p.onListeners(rs, removed)
	case resource.SecretType:
		return p.onSecrets(rs, removed)
	default:
		return fmt.Errorf("type %s is not supported by this data plane", typeURL)
	}
}

// onSecrets compiles every secret before any is applied, so a bad one
// leaves the held set as it was.
func (p *Proxy) onSecrets(rs []*discoveryv3.Resource, removed []string) error {
	put := make([]*secret.Secret, 0, len(rs))
	for _, r := range rs {
		var s tlsv3.Secret
		if err := r.GetResource().UnmarshalTo(&s); err != nil {
			return fmt.Errorf("Secret %q: not a %s: %w", r.GetName(), resource.SecretType, err)
		}
		if s.GetName() != r.GetName() {
			return fmt.Errorf("Secret %q: resource is named %q", s.GetName(), r.GetName())
		}
		c, err := secret.FromProto(&s)
		if err != nil {
			return err
		}
		put = append(put, c)
	}
	p.secrets.Apply(put, removed)
	return nil
}

func (p *Proxy) onClusters(rs []*discoveryv3.Resource, removed []string) error {
	specs := make([]*cluster.Spec, 0, len(rs))
	for _, r := range rs {
		var c clusterv3.Cluster
		if err := r.GetResource().UnmarshalTo(&c); err != nil {
			return fmt.Errorf("Cluster %q: not a %s: %w", r.GetName(), resource.ClusterType, err)
		}
		if c.GetName() != r.GetName() {
			return fmt.Errorf("Cluster %q: resource is named %q", c.GetName(), r.GetName())
		}
		s, err := cluster.FromProto(&c)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	var activated []string
	p.mu.Lock()
	for _, s := range specs {
		old := p.active[s.Name]
		switch {
		case s.Kind == cluster.Static:
			p.active[s.Name] = cluster.New(s)
			delete(p.warming, s.Name)
			activated = append(activated, s.Name)
		case old != nil && old.Spec.Kind == cluster.EDS && old.Spec.ServiceName == s.ServiceName:
			// Same endpoints: the update is live at once, with no warming.
			nc := cluster.New(s)
			nc.SetAssignment(&cluster.Assignment{Endpoints: old.Endpoints()})
			p.active[s.Name] = nc
			delete(p.warming, s.Name)
		default:
			p.warming[s.Name] = cluster.New(s)
		}
	}
	for _, n := range removed {
		delete(p.active, n)
		delete(p.warming, n)
	}
	eds := p.edsNamesLocked()
	p.publishLocked()
	p.mu.Unlock()
	p.onDemand.Update(activated, removed)
	p.clustersChanged()
	// Want, not Subscribe: when the last EDS cluster goes, its names are
	// unsubscribed (Subscribe would read none as wildcard). Were they kept,
	// a name that returns later would count as subscribed already, no
	// request would go out, and its cluster would warm for ever.
	if err := p.sub.Want(resource.EndpointType, eds...); err != nil {
		// The clusters stand: the response was valid, and the failed send
		// ended the stream, whose successor subscribes to these names.
		p.opts.Log.Warn("EDS subscription deferred to the next stream", "names", eds, "err", err)
	}
	p.requestListenersIfWarm()
	return nil
}

func (p *Proxy) edsNamesLocked() []string {
	var out []string
	for _, m := range []map[string]*cluster.Cluster{p.active, p.warming} {
		for _, c := range m {
			if c.Spec.Kind == cluster.EDS {
				out = append(out, c.Spec.ServiceName)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (p *Proxy) requestListenersIfWarm() {
	p.mu.Lock()
	warm := len(p.warming) == 0
	p.mu.Unlock()
	if warm {
		p.requestListeners()
	}
}

func (p *Proxy) onEndpoints(rs []*discoveryv3.Resource, removed []string) error {
	as := make([]*cluster.Assignment, 0, len(rs)+len(removed))
	for _, r := range rs {
		var la endpointv3.ClusterLoadAssignment
		if err := r.GetResource().UnmarshalTo(&la); err != nil {
			return fmt.Errorf("ClusterLoadAssignment %q: not a %s: %w", r.GetName(), resource.EndpointType, err)
		}
		if la.GetClusterName() != r.GetName() {
			return fmt.Errorf("ClusterLoadAssignment %q: resource is named %q", la.GetClusterName(), r.GetName())
		}
		a, err := cluster.AssignmentFromProto(&la)
		if err != nil {
			return err
		}
		as = append(as, a)
	}
	for _, n := range removed {
		// A removed assignment leaves its clusters without hosts.
		as = append(as, &cluster.Assignment{Name: n})
	}
	var activated []string
	p.mu.Lock()
	for _, a := range as {
		for _, c := range p.active {
			if c.Spec.Kind == cluster.EDS && c.Spec.ServiceName == a.Name {
				c.SetAssignment(a)
			}
		}
		for name, c := range p.warming {
			if c.Spec.ServiceName == a.Name {
				c.SetAssignment(a)
				p.active[name] = c
				delete(p.warming, name)
				activated = append(activated, name)
			}
		}
	}
	p.publishLocked()
	p.mu.Unlock()
	// Published first: a released request finds its cluster active.
	p.onDemand.Update(activated, nil)
	p.clustersChanged()
	p.requestListenersIfWarm()
	return nil
}

func (p *Proxy) clustersChanged() {
	p.mu.Lock()
	ls := make([]*udp.Listener, 0, len(p.listeners))
	for _, l := range p.listeners {
		if l.u != nil {
			ls = append(ls, l.u)
		}
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.ClustersChanged()
	}
}

func (p *Proxy) onListeners(rs []*discoveryv3.Resource, removed []string) error {
	specs, err := compileListeners(rs)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkSocketsLocked(specs, removed); err != nil {
		return err
	}
	pl := p.planLocked(specs, removed)
	opened, err := p.openLocked(pl)
	if err != nil {
		return err
	}
	p.commitLocked(pl, opened)
	p.readyOnce.Do(func() { close(p.ready) })
	return nil
}

func compileListeners(rs []*discoveryv3.Resource) ([]*listener.Spec, error) {
	specs := make([]*listener.Spec, 0, len(rs))
	for _, r := range rs {
		var l listenerv3.Listener
		if err := r.GetResource().UnmarshalTo(&l); err != nil {
			return nil, fmt.Errorf("Listener %q: not a %s: %w", r.GetName(), resource.ListenerType, err)
		}
		if l.GetName() != r.GetName() {
			return nil, fmt.Errorf("Listener %q: resource is named %q", l.GetName(), r.GetName())
		}
		s, err := listener.FromProto(&l)
		if err != nil {
			return nil, err
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// running is one listener's socket: a UDP, a TCP or an HTTP listener.
type running struct {
	u *udp.Listener
	t *tcp.Listener
	h *h2.Listener
	q *h2.QUICListener
	// pt and pq are an east-west gateway's TCP and UDP listeners.
	pt *passthrough.TCP
	pq *passthrough.QUIC
	// upstreams resolves a gateway chain's cluster to a host.
	upstreams passthrough.Upstreams
}

// passthroughOf is a spec's gateway settings that need a new forwarder
// (its kind, and a QUIC one's bounds); zero for any other listener.
func passthroughOf(s *listener.Spec) (kind int, q listener.PassthroughQUIC) {
	switch {
	case s.Passthrough == nil:
		return 0, q
	case s.Passthrough.QUIC != nil:
		return 2, *s.Passthrough.QUIC
	default:
		return 1, q
	}
}

// quicOf is a spec's QUIC server settings, zero for any other listener:
// a change of them needs a new server, so a new socket.
func quicOf(s *listener.Spec) listener.QUIC {
	if s.HTTP == nil || s.HTTP.QUIC == nil {
		return listener.QUIC{}
	}
	return *s.HTTP.QUIC
}

func (r running) close() {
	if r.u != nil {
		_ = r.u.Close()
	}
	if r.t != nil {
		_ = r.t.Close()
	}
	if r.h != nil {
		_ = r.h.Close()
	}
	if r.q != nil {
		_ = r.q.Close()
	}
	if r.pt != nil {
		_ = r.pt.Close()
	}
	if r.pq != nil {
		_ = r.pq.Close()
	}
}

// update swaps a kept socket's configuration. A listener whose kind
// changed (TCP chains to HTTP chains on one address) was given a new
// socket by planLocked, so the kinds here always agree.
func (r running) update(s *listener.Spec) {
	if r.u != nil {
		r.u.Update(s.UDP)
	}
	if r.t != nil {
		r.t.Update(s.TCP)
	}
	if r.h != nil {
		r.h.Update(s.HTTP)
	}
	if r.q != nil {
		r.q.Update(s.HTTP)
	}
	if r.pt != nil {
		r.pt.SetRoutes(s.Passthrough.Routes, r.upstreams)
	}
	if r.pq != nil {
		r.pq.SetRoutes(s.Passthrough.Routes, r.upstreams)
	}
}

func (p *Proxy) open(s *listener.Spec) (running, error) {
	if s.Passthrough != nil {
		// Not inherited across a hot restart: the gateway's sockets are
		// bound anew (ARCHITECTURE.md, "The east-west gateway's
		// passthrough (18009)").
		return p.openPassthrough(s)
	}
	from, err := p.inherit(s)
	if err != nil {
		return running{}, err
	}
	if s.UDP != nil {
		u, err := udp.Listen(s, p, udp.Options{Mark: p.opts.Mark, Batch: p.opts.Batch, UpstreamNetns: p.opts.UpstreamNetns, Breakers: p.breakers, Log: p.opts.Log, Metrics: p.opts.Metrics, From: from})
		return running{u: u}, err
	}
	ho := h2.Options{Store: p.secrets, Pool: p.pool, Logs: p.logs, Log: p.opts.Log, Metrics: p.opts.Metrics, OnDemand: p.onDemand, From: from}
	if s.HTTP != nil && s.HTTP.QUIC != nil {
		ho.QUIC = p.quicRestart(s, from != nil)
		q, err := h2.ListenQUIC(s, p, ho)
		return running{q: q}, err
	}
	if s.HTTP != nil {
		h, err := h2.Listen(s, p, ho)
		return running{h: h}, err
	}
	t, err := tcp.Listen(s, p, tcp.Options{Mark: p.opts.Mark, UpstreamNetns: p.opts.UpstreamNetns, Log: p.opts.Log, Metrics: p.opts.Metrics, From: from})
	return running{t: t}, err
}

func samePassthrough(a, b *listener.Spec) bool {
	ka, qa := passthroughOf(a)
	kb, qb := passthroughOf(b)
	return ka == kb && qa == qb
}

// clusterUpstreams resolves a gateway chain's cluster to one of its hosts,
// picked as tcp_proxy and udp_proxy pick (the cluster's load balancer); a
// cluster not active (absent, or warming) or without a host has none.
type clusterUpstreams struct{ p *Proxy }

func (u clusterUpstreams) Upstream(name string) (netip.AddrPort, bool) {
	c := u.p.Active(name)
	if c == nil {
		return netip.AddrPort{}, false
	}
	a, err := c.Pick()
	return a, err == nil
}

// ConnectTimeout is the cluster's connect_timeout, which the TCP
// passthrough dials under.
func (u clusterUpstreams) ConnectTimeout(name string) (time.Duration, bool) {
	c := u.p.Active(name)
	if c == nil {
		return 0, false
	}
	return c.Spec.ConnectTimeout, true
}

// openPassthrough binds a gateway listener and starts its forwarder. Its
// upstream sockets are made as every other upstream socket is: in
// UpstreamNetns, with Mark.
func (p *Proxy) openPassthrough(s *listener.Spec) (running, error) {
	up := clusterUpstreams{p}
	pt := s.Passthrough
	if pt.QUIC == nil {
		ln, err := transparent.ListenTCP(s.Socket.NetnsPath, s.Socket.Addr, transparent.Options{Transparent: s.Socket.Transparent, ReuseAddr: true})
		if err != nil {
			return running{}, err
		}
		t := passthrough.NewTCP(ln, pt.Routes, up, passthrough.TCPOptions{
			Name: s.Name, InspectTimeout: pt.InspectTimeout, Metrics: p.opts.Metrics.Passthrough, Log: p.opts.Log,
			Dial: func(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
				return transparent.DialTCP(ctx, p.opts.UpstreamNetns, addr, transparent.Options{Mark: p.opts.Mark})
			},
		})
		t.Serve()
		return running{pt: t, upstreams: up}, nil
	}
	c, err := transparent.ListenUDP(s.Socket.NetnsPath, s.Socket.Addr, transparent.Options{Transparent: s.Socket.Transparent})
	if err != nil {
		return running{}, err
	}
	q := passthrough.NewQUIC(c.UDPConn, pt.Routes, up, passthrough.QUICOptions{
		Name: s.Name, MaxFlows: pt.QUIC.MaxFlows, MaxPendingFlows: pt.QUIC.MaxPendingFlows, MaxPendingBytes: pt.QUIC.MaxPendingBytes,
		IdleTimeout: pt.QUIC.IdleTimeout, PendingTimeout: pt.QUIC.ClientHelloTimeout,
		Metrics: p.opts.Metrics.Passthrough, Log: p.opts.Log,
		DialUpstream: func(addr netip.AddrPort) (*net.UDPConn, error) {
			return transparent.DialUDP(p.opts.UpstreamNetns, netip.AddrPort{}, addr, transparent.Options{Mark: p.opts.Mark})
		},
	})
	go func() {
		if err := q.Serve(); err != nil {
			p.opts.Log.Warn("quic passthrough stopped", "listener", s.Name, "err", err)
		}
	}()
	return running{pq: q, upstreams: up}, nil
}

// bindKey is what the kernel binds once: a second socket on it fails with
// EADDRINUSE until the first is closed. Port 0 (ephemeral) binds anywhere.
type bindKey struct {
	proto corev3.SocketAddress_Protocol
	addr  netip.AddrPort
	netns string
}

func bindOf(s *listener.Spec) (bindKey, bool) {
	return bindKey{s.Socket.Protocol, s.Socket.Addr, s.Socket.NetnsPath}, s.Socket.Addr.Port() != 0
}

// listenerPlan is what one LDS response does to the running sockets.
type listenerPlan struct {
	specs []*listener.Spec
	// keep: same socket, updated in place so live sessions survive.
	keep []*listener.Spec
	// fresh: a new socket on an address no departing listener holds; it
	// is bound before anything running is touched.
	fresh []*listener.Spec
	// handover: a new socket on the address of a listener this response
	// ends (its holder), which must close first.
	handover []handover
	// gone: running listeners this response replaces or removes.
	gone []string
	// removed: names this response deletes.
	removed []string
}

type handover struct {
	spec   *listener.Spec
	holder string
}

func (p *Proxy) planLocked(specs []*listener.Spec, removed []string) listenerPlan {
	pl := listenerPlan{specs: specs}
	updated := map[string]bool{}
	var open []*listener.Spec
	for _, s := range specs {
		updated[s.Name] = true
		switch old := p.specs[s.Name]; {
		case old != nil && old.Socket == s.Socket && (old.HTTP == nil) == (s.HTTP == nil) && quicOf(old) == quicOf(s) && samePassthrough(old, s):
			pl.keep = append(pl.keep, s)
		case old != nil:
			pl.gone = append(pl.gone, s.Name)
			open = append(open, s)
		default:
			open = append(open, s)
		}
	}
	for _, n := range removed {
		if !updated[n] && p.specs[n] != nil {
			pl.gone = append(pl.gone, n)
			pl.removed = append(pl.removed, n)
		}
	}
	held := map[bindKey]string{}
	for _, n := range pl.gone {
		if k, ok := bindOf(p.specs[n]); ok {
			held[k] = n
		}
	}
	for _, s := range open {
		if k, ok := bindOf(s); ok && held[k] != "" {
			pl.handover = append(pl.handover, handover{spec: s, holder: held[k]})
			continue
		}
		pl.fresh = append(pl.fresh, s)
	}
	return pl
}

// openLocked binds every socket the plan needs. Fresh ones come first and
// disturb nothing; a handover closes its holder just before binding. On
// any failure everything opened is closed and every closed holder is
// bound again from its running spec, so the previous configuration runs
// on (a rebound UDP holder has lost its sessions).
func (p *Proxy) openLocked(pl listenerPlan) (map[string]running, error) {
	opened := map[string]running{}
	var closed []string
	fail := func(name string, err error) (map[string]running, error) {
		for _, r := range opened {
			r.close()
		}
		err = fmt.Errorf("Listener %q.address: %w", name, err)
		return nil, errors.Join(err, p.restoreLocked(closed))
	}
	for _, s := range pl.fresh {
		r, err := p.listen(s)
		if err != nil {
			return fail(s.Name, err)
		}
		opened[s.Name] = r
	}
	for _, h := range pl.handover {
		p.listeners[h.holder].close()
		closed = append(closed, h.holder)
		r, err := p.listen(h.spec)
		if err != nil {
			return fail(h.spec.Name, err)
		}
		opened[h.spec.Name] = r
	}
	return opened, nil
}

// restoreLocked binds closed listeners again from their running specs. One
// that cannot be bound is down until a valid update, and the error says so.
func (p *Proxy) restoreLocked(closed []string) error {
	var errs []error
	for _, n := range closed {
		r, err := p.listen(p.specs[n])
		if err != nil {
			delete(p.listeners, n)
			delete(p.specs, n)
			errs = append(errs, fmt.Errorf("listener %q was closed to free its address and could not be bound again; it is down until a valid update: %w", n, err))
			continue
		}
		p.listeners[n] = r
	}
	return errors.Join(errs...)
}

// commitLocked swaps the opened sockets in, closes the ones they replace
// (after the new ones are bound) and updates the kept ones in place.
func (p *Proxy) commitLocked(pl listenerPlan, opened map[string]running) {
	handedOver := map[string]bool{}
	for _, h := range pl.handover {
		handedOver[h.holder] = true
	}
	for _, n := range pl.gone {
		if !handedOver[n] {
			p.listeners[n].close()
		}
		delete(p.listeners, n)
	}
	for _, n := range pl.removed {
		delete(p.specs, n)
	}
	for n, r := range opened {
		p.listeners[n] = r
	}
	for _, s := range pl.keep {
		p.listeners[s.Name].update(s)
	}
	for _, s := range pl.specs {
		p.specs[s.Name] = s
	}
}

// checkSocketsLocked refuses two listeners on one address, as the kernel
// (and Envoy) would with EADDRINUSE, before anything is opened.
func (p *Proxy) checkSocketsLocked(specs []*listener.Spec, removed []string) error {
	owner := map[bindKey]string{}
	updated := map[string]bool{}
	for _, s := range specs {
		updated[s.Name] = true
	}
	for n, s := range p.specs {
		if k, ok := bindOf(s); ok && !updated[n] && !slices.Contains(removed, n) {
			owner[k] = n
		}
	}
	var errs []error
	for _, s := range specs {
		k, ok := bindOf(s)
		if !ok {
			continue
		}
		if other, taken := owner[k]; taken {
			errs = append(errs, fmt.Errorf("Listener %q.address: %s/%s in netns %q is already used by listener %q", s.Name, s.Socket.Protocol, s.Socket.Addr, s.Socket.NetnsPath, other))
			continue
		}
		owner[k] = s.Name
	}
	return errors.Join(errs...)
}

// UDPListener returns a running UDP listener by name (nil if none).
func (p *Proxy) UDPListener(name string) *udp.Listener {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listeners[name].u
}

// Listeners lists the running listeners' names.
func (p *Proxy) Listeners() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for n := range p.specs {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
