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
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{PodIP: ip}}
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

// TestPodInformerWatchesOnlyItsNode: the agent of node-a lists and watches
// pods with the selector spec.nodeName=node-a, and so holds node-a's pods
// only, at the start and as pods come; the control, a Source without a
// node, holds both nodes' pods.
func TestPodInformerWatchesOnlyItsNode(t *testing.T) {
	for _, c := range []struct {
		node     string
		selector string
		want     []string
	}{
		{"node-a", "spec.nodeName=node-a", []string{"a-0@node-a", "a-1@node-a"}},
		{"", "", []string{"a-0@node-a", "a-1@node-a", "b-0@node-b", "b-1@node-b"}},
	} {
		t.Run(fmt.Sprintf("node %q", c.node), func(t *testing.T) {
			kc := k8sfake.NewClientset(podOn("a-0", "node-a", "10.244.1.2"), podOn("b-0", "node-b", "10.244.2.2"))
			rec := &selectorRecorder{}
			rec.install(kc)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			ch := (&Source{Kube: kc, Gateway: gwfake.NewSimpleClientset(), Node: c.node, Debounce: 10 * time.Millisecond}).Watch(ctx)
			next := func() *registry.State {
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
			next()
			for _, p := range []*corev1.Pod{podOn("b-1", "node-b", "10.244.2.3"), podOn("a-1", "node-a", "10.244.1.3")} {
				if _, err := kc.CoreV1().Pods("demo").Create(ctx, p, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			// The last pod created is on node-a, which every Source sees:
			// once it is there, every pod before it has been delivered too.
			var st *registry.State
			for st = next(); !slices.Contains(podNames(st), "a-1@node-a"); st = next() {
			}
			if got := podNames(st); !slices.Equal(got, c.want) {
				t.Fatalf("pods = %q, want %q", got, c.want)
			}
			calls := rec.calls()
			if len(calls) == 0 {
				t.Fatal("the pod informer neither listed nor watched")
			}
			for _, call := range calls {
				verb, sel, _ := strings.Cut(call, " ")
				if sel != c.selector {
					t.Fatalf("pod %s with field selector %q, want %q (calls: %q)", verb, sel, c.selector, calls)
				}
			}
		})
	}
}

// TestNewFromKubeconfigHonoursNode: a Source built from a kubeconfig asks
// the API server for node-a's pods only.
func TestNewFromKubeconfigHonoursNode(t *testing.T) {
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
	s, err := NewFromKubeconfig(kubeconfig, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s.Watch(ctx)
	select {
	case sel := <-podQueries:
		if sel != "spec.nodeName=node-a" {
			t.Fatalf("the pod informer asked for fieldSelector %q, want spec.nodeName=node-a", sel)
		}
	case <-ctx.Done():
		t.Fatal("the Source never asked the API server for pods")
	}
}
