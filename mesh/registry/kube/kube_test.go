package kube

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/aether-mesh/aether/mesh/registry"
)

func ptr[T any](v T) *T { return &v }

// TestInformerSource drives the real informer code with client-go's and
// gateway-api's fake clientsets: the initial State carries every kind, and an
// EndpointSlice added later arrives as a new State.
func TestInformerSource(t *testing.T) {
	ns := "demo"
	kc := k8sfake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "client", Namespace: ns}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "client-0", Namespace: ns, UID: "5e1f-uid"},
			Spec:   corev1.PodSpec{NodeName: "node-a", ServiceAccountName: "client"},
			Status: corev1.PodStatus{PodIP: "10.244.1.10", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "svc-a", Namespace: ns}, Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: "dgram", Port: 5000, TargetPort: intstr.FromInt32(5001), Protocol: corev1.ProtocolUDP}}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "headless", Namespace: ns}, Spec: corev1.ServiceSpec{ClusterIP: "None"}},
	)
	gc := gwfake.NewSimpleClientset(&gwv1alpha2.UDPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "svc-a", Namespace: ns},
		Spec: gwv1alpha2.UDPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Kind: ptr(gwv1.Kind("Service")), Name: "svc-a"}}},
			Rules: []gwv1alpha2.UDPRouteRule{{BackendRefs: []gwv1.BackendRef{
				{BackendObjectReference: gwv1.BackendObjectReference{Name: "svc-a", Port: ptr(gwv1.PortNumber(5000))}, Weight: ptr(int32(0))}}}},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := (&Source{Kube: kc, Gateway: gc, Debounce: 10 * time.Millisecond}).Watch(ctx)
	next := func() *registry.State { t.Helper(); return nextState(ctx, t, ch) }

	st := next()
	if len(st.Nodes) != 1 || len(st.ServiceAccounts) != 1 || len(st.Pods) != 1 || len(st.Services) != 1 || len(st.UDPRoutes) != 1 {
		t.Fatalf("initial State = %+v, want 1 node, SA, pod, service (headless left out), route", st)
	}
	p := st.Pods[0]
	if p.NetnsPath != "" || p.UID != "5e1f-uid" || !p.Ready || p.ServiceAccount != "client" || p.IP.String() != "10.244.1.10" {
		t.Fatalf("pod = %+v", p)
	}
	if sp, ok := st.Services[0].FirstPort(registry.ProtocolUDP); !ok || sp.TargetPort != 5001 {
		t.Fatalf("service ports = %+v, want UDP 5000->5001", st.Services[0].Ports)
	}
	r := st.UDPRoutes[0]
	if r.ParentRefs[0].Kind != "Service" || r.ParentRefs[0].Group != "" || *r.Rules[0].BackendRefs[0].Weight != 0 {
		t.Fatalf("route = %+v, want a core Service parent and the weight-0 (drain) backend kept", r)
	}

	_, err := kc.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "svc-a-x", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "svc-a"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.244.2.10"}, NodeName: ptr("node-b"), TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "a-0"}},
			{Addresses: []string{"10.244.2.11"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr(false)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The source may send a State for events still settling from the
	// initial sync before the one that carries the slice; the slice must
	// arrive in a later State.
	k := registry.Key{Namespace: ns, Name: "svc-a"}
	for st = next(); len(st.Endpoints[k]) == 0; st = next() {
	}
	if eps := st.Endpoints[k]; len(eps) != 2 || len(st.ReadyEndpoints(k)) != 1 || st.ReadyEndpoints(k)[0].Pod != "a-0" {
		t.Fatalf("endpoints after the slice = %+v, want a-0 ready and one unready", eps)
	}
}

// TestServiceKeepsLabels: the waypoint label is read from the service's
// labels, so the conversion keeps them.
func TestServiceKeepsLabels(t *testing.T) {
	s, ok := Service(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: "demo", Labels: map[string]string{"istio.io/use-waypoint": "wp"}},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.10", Ports: []corev1.ServicePort{{Port: 80}}}})
	if !ok || s.Labels["istio.io/use-waypoint"] != "wp" {
		t.Fatalf("Service = %+v (ok %v), want its labels kept", s, ok)
	}
}
