package manifests

import (
	"context"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	gwv1alpha2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/registry/kube"
)

// The objects the manifests create, served by fake API clients, are what
// the agent's Kubernetes source reads: every service with its ClusterIP and
// ports, every UDPRoute with its backends and weights, every service
// account, and the node's pods with their service accounts. The expected
// view is the registry's own reading of the scenario file, a different
// path from the Kubernetes translation under test.
//
// Every scenario a suite runs on kind is read, each with all its nodes'
// pods on one cluster node (the node the source watches): the mTLS
// scenario's Service must keep appProtocol http, which is what puts its
// port on the mTLS path.
func TestKubernetesSourceReadsTheManifestsObjects(t *testing.T) {
	for _, file := range []string{"udproute.yaml", "mtls.yaml"} {
		t.Run(file, func(t *testing.T) { checkSourceReads(t, file) })
	}
}

func checkSourceReads(t *testing.T, file string) {
	const clusterNode = "aether-e2e-worker"
	raw, err := os.ReadFile("../../../fixtures/scenarios/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var sc registry.Scenario
	if err := yaml.UnmarshalStrict(raw, &sc); err != nil {
		t.Fatal(err)
	}
	onOneNode := map[string]string{}
	for _, n := range sc.Nodes {
		onOneNode[n.Name] = clusterNode
	}
	b, err := Workloads(testValues(), sc, onOneNode)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	var kubeObjs, gwObjs []runtime.Object
	for _, o := range objs {
		switch x := o.(type) {
		case *gwv1alpha2.UDPRoute:
			gwObjs = append(gwObjs, x)
		case *corev1.Pod:
			// The API server, not the manifest, fills a pod's status.
			x.Status.PodIP = podIP(t, sc, x.Namespace, x.Name)
			x.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			kubeObjs = append(kubeObjs, x)
		default:
			kubeObjs = append(kubeObjs, o)
		}
	}
	kubeObjs = append(kubeObjs, &corev1.Node{})
	kubeObjs[len(kubeObjs)-1].(*corev1.Node).Name = clusterNode

	want, err := registry.ParseScenario(file, raw)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	src := &kube.Source{Kube: k8sfake.NewClientset(kubeObjs...), Gateway: gwfake.NewSimpleClientset(gwObjs...), Debounce: 10 * time.Millisecond}
	var got *registry.State
	select {
	case u := <-src.Watch(ctx):
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		got = u.State
	case <-ctx.Done():
		t.Fatal("the Kubernetes source sent no State")
	}

	services := map[registry.Key]registry.Service{}
	for _, s := range got.Services {
		services[s.Key()] = s
	}
	for _, w := range want.Services {
		g, ok := services[w.Key()]
		if !ok {
			t.Errorf("service %s: not read from the manifests' objects", w.Key())
			continue
		}
		if g.ClusterIP != w.ClusterIP || len(g.Ports) != len(w.Ports) {
			t.Errorf("service %s: ClusterIP %s, %d port(s); the scenario says %s, %d", w.Key(), g.ClusterIP, len(g.Ports), w.ClusterIP, len(w.Ports))
			continue
		}
		for i := range w.Ports {
			if g.Ports[i].Port != w.Ports[i].Port || g.Ports[i].TargetPort != w.Ports[i].TargetPort || g.Ports[i].Protocol != w.Ports[i].Protocol ||
				g.Ports[i].AppProtocol != w.Ports[i].AppProtocol {
				t.Errorf("service %s port %d: %+v, the scenario says %+v", w.Key(), i, g.Ports[i], w.Ports[i])
			}
		}
	}
	routes := map[registry.Key]registry.UDPRoute{}
	for _, r := range got.UDPRoutes {
		routes[r.Key()] = r
	}
	for _, w := range want.UDPRoutes {
		g, ok := routes[w.Key()]
		if !ok || len(g.Rules) != len(w.Rules) {
			t.Errorf("UDPRoute %s: read %+v, the scenario says %+v", w.Key(), g, w)
			continue
		}
		for i, rule := range w.Rules {
			if len(g.Rules[i].BackendRefs) != len(rule.BackendRefs) {
				t.Errorf("UDPRoute %s rule %d: %d backends, want %d", w.Key(), i, len(g.Rules[i].BackendRefs), len(rule.BackendRefs))
				continue
			}
			for j, br := range rule.BackendRefs {
				gb := g.Rules[i].BackendRefs[j]
				if gb.Name != br.Name || gb.Port != br.Port || weight(gb.Weight) != weight(br.Weight) {
					t.Errorf("UDPRoute %s backend %d/%d: %s:%d weight %d, want %s:%d weight %d", w.Key(), i, j, gb.Name, gb.Port, weight(gb.Weight), br.Name, br.Port, weight(br.Weight))
				}
			}
		}
	}
	if len(got.ServiceAccounts) != len(want.ServiceAccounts) {
		t.Errorf("%d service accounts read, the scenario has %d", len(got.ServiceAccounts), len(want.ServiceAccounts))
	}
	pods := map[registry.Key]registry.Pod{}
	for _, p := range got.Pods {
		pods[p.Key()] = p
	}
	for _, w := range want.Pods {
		g, ok := pods[w.Key()]
		if !ok || g.ServiceAccount != w.ServiceAccount || g.IP != w.IP || g.Node != clusterNode || !g.Ready {
			t.Errorf("pod %s: read %+v; the scenario says SA %q, IP %s, on %s", w.Key(), g, w.ServiceAccount, w.IP, clusterNode)
		}
	}
	if len(got.Pods) != len(want.Pods) {
		t.Errorf("%d pods read, the scenario has %d", len(got.Pods), len(want.Pods))
	}
}

func podIP(t *testing.T, sc registry.Scenario, ns, name string) string {
	t.Helper()
	for _, p := range sc.Pods {
		pns := p.Namespace
		if pns == "" {
			pns = "default"
		}
		if pns == ns && p.Name == name {
			return p.IP
		}
	}
	t.Fatalf("pod %s/%s is not in the scenario", ns, name)
	return ""
}

func weight(w *int32) int32 {
	if w == nil {
		return 1
	}
	return *w
}
