package kind

import (
	"context"
	"os"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/kind/manifests"
)

const scenarioFile = "../../../fixtures/scenarios/udproute.yaml"

// What is applied is what was decoded: every rendered object, once, and
// nothing else (no empty document from a template's comment).
func TestDocumentsAreTheDecodedObjects(t *testing.T) {
	sc, err := readScenario(scenarioFile)
	if err != nil {
		t.Fatal(err)
	}
	mesh, err := manifests.Mesh(values(constants.CaptureTProxy))
	if err != nil {
		t.Fatal(err)
	}
	work, err := manifests.Workloads(values(constants.CaptureTProxy), sc, map[string]string{"node-a": "aether-e2e-udproute-worker"})
	if err != nil {
		t.Fatal(err)
	}
	for name, stream := range map[string][]byte{"mesh": mesh, "workloads": work} {
		objs, err := manifests.Decode(stream)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := documents(stream)
		if err != nil {
			t.Fatal(err)
		}
		if len(docs) != len(objs) {
			t.Fatalf("%s: %d documents to apply, %d decoded objects", name, len(docs), len(objs))
		}
		for i, d := range docs {
			if d.GetKind() != objs[i].GetObjectKind().GroupVersionKind().Kind || d.GetName() == "" {
				t.Errorf("%s document %d: %s %q, decoded %s", name, i, d.GetKind(), d.GetName(), objs[i].GetObjectKind().GroupVersionKind().Kind)
			}
		}
	}
	if _, err := documents([]byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {nodeNam: x}\n")); err == nil {
		t.Fatal("a stream that does not decode strictly was accepted for apply")
	}
}

// Update's prune deletes exactly the services and UDPRoutes the edited
// scenario dropped.
func TestPruneDeletesWhatTheEditDropped(t *testing.T) {
	b, err := os.ReadFile(scenarioFile)
	if err != nil {
		t.Fatal(err)
	}
	var prev registry.Scenario
	if err := yaml.UnmarshalStrict(b, &prev); err != nil {
		t.Fatal(err)
	}
	next, err := clone(prev)
	if err != nil {
		t.Fatal(err)
	}
	next.Services = slices.DeleteFunc(next.Services, func(s registry.ScenarioService) bool { return s.Name == "svc-20" })
	next.UDPRoutes = slices.DeleteFunc(next.UDPRoutes, func(r registry.ScenarioUDPRoute) bool { return r.Metadata.Name == "svc-20" })

	var svcs []runtime.Object
	var routes []runtime.Object
	for _, name := range []string{"svc-19", "svc-20"} {
		svcs = append(svcs, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "demo"}})
		r := &unstructured.Unstructured{}
		r.SetAPIVersion("gateway.networking.k8s.io/v1alpha2")
		r.SetKind("UDPRoute")
		r.SetName(name)
		r.SetNamespace("demo")
		routes = append(routes, r)
	}
	s := runtime.NewScheme()
	dyn := dynfake.NewSimpleDynamicClientWithCustomListKinds(s, map[schema.GroupVersionResource]string{udpRouteGVR: "UDPRouteList"}, routes...)
	c := &kindCluster{k: &kube{cs: fake.NewClientset(svcs...), dyn: dyn}}
	ctx := context.Background()
	if err := c.prune(ctx, prev, next); err != nil {
		t.Fatal(err)
	}
	left, err := c.k.cs.CoreV1().Services("demo").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != "svc-19" {
		t.Fatalf("services left: %v", left.Items)
	}
	lr, err := dyn.Resource(udpRouteGVR).Namespace("demo").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(lr.Items) != 1 || lr.Items[0].GetName() != "svc-19" {
		t.Fatalf("routes left: %v", lr.Items)
	}
	if err := c.prune(ctx, next, next); err != nil {
		t.Fatalf("an edit that drops nothing: %v", err)
	}
}

// TestUpdateWritesOnlyWhatChanged: a live change is one write. On kind,
// re-applying the whole scenario for a weight put a dozen seconds of
// writes between the suite's clock and the UDPRoute's, which the live
// change's time then counted.
func TestUpdateWritesOnlyWhatChanged(t *testing.T) {
	sc, err := readScenario(scenarioFile)
	if err != nil {
		t.Fatal(err)
	}
	c := &kindCluster{values: values(constants.CaptureTProxy), nodes: map[string]string{"node-a": "w1", "node-b": "w2"}}
	prev, err := c.documents(sc)
	if err != nil {
		t.Fatal(err)
	}
	if same := changedDocuments(prev, prev); len(same) != 0 {
		t.Fatalf("an unchanged scenario writes %d object(s)", len(same))
	}
	next, err := clone(sc)
	if err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	for i := range next.UDPRoutes {
		if next.UDPRoutes[i].Metadata.Name == "svc-w" {
			next.UDPRoutes[i].Spec.Rules[0].BackendRefs[0].Weight = &zero
		}
	}
	nextDocs, err := c.documents(next)
	if err != nil {
		t.Fatal(err)
	}
	got := changedDocuments(prev, nextDocs)
	if len(got) != 1 || got[0].GetKind() != "UDPRoute" || got[0].GetName() != "svc-w" {
		var names []string
		for _, u := range got {
			names = append(names, u.GetKind()+"/"+u.GetName())
		}
		t.Fatalf("a weight change writes %v, want UDPRoute/svc-w alone (of %d objects)", names, len(nextDocs))
	}
	next.Services = append(next.Services, registry.ScenarioService{Name: "svc-new", Namespace: "demo", ClusterIP: "10.96.2.10"})
	if nextDocs, err = c.documents(next); err != nil {
		t.Fatal(err)
	}
	got = changedDocuments(prev, nextDocs)
	var names []string
	for _, u := range got {
		names = append(names, u.GetKind()+"/"+u.GetName())
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"Service/svc-new", "UDPRoute/svc-w"}) {
		t.Fatalf("adding a service to the weight change writes %v, want Service/svc-new and UDPRoute/svc-w", names)
	}
}
