package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	gwfake "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/fake"

	"github.com/aether-mesh/aether/mesh/registry"
)

func podOn(name, node, ip string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "sa-" + name}, Status: corev1.PodStatus{PodIP: ip}}
}

// selectorRecorder records the field selector of every pod list and watch,
// and applies it as the API server does: the fake clientset's tracker
// ignores field selectors.
type selectorRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (r *selectorRecorder) record(verb string, sel fields.Selector) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, verb+" "+sel.String())
}

func (r *selectorRecorder) calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.seen)
}

func matches(sel fields.Selector, o runtime.Object) bool {
	p, ok := o.(*corev1.Pod)
	return !ok || sel.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName})
}

func (r *selectorRecorder) install(kc *k8sfake.Clientset) {
	podsGVR := corev1.SchemeGroupVersion.WithResource("pods")
	kc.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sel := a.(k8stesting.ListAction).GetListRestrictions().Fields
		r.record("list", sel)
		o, err := kc.Tracker().List(podsGVR, corev1.SchemeGroupVersion.WithKind("Pod"), a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := o.(*corev1.PodList)
		list.Items = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !matches(sel, &p) })
		return true, list, nil
	})
	kc.PrependWatchReactor("pods", func(a k8stesting.Action) (bool, watch.Interface, error) {
		sel := a.(k8stesting.WatchAction).GetWatchRestrictions().Fields
		r.record("watch", sel)
		w, err := kc.Tracker().Watch(podsGVR, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		return true, watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return e, matches(sel, e.Object) }), nil
	})
}

func podNames(st *registry.State) []string {
	var out []string
	for _, p := range st.Pods {
		out = append(out, p.Name+"@"+p.Node)
	}
	return out
}

// TestAgentSeesRemoteEndpointsAccounts: an agent pins an HTTP service's
// peers by the service accounts of its endpoints, so its source must hold
// the pods of every node, with their accounts, at the start and as pods
// come. The reactors apply a field selector as the API server does (the
// fake tracker ignores it), so a source that asked for its own node's pods
// only would miss b-0 and b-1 here, as it did on a real cluster: node-a's
// agent then had no peer identity for node-b's backend and no outbound
// listener.
func TestAgentSeesRemoteEndpointsAccounts(t *testing.T) {
	kc := k8sfake.NewClientset(podOn("a-0", "node-a", "10.244.1.2"), podOn("b-0", "node-b", "10.244.2.2"))
	rec := &selectorRecorder{}
	rec.install(kc)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := (&Source{Kube: kc, Gateway: gwfake.NewSimpleClientset(), Debounce: 10 * time.Millisecond}).Watch(ctx)
	next := func() *registry.State { t.Helper(); return nextState(ctx, t, ch) }
	next()
	for _, p := range []*corev1.Pod{podOn("a-1", "node-a", "10.244.1.3"), podOn("b-1", "node-b", "10.244.2.3")} {
		if _, err := kc.CoreV1().Pods("demo").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"a-0@node-a", "a-1@node-a", "b-0@node-b", "b-1@node-b"}
	var st *registry.State
	for st = next(); !slices.Equal(podNames(st), want); st = next() {
		if ctx.Err() != nil {
			t.Fatalf("pods = %q, want %q", podNames(st), want)
		}
	}
	for _, p := range st.Pods {
		if p.ServiceAccount != "sa-"+p.Name {
			t.Errorf("pod %s: service account %q, want sa-%s", p.Name, p.ServiceAccount, p.Name)
		}
	}
	for _, call := range rec.calls() {
		if verb, sel, _ := strings.Cut(call, " "); sel != "" {
			t.Fatalf("pod %s with field selector %q: the agent must see every node's pods", verb, sel)
		}
	}
}

// TestTrimPodKeepsWhatTheRegistryReads: the cached pod, trimmed, converts
// to the same registry.Pod as the whole one, and holds no spec or status
// beyond what Pod reads.
func TestTrimPodKeepsWhatTheRegistryReads(t *testing.T) {
	full := podOn("a-0", "node-a", "10.244.1.2")
	full.Labels = map[string]string{"app": "a"}
	full.ResourceVersion = "42"
	full.Annotations = map[string]string{"big": strings.Repeat("x", 4096)}
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	full.Spec.Containers = []corev1.Container{{Name: "app", Image: "app:1", Env: []corev1.EnvVar{{Name: "K", Value: "V"}}}}
	full.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "ok"}}
	full.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: true}}
	o, err := trimPod(full)
	if err != nil {
		t.Fatal(err)
	}
	trimmed := o.(*corev1.Pod)
	want, ok1 := Pod(full)
	got, ok2 := Pod(trimmed)
	if !ok1 || !ok2 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("trimmed pod reads %+v (%v), the whole one %+v (%v)", got, ok2, want, ok1)
	}
	if !got.Ready {
		t.Fatal("the trimmed pod lost its Ready condition")
	}
	if trimmed.ResourceVersion != "42" {
		t.Fatalf("resourceVersion %q, want 42: the informer compares it on resync", trimmed.ResourceVersion)
	}
	if len(trimmed.Annotations)+len(trimmed.ManagedFields)+len(trimmed.Spec.Containers)+len(trimmed.Status.ContainerStatuses) != 0 {
		t.Fatalf("trimmed pod keeps what the registry never reads: %+v", trimmed)
	}
	full.Spec.HostNetwork = true
	if o, _ := trimPod(full); !o.(*corev1.Pod).Spec.HostNetwork {
		t.Fatal("the trimmed pod lost hostNetwork: the mesh's own pods would count as the node's")
	}
	if n, _ := trimPod(&corev1.Service{}); n == nil {
		t.Fatal("a non-pod object must pass through")
	}
}

// TestNewFromKubeconfigWatchesEveryPod: a Source built from a kubeconfig
// asks the API server for the pods of every node.
func TestNewFromKubeconfigWatchesEveryPod(t *testing.T) {
	podQueries := make(chan string, 16)
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/pods" {
			select {
			case podQueries <- r.URL.Query().Get("fieldSelector"):
			default:
			}
		}
		http.Error(w, "not served by this test", http.StatusServiceUnavailable)
	}))
	defer api.Close()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "`+api.URL+`"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := NewFromKubeconfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.Watch(ctx)
	select {
	case sel := <-podQueries:
		if sel != "" {
			t.Fatalf("the pod informer asked for fieldSelector %q, want every pod", sel)
		}
	case <-ctx.Done():
		t.Fatal("the Source never asked the API server for pods")
	}
}

// TestHostNetworkPodIsNotInTheMesh: on kind, the mesh's own DaemonSet pod
// (hostNetwork, account aether-system/aether-agent) sorted first among
// node-a's accounts, and the static-certificate control's proxies
// presented the agent's SVID instead of sa-a's. A hostNetwork pod shares
// the node's netns, nothing captures it, and it is not in the registry.
func TestHostNetworkPodIsNotInTheMesh(t *testing.T) {
	mesh := podOn("aether-node-x", "node-a", "172.18.0.3")
	mesh.Namespace, mesh.Spec.ServiceAccountName, mesh.Spec.HostNetwork = "aether-system", "aether-agent", true
	if p, ok := Pod(mesh); ok {
		t.Fatalf("hostNetwork pod read as %+v; want it left out", p)
	}
	app := podOn("a-0", "node-a", "10.244.1.2")
	if _, ok := Pod(app); !ok {
		t.Fatal("a pod on the pod network was left out")
	}
}

// nextState is the source's next State, failing the test on an error or
// when ctx ends first.
func nextState(ctx context.Context, t *testing.T, ch <-chan registry.Update) *registry.State {
	t.Helper()
	select {
	case u := <-ch:
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		return u.State
	case <-ctx.Done():
		t.Fatal("no State from the informer source")
	}
	return nil
}
