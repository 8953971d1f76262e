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
//     unchanged is updated in place, so its live sessions survive.
package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
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

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/proxy/tcp"
	"github.com/aether-mesh/aether/mesh/proxy/udp"
	"github.com/aether-mesh/aether/mesh/proxy/xds"
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
	// Mark is SO_MARK on upstream egress; zero means
	// constants.CapturePassthroughFwMark.
	Mark uint32
	// Batch is the UDP batch size (1: no recvmmsg/sendmmsg).
	Batch int
	// UpstreamNetns is where upstream sockets are made; empty is the
	// proxy's own namespace.
	UpstreamNetns string
	Log           *slog.Logger
	Metrics       *metrics.Metrics
}

// Proxy is a running data plane.
type Proxy struct {
	opts   Options
	client *xds.Client

	mu sync.Mutex
	// active clusters route traffic; warming ones wait for their EDS.
	active  map[string]*cluster.Cluster
	warming map[string]*cluster.Cluster
	// published is a copy of active the data path reads without p.mu, so
	// a listener closing under p.mu never waits on a datagram that waits
	// on p.mu.
	published atomic.Pointer[map[string]*cluster.Cluster]
	// breakers is shared by every UDP listener: a cluster's circuit
	// breaker counts its sessions from all of them.
	breakers  *udp.Breakers
	udp       map[string]*udp.Listener
	tcp       map[string]*tcp.Listener
	specs     map[string]*listener.Spec
	lds       bool
	ldsTimer  *time.Timer
	listening chan struct{}
}

// New makes a proxy; Run connects it.
func New(o Options) *Proxy {
	if o.Mark == 0 {
		o.Mark = constants.CapturePassthroughFwMark
	}
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
		udp: map[string]*udp.Listener{}, tcp: map[string]*tcp.Listener{}, specs: map[string]*listener.Spec{},
		listening: make(chan struct{}), breakers: udp.NewBreakers(),
	}
	p.client = &xds.Client{
		Target: o.XDS, Node: &corev3.Node{Id: o.Node}, Handler: p, Log: o.Log,
		Observe: o.Metrics.XDS,
	}
	return p
}

// Metrics is the proxy's registry.
func (p *Proxy) Metrics() *metrics.Metrics { return p.opts.Metrics }

// ListenersRequested is closed once LDS has been subscribed.
func (p *Proxy) ListenersRequested() <-chan struct{} { return p.listening }

// Run serves until ctx ends, then closes every listener.
func (p *Proxy) Run(ctx context.Context) error {
	if err := p.client.Subscribe(resource.ClusterType); err != nil {
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
	for n, l := range p.udp {
		_ = l.Close()
		delete(p.udp, n)
	}
	for n, l := range p.tcp {
		_ = l.Close()
		delete(p.tcp, n)
	}
}

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
	if err := p.client.Subscribe(resource.ListenerType); err != nil {
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
	default:
		return fmt.Errorf("type %s is not supported by this data plane", typeURL)
	}
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
	p.mu.Lock()
	for _, s := range specs {
		old := p.active[s.Name]
		switch {
		case s.Kind == cluster.Static:
			p.active[s.Name] = cluster.New(s)
			delete(p.warming, s.Name)
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
	p.clustersChanged()
	if len(eds) == 0 {
		// Nothing to warm: an empty subscription would read as wildcard.
		p.requestListenersIfWarm()
		return nil
	}
	if err := p.client.Subscribe(resource.EndpointType, eds...); err != nil {
		return fmt.Errorf("failed to subscribe to endpoints %v: %w", eds, err)
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
			}
		}
	}
	p.publishLocked()
	p.mu.Unlock()
	p.clustersChanged()
	p.requestListenersIfWarm()
	return nil
}

func (p *Proxy) clustersChanged() {
	p.mu.Lock()
	ls := make([]*udp.Listener, 0, len(p.udp))
	for _, l := range p.udp {
		ls = append(ls, l)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.ClustersChanged()
	}
}

func (p *Proxy) onListeners(rs []*discoveryv3.Resource, removed []string) error {
	specs := make([]*listener.Spec, 0, len(rs))
	for _, r := range rs {
		var l listenerv3.Listener
		if err := r.GetResource().UnmarshalTo(&l); err != nil {
			return fmt.Errorf("Listener %q: not a %s: %w", r.GetName(), resource.ListenerType, err)
		}
		if l.GetName() != r.GetName() {
			return fmt.Errorf("Listener %q: resource is named %q", l.GetName(), r.GetName())
		}
		s, err := listener.FromProto(&l)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkSocketsLocked(specs, removed); err != nil {
		return err
	}
	// Open every new socket before touching running ones, so a failure
	// rolls back to exactly the previous configuration.
	type opened struct {
		spec *listener.Spec
		u    *udp.Listener
		t    *tcp.Listener
	}
	var fresh []opened
	rollback := func() {
		for _, o := range fresh {
			if o.u != nil {
				_ = o.u.Close()
			}
			if o.t != nil {
				_ = o.t.Close()
			}
		}
	}
	var replaced []string
	for _, s := range specs {
		if old := p.specs[s.Name]; old != nil && old.Socket == s.Socket {
			continue
		}
		if old := p.specs[s.Name]; old != nil {
			// The socket changes: the old one must go first, since both
			// may want the same address. Envoy drains it; a datagram
			// proxy has nothing to drain.
			p.closeLocked(s.Name)
			replaced = append(replaced, s.Name)
		}
		o := opened{spec: s}
		var err error
		if s.UDP != nil {
			o.u, err = udp.Listen(s, p, udp.Options{Mark: p.opts.Mark, Batch: p.opts.Batch, UpstreamNetns: p.opts.UpstreamNetns, Breakers: p.breakers, Log: p.opts.Log, Metrics: p.opts.Metrics})
		} else {
			o.t, err = tcp.Listen(s, p, tcp.Options{Mark: p.opts.Mark, UpstreamNetns: p.opts.UpstreamNetns, Log: p.opts.Log, Metrics: p.opts.Metrics})
		}
		if err != nil {
			rollback()
			if len(replaced) > 0 {
				err = fmt.Errorf("%w (listeners %v were closed to rebind and are down until a valid update)", err, replaced)
				for _, n := range replaced {
					delete(p.specs, n)
				}
			}
			return fmt.Errorf("Listener %q: %w", s.Name, err)
		}
		fresh = append(fresh, o)
	}
	for _, n := range removed {
		p.closeLocked(n)
		delete(p.specs, n)
	}
	for _, o := range fresh {
		if o.u != nil {
			p.udp[o.spec.Name] = o.u
		} else {
			p.tcp[o.spec.Name] = o.t
		}
		p.specs[o.spec.Name] = o.spec
	}
	for _, s := range specs {
		if u := p.udp[s.Name]; u != nil && p.specs[s.Name] != s {
			u.Update(s.UDP)
		}
		if t := p.tcp[s.Name]; t != nil && p.specs[s.Name] != s {
			t.Update(s.TCP)
		}
		p.specs[s.Name] = s
	}
	return nil
}

func (p *Proxy) closeLocked(name string) {
	if l := p.udp[name]; l != nil {
		_ = l.Close()
		delete(p.udp, name)
	}
	if l := p.tcp[name]; l != nil {
		_ = l.Close()
		delete(p.tcp, name)
	}
}

// checkSocketsLocked refuses two listeners on one socket, as the kernel
// (and Envoy) would with EADDRINUSE, before anything is opened.
func (p *Proxy) checkSocketsLocked(specs []*listener.Spec, removed []string) error {
	owner := map[listener.Socket]string{}
	updated := map[string]bool{}
	for _, s := range specs {
		updated[s.Name] = true
	}
	for n, s := range p.specs {
		if !updated[n] && !slices.Contains(removed, n) {
			owner[s.Socket] = n
		}
	}
	var errs []error
	for _, s := range specs {
		if other, ok := owner[s.Socket]; ok {
			errs = append(errs, fmt.Errorf("Listener %q.address: %s/%s in netns %q is already used by listener %q", s.Name, s.Socket.Protocol, s.Socket.Addr, s.Socket.NetnsPath, other))
			continue
		}
		owner[s.Socket] = s.Name
	}
	return errors.Join(errs...)
}

// UDPListener returns a running UDP listener by name (nil if none).
func (p *Proxy) UDPListener(name string) *udp.Listener {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.udp[name]
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
