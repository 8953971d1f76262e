// Package kube is the registry's Kubernetes source: client-go informers for
// Nodes, Pods, Services, EndpointSlices and ServiceAccounts, and the
// gateway-api informer for v1alpha2 UDPRoutes. Every change rebuilds a whole
// registry.State from the listers, debounced, so the agent sees one
// consistent view rather than a stream of half-applied objects. It lives
// apart from package registry so that the file source and the agent's tests
// build without client-go.
package kube

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwclient "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"
	gwinformers "sigs.k8s.io/gateway-api/pkg/client/informers/externalversions"

	"github.com/aether-mesh/aether/mesh/registry"
)

// Source watches a cluster. Pods carry no netns path: that comes from the
// CNI's handoff (registry.WithHandoff), not from the API server.
//
// The pod informer watches every pod of the cluster, not only the node's:
// an agent pins each HTTP service's peers by the service accounts of its
// endpoints, and an endpoint on another node is known by its pod alone
// (an EndpointSlice names the pod, not its account). Each cached pod is
// trimmed to what the registry reads (trimPod), so a remote pod costs the
// agent a few hundred bytes.
type Source struct {
	Kube    kubernetes.Interface
	Gateway gwclient.Interface
	// Debounce coalesces bursts of events into one State; default 100ms.
	Debounce time.Duration
}

// NewFromKubeconfig builds a Source from a kubeconfig file.
func NewFromKubeconfig(path string) (*Source, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig %q: %w", path, err)
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build Kubernetes client from %q: %w", path, err)
	}
	gc, err := gwclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build gateway-api client from %q: %w", path, err)
	}
	return &Source{Kube: kc, Gateway: gc}, nil
}

type listers struct {
	nodes  cache.Indexer
	pods   cache.Indexer
	svcs   cache.Indexer
	slices cache.Indexer
	sas    cache.Indexer
	routes cache.Indexer
}

// Watch starts the informers, waits for their caches and sends a State after
// the initial sync and after every (debounced) change.
func (s *Source) Watch(ctx context.Context) <-chan registry.Update {
	ch := make(chan registry.Update, 1)
	debounce := s.Debounce
	if debounce <= 0 {
		debounce = 100 * time.Millisecond
	}
	go func() {
		defer close(ch)
		kf := informers.NewSharedInformerFactoryWithOptions(s.Kube, 0, informers.WithTransform(trimPod))
		gf := gwinformers.NewSharedInformerFactory(s.Gateway, 0)
		infs := []cache.SharedIndexInformer{
			kf.Core().V1().Nodes().Informer(),
			kf.Core().V1().Pods().Informer(),
			kf.Core().V1().Services().Informer(),
			kf.Discovery().V1().EndpointSlices().Informer(),
			kf.Core().V1().ServiceAccounts().Informer(),
			gf.Gateway().V1alpha2().UDPRoutes().Informer(),
		}
		l := listers{infs[0].GetIndexer(), infs[1].GetIndexer(), infs[2].GetIndexer(), infs[3].GetIndexer(), infs[4].GetIndexer(), infs[5].GetIndexer()}
		changed := make(chan struct{}, 1)
		poke := func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
		h := cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke() },
			UpdateFunc: func(any, any) { poke() },
			DeleteFunc: func(any) { poke() },
		}
		for _, inf := range infs {
			if _, err := inf.AddEventHandler(h); err != nil {
				send(ctx, ch, registry.Update{Err: fmt.Errorf("failed to add informer handler: %w", err)})
				return
			}
		}
		kf.Start(ctx.Done())
		gf.Start(ctx.Done())
		defer kf.Shutdown()
		defer gf.Shutdown()
		for i, inf := range infs {
			if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
				send(ctx, ch, registry.Update{Err: fmt.Errorf("informer %d did not sync: %w", i, ctx.Err())})
				return
			}
		}
		for {
			st, err := l.state()
			if !send(ctx, ch, registry.Update{State: st, Err: err}) {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			// Let a burst (a Deployment roll, a Service with its slices)
			// settle into one State.
			select {
			case <-ctx.Done():
				return
			case <-time.After(debounce):
			}
		}
	}()
	return ch
}

// trimPod keeps of a pod what Pod reads (name, namespace, UID, labels,
// node, service account, hostNetwork, IP, Ready condition) and drops the rest before
// the informer caches it; other objects pass unchanged.
func trimPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	t := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, Labels: p.Labels, ResourceVersion: p.ResourceVersion},
		Spec:       corev1.PodSpec{NodeName: p.Spec.NodeName, ServiceAccountName: p.Spec.ServiceAccountName, HostNetwork: p.Spec.HostNetwork},
		Status:     corev1.PodStatus{PodIP: p.Status.PodIP},
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			t.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return t, nil
}

func send(ctx context.Context, ch chan<- registry.Update, u registry.Update) bool {
	select {
	case ch <- u:
		return true
	case <-ctx.Done():
		return false
	}
}

// state converts the listers' content. Objects the mesh cannot use (a
// headless Service, a pod without an IP) are left out, not errors: the
// cluster is not ours to reject.
func (l listers) state() (*registry.State, error) {
	st := &registry.State{Endpoints: map[registry.Key][]registry.Endpoint{}}
	for _, o := range l.nodes.List() {
		st.Nodes = append(st.Nodes, registry.Node{Name: o.(*corev1.Node).Name})
	}
	for _, o := range l.sas.List() {
		sa := o.(*corev1.ServiceAccount)
		st.ServiceAccounts = append(st.ServiceAccounts, registry.ServiceAccount{Name: sa.Name, Namespace: sa.Namespace})
	}
	for _, o := range l.pods.List() {
		if p, ok := Pod(o.(*corev1.Pod)); ok {
			st.Pods = append(st.Pods, p)
		}
	}
	for _, o := range l.svcs.List() {
		if s, ok := Service(o.(*corev1.Service)); ok {
			st.Services = append(st.Services, s)
		}
	}
	for _, o := range l.slices.List() {
		es := o.(*discoveryv1.EndpointSlice)
		name := es.Labels[discoveryv1.LabelServiceName]
		if name == "" {
			continue
		}
		k := registry.Key{Namespace: es.Namespace, Name: name}
		st.Endpoints[k] = append(st.Endpoints[k], Endpoints(es)...)
	}
	for _, o := range l.routes.List() {
		st.UDPRoutes = append(st.UDPRoutes, UDPRoute(o.(*gwv1alpha2.UDPRoute)))
	}
	st.Sort()
	return st, nil
}

// Pod converts a pod; ok is false for a pod without an IP yet, and for a
// hostNetwork pod: it shares its node's netns, which nothing captures, so
// it is not in the mesh (the mesh's own DaemonSet pods are such pods, and
// their accounts must not count as the node's).
func Pod(p *corev1.Pod) (registry.Pod, bool) {
	if p.Spec.HostNetwork {
		return registry.Pod{}, false
	}
	ip, err := netip.ParseAddr(p.Status.PodIP)
	if err != nil {
		return registry.Pod{}, false
	}
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	return registry.Pod{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID), Node: p.Spec.NodeName, ServiceAccount: sa, IP: ip,
		Labels: p.Labels, Ready: ready}, true
}

// Service converts a ClusterIP service; ok is false for a headless one.
func Service(s *corev1.Service) (registry.Service, bool) {
	ip, err := netip.ParseAddr(s.Spec.ClusterIP)
	if err != nil {
		return registry.Service{}, false
	}
	out := registry.Service{Name: s.Name, Namespace: s.Namespace, ClusterIP: ip, Selector: s.Spec.Selector, Labels: s.Labels}
	for _, p := range s.Spec.Ports {
		proto := registry.ProtocolTCP
		switch p.Protocol {
		case corev1.ProtocolUDP:
			proto = registry.ProtocolUDP
		case corev1.ProtocolSCTP:
			continue
		}
		target := uint16(p.Port)
		// A named targetPort is resolved per pod by kube-proxy; the mesh
		// reads the number from the EndpointSlice port below when it can.
		if p.TargetPort.IntValue() > 0 {
			target = uint16(p.TargetPort.IntValue())
		}
		out.Ports = append(out.Ports, registry.ServicePort{Name: p.Name, Port: uint16(p.Port), TargetPort: target, Protocol: proto, AppProtocol: appProtocol(p.AppProtocol)})
	}
	return out, true
}

// Endpoints converts an EndpointSlice's endpoints. A nil ready condition
// means ready, as the EndpointSlice API defines it.
func Endpoints(es *discoveryv1.EndpointSlice) []registry.Endpoint {
	var out []registry.Endpoint
	for _, e := range es.Endpoints {
		if len(e.Addresses) == 0 {
			continue
		}
		ip, err := netip.ParseAddr(e.Addresses[0])
		if err != nil {
			continue
		}
		ep := registry.Endpoint{IP: ip, Ready: e.Conditions.Ready == nil || *e.Conditions.Ready, Weight: 1}
		if e.NodeName != nil {
			ep.Node = *e.NodeName
		}
		if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
			ep.Pod = e.TargetRef.Name
		}
		out = append(out, ep)
	}
	return out
}

// UDPRoute converts a gateway-api v1alpha2 UDPRoute, applying the API's
// defaults (parent group/kind Gateway, backend kind Service, namespaces of
// the route).
func UDPRoute(r *gwv1alpha2.UDPRoute) registry.UDPRoute {
	out := registry.UDPRoute{Name: r.Name, Namespace: r.Namespace}
	for _, p := range r.Spec.ParentRefs {
		ref := registry.ParentRef{Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: r.Namespace, Name: string(p.Name)}
		if p.Kind != nil {
			ref.Kind = string(*p.Kind)
		}
		switch {
		case p.Group != nil:
			ref.Group = string(*p.Group)
		case ref.Kind == "Service":
			ref.Group = "" // as the scenario reads it: a parent Service is core
		}
		if p.Namespace != nil {
			ref.Namespace = string(*p.Namespace)
		}
		if p.Port != nil {
			ref.Port = uint16(*p.Port)
		}
		out.ParentRefs = append(out.ParentRefs, ref)
	}
	for _, rule := range r.Spec.Rules {
		rr := registry.UDPRouteRule{}
		if rule.Name != nil {
			rr.Name = string(*rule.Name)
		}
		for _, b := range rule.BackendRefs {
			ref := registry.BackendRef{Kind: "Service", Namespace: r.Namespace, Name: string(b.Name), Weight: b.Weight}
			if b.Group != nil {
				ref.Group = string(*b.Group)
			}
			if b.Kind != nil {
				ref.Kind = string(*b.Kind)
			}
			if b.Namespace != nil {
				ref.Namespace = string(*b.Namespace)
			}
			if b.Port != nil {
				ref.Port = uint16(*b.Port)
			}
			rr.BackendRefs = append(rr.BackendRefs, ref)
		}
		out.Rules = append(out.Rules, rr)
	}
	return out
}

// appProtocol keeps the one appProtocol the mesh acts on; Kubernetes
// allows any, and the mesh treats the others as plain TCP.
func appProtocol(p *string) string {
	if p != nil && *p == registry.AppProtocolHTTP {
		return registry.AppProtocolHTTP
	}
	return ""
}
