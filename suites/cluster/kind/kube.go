package kind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/aether-mesh/aether/rigs/kind/manifests"
)

// fieldManager owns every field the e2e run applies.
const fieldManager = "aether-e2e"

// kube is the run's API client.
type kube struct {
	cfg    *rest.Config
	cs     kubernetes.Interface
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newKube(cfg *rest.Config) (*kube, error) {
	// The API server warns on every UDPRoute write that v1alpha2 is
	// deprecated: once is enough to read it.
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build a Kubernetes client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build a dynamic client: %w", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to build a discovery client: %w", err)
	}
	return &kube{cfg: cfg, cs: cs, dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// apply server-side-applies every document of a rendered stream, after
// decoding it strictly (manifests.Decode), so nothing reaches the API
// server that the offline tests would have refused.
func (k *kube) apply(ctx context.Context, stream []byte) error {
	docs, err := documents(stream)
	if err != nil {
		return err
	}
	for _, u := range docs {
		if err := k.applyOne(ctx, u); err != nil {
			return err
		}
	}
	return nil
}

// documents splits a stream into the objects to apply, refusing it unless
// every document decodes strictly.
func documents(stream []byte) ([]*unstructured.Unstructured, error) {
	if _, err := manifests.Decode(stream); err != nil {
		return nil, err
	}
	r := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(stream), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := r.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("failed to read a manifest: %w", err)
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

func (k *kube) applyOne(ctx context.Context, u *unstructured.Unstructured) error {
	gvk := u.GroupVersionKind()
	m, err := k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		// A kind whose CRD was applied a moment ago: discover again.
		k.mapper.Reset()
		m, err = k.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return fmt.Errorf("%s %s: no API for it: %w", gvk.Kind, u.GetName(), err)
	}
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = k.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = k.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	}
	force := true
	if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: fieldManager, Force: &force}); err != nil {
		return fmt.Errorf("failed to apply %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	if gvk.Kind == "CustomResourceDefinition" {
		return k.waitEstablished(ctx, u.GetName())
	}
	return nil
}

func (k *kube) waitEstablished(ctx context.Context, name string) error {
	crds := k.dyn.Resource(apiextensionsGVR)
	return poll(ctx, time.Minute, fmt.Sprintf("CRD %s established", name), func(ctx context.Context) (bool, error) {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				k.mapper.Reset()
				return true, nil
			}
		}
		return false, nil
	})
}

// installMesh applies the mesh install and waits until both DaemonSets run
// their current template on every node.
func (k *kube) installMesh(ctx context.Context, v manifests.Values) error {
	b, err := manifests.Mesh(v)
	if err != nil {
		return err
	}
	if err := k.apply(ctx, b); err != nil {
		return err
	}
	for _, ds := range []string{"aether-cni", "aether-node"} {
		if err := k.waitRolledOut(ctx, v.Namespace, ds); err != nil {
			return err
		}
	}
	return nil
}

func (k *kube) waitRolledOut(ctx context.Context, ns, name string) error {
	var last string
	err := poll(ctx, 3*time.Minute, "DaemonSet "+ns+"/"+name+" rolled out", func(ctx context.Context) (bool, error) {
		ds, err := k.cs.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = rolloutState(ds)
		st := ds.Status
		return st.ObservedGeneration >= ds.Generation && st.DesiredNumberScheduled > 0 &&
			st.UpdatedNumberScheduled == st.DesiredNumberScheduled && st.NumberReady == st.DesiredNumberScheduled, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %s)", err, last)
	}
	return nil
}

func rolloutState(ds *appsv1.DaemonSet) string {
	st := ds.Status
	return fmt.Sprintf("generation %d observed %d; desired %d, updated %d, ready %d", ds.Generation, st.ObservedGeneration,
		st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady)
}

// deleteNamespace deletes ns and waits until it is gone, so the next
// cluster of a suite can take the same names and ClusterIPs.
func (k *kube) deleteNamespace(ctx context.Context, ns string) error {
	err := k.cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to delete namespace %s: %w", ns, err)
	}
	return poll(ctx, 3*time.Minute, "namespace "+ns+" deleted", func(ctx context.Context) (bool, error) {
		_, err := k.cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// logs returns a pod container's whole log.
func (k *kube) logs(ctx context.Context, ns, pod, container string) ([]byte, error) {
	b, err := k.cs.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read the log of %s/%s (%s): %w", ns, pod, container, err)
	}
	return b, nil
}

func poll(ctx context.Context, timeout time.Duration, what string, f func(context.Context) (bool, error)) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, f)
	if err != nil {
		return fmt.Errorf("waiting for %s: %w", what, err)
	}
	return nil
}

var apiextensionsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
