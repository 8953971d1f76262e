package kind

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/kind/manifests"
	"github.com/aether-mesh/aether/suites/cluster"
)

// Provider brings a scenario up on the kind cluster Run set up: the mesh
// re-applied in the wanted capture mode, then the scenario's workloads.
type Provider struct {
	k       *kube
	workers []string
	// nodes are the kind nodes by name, for a command on the node itself
	// (a process's CPU time).
	nodes map[string]nodes.Node
	// binaries is the sha256 of each mesh binary baked into the images.
	binaries map[string]string
	// forceCapture, when set, replaces every case's capture mode.
	forceCapture constants.CaptureMode
}

func (*Provider) Name() string { return cluster.Kind }

// Binaries is the hashes of the mesh binaries the images were built from.
func (p *Provider) Binaries() (map[string]string, error) { return maps.Clone(p.binaries), nil }

// Up installs the mesh in cfg.Mode and the scenario's workloads, and waits
// until every backend has said it is ready and every node's proxy serves a
// capture listener for each of its pods.
func (p *Provider) Up(ctx context.Context, cfg cluster.Config) (cluster.Cluster, error) {
	sc, err := readScenario(cfg.Scenario)
	if err != nil {
		return nil, err
	}
	placed := map[string]string{}
	for i, n := range sc.Nodes {
		if i >= len(p.workers) {
			return nil, fmt.Errorf("scenario %q has %d nodes; the kind cluster has %d workers", cfg.Scenario, len(sc.Nodes), len(p.workers))
		}
		placed[n.Name] = p.workers[i]
	}
	mode := cfg.Mode
	if p.forceCapture != "" {
		mode = p.forceCapture
	}
	v := values(mode)
	if v.MTLS, err = mtlsValues(cfg.MTLS); err != nil {
		return nil, err
	}
	if err := p.k.installMesh(ctx, v); err != nil {
		return nil, fmt.Errorf("failed to install the mesh in %s mode: %w", mode, err)
	}
	c := &kindCluster{k: p.k, values: v, nodes: placed, kindNodes: p.nodes, scenario: sc}
	for _, sp := range sc.Pods {
		c.pods = append(c.pods, cluster.Pod{Namespace: orDefault(sp.Namespace), Name: sp.Name, Node: sp.Node})
	}
	if err := c.apply(ctx, sc); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	if err := c.waitReady(ctx); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

func readScenario(path string) (registry.Scenario, error) {
	var sc registry.Scenario
	b, err := os.ReadFile(path)
	if err != nil {
		return sc, fmt.Errorf("failed to read scenario %q: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(b, &sc); err != nil {
		return sc, fmt.Errorf("failed to parse scenario %q: %w", path, err)
	}
	return sc, nil
}

func orDefault(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}

// kindCluster is a scenario running on kind.
type kindCluster struct {
	k      *kube
	values manifests.Values
	// nodes maps scenario node names to kind nodes.
	nodes     map[string]string
	kindNodes map[string]nodes.Node
	pods      []cluster.Pod

	mu       sync.Mutex
	scenario registry.Scenario
	// restarts is each mesh container's restart count at Up.
	restarts map[string]int32
}

func (c *kindCluster) apply(ctx context.Context, sc registry.Scenario) error {
	b, err := manifests.Workloads(c.values, sc, c.nodes)
	if err != nil {
		return err
	}
	return c.k.apply(ctx, b)
}

func (c *kindCluster) waitReady(ctx context.Context) error {
	for _, p := range c.pods {
		err := poll(ctx, 3*time.Minute, "pod "+p.Namespace+"/"+p.Name+"'s backend ready", func(ctx context.Context) (bool, error) {
			recs, err := c.records(ctx, p)
			return err == nil && len(recs) > 0 && recs[0].Event == "ready", nil
		})
		if err != nil {
			return err
		}
	}
	for scNode := range c.nodes {
		if err := c.waitListeners(ctx, scNode); err != nil {
			return err
		}
	}
	if err := c.readPodIPs(ctx); err != nil {
		return err
	}
	var err error
	c.restarts, err = c.meshRestarts(ctx)
	return err
}

// readPodIPs fills in the address the cluster gave each pod.
func (c *kindCluster) readPodIPs(ctx context.Context) error {
	for i, p := range c.pods {
		kp, err := c.k.cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		ip, err := netip.ParseAddr(kp.Status.PodIP)
		if err != nil {
			return fmt.Errorf("pod %s/%s: field status.podIP: %w", p.Namespace, p.Name, err)
		}
		c.pods[i].IP = ip
	}
	return nil
}

// waitListeners waits until the node's proxy reports a listener for every
// pod on the node: the mesh serves the pods, not merely runs. Which
// listeners a pod gets depends on the scenario (udp-capture for UDP
// services, tcp-capture and http-* for the mTLS path); each is named
// <kind>~<namespace>~<pod>.
func (c *kindCluster) waitListeners(ctx context.Context, scNode string) error {
	var missing string
	err := poll(ctx, 2*time.Minute, "the proxy on "+c.nodes[scNode]+" serving every pod", func(ctx context.Context) (bool, error) {
		body, err := c.Metrics(ctx, scNode, cluster.Proxy)
		if err != nil {
			missing = err.Error()
			return false, nil
		}
		for _, p := range c.pods {
			if p.Node == scNode && !servesPod(body, p) {
				missing = "no listener for pod " + p.Namespace + "/" + p.Name
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w (%s)", err, missing)
	}
	return nil
}

func (c *kindCluster) Pods() []cluster.Pod { return append([]cluster.Pod(nil), c.pods...) }

func (c *kindCluster) ServiceVIP(namespace, name string) (netip.Addr, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	svc, err := c.k.cs.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return netip.Addr{}, fmt.Errorf("service %s/%s: %w", namespace, name, err)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("service %s/%s: field spec.clusterIP: %w", namespace, name, err)
	}
	return ip, nil
}

func (c *kindCluster) DialUDP(ctx context.Context, p cluster.Pod, dst netip.AddrPort) (net.Conn, error) {
	return c.k.dialRelay(ctx, p, "udp", dst)
}

func (c *kindCluster) DialTCP(ctx context.Context, p cluster.Pod, dst netip.AddrPort) (net.Conn, error) {
	return c.k.dialRelay(ctx, p, "tcp", dst)
}

func (c *kindCluster) Records(ctx context.Context, p cluster.Pod) ([]cluster.Record, error) {
	all, err := c.records(ctx, p)
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, r := range all {
		if r.Event != "ready" {
			out = append(out, r)
		}
	}
	return out, nil
}

// records reads the backend's record from its log: it writes its record to
// stdout, one JSON line per event. Lines that are not records (the
// program's own messages on stderr) are skipped; a line that looks like a
// record but does not parse is an error.
func (c *kindCluster) records(ctx context.Context, p cluster.Pod) ([]cluster.Record, error) {
	b, err := c.k.logs(ctx, p.Namespace, p.Name, "backend")
	if err != nil {
		return nil, err
	}
	return parseRecords(b, p)
}

func parseRecords(b []byte, p cluster.Pod) ([]cluster.Record, error) {
	var out []cluster.Record
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte(`{"event":`)) {
			continue
		}
		var r cluster.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("pod %s/%s: bad record line %q: %w", p.Namespace, p.Name, line, err)
		}
		out = append(out, r)
	}
	return out, sc.Err()
}

// Update applies the edited scenario's services and UDPRoutes and deletes
// those it no longer has; pods stay as they are.
func (c *kindCluster) Update(ctx context.Context, edit func(*registry.Scenario)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	next, err := clone(c.scenario)
	if err != nil {
		return err
	}
	edit(&next)
	if err := samePods(c.scenario, next); err != nil {
		return err
	}
	// Only what the edit changed is written, one object as a user's
	// apply would: the suites time a live change from this write.
	prevDocs, err := c.documents(c.scenario)
	if err != nil {
		return err
	}
	nextDocs, err := c.documents(next)
	if err != nil {
		return fmt.Errorf("scenario update: %w", err)
	}
	for _, u := range changedDocuments(prevDocs, nextDocs) {
		if err := c.k.applyOne(ctx, u); err != nil {
			return fmt.Errorf("scenario update: %w", err)
		}
	}
	if err := c.prune(ctx, c.scenario, next); err != nil {
		return err
	}
	c.scenario = next
	return nil
}

func (c *kindCluster) documents(sc registry.Scenario) ([]*unstructured.Unstructured, error) {
	b, err := manifests.Workloads(c.values, sc, c.nodes)
	if err != nil {
		return nil, err
	}
	return documents(b)
}

// changedDocuments are the documents of next that prev lacks or renders
// otherwise, in next's order.
func changedDocuments(prev, next []*unstructured.Unstructured) []*unstructured.Unstructured {
	key := func(u *unstructured.Unstructured) string {
		return u.GetAPIVersion() + "/" + u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
	}
	was := map[string]*unstructured.Unstructured{}
	for _, u := range prev {
		was[key(u)] = u
	}
	var out []*unstructured.Unstructured
	for _, u := range next {
		if p, ok := was[key(u)]; !ok || !equality.Semantic.DeepEqual(p.Object, u.Object) {
			out = append(out, u)
		}
	}
	return out
}

func clone(sc registry.Scenario) (registry.Scenario, error) {
	var out registry.Scenario
	b, err := json.Marshal(sc)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return out, fmt.Errorf("scenario does not round-trip: %w", err)
	}
	return out, nil
}

func samePods(prev, next registry.Scenario) error {
	a, _ := json.Marshal(prev.Pods)
	b, _ := json.Marshal(next.Pods)
	if !bytes.Equal(a, b) {
		return errors.New("scenario update changes the pods; the kind provider, like the netns one, changes services and routes only")
	}
	return nil
}

// prune deletes the services and UDPRoutes prev has and next does not.
func (c *kindCluster) prune(ctx context.Context, prev, next registry.Scenario) error {
	keep := map[string]bool{}
	for _, s := range next.Services {
		keep["svc/"+orDefault(s.Namespace)+"/"+s.Name] = true
	}
	for _, r := range next.UDPRoutes {
		keep["route/"+orDefault(r.Metadata.Namespace)+"/"+r.Metadata.Name] = true
	}
	for _, s := range prev.Services {
		ns := orDefault(s.Namespace)
		if !keep["svc/"+ns+"/"+s.Name] {
			if err := c.k.cs.CoreV1().Services(ns).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("failed to delete service %s/%s: %w", ns, s.Name, err)
			}
		}
	}
	for _, r := range prev.UDPRoutes {
		ns := orDefault(r.Metadata.Namespace)
		if !keep["route/"+ns+"/"+r.Metadata.Name] {
			if err := c.k.dyn.Resource(udpRouteGVR).Namespace(ns).Delete(ctx, r.Metadata.Name, metav1.DeleteOptions{}); err != nil {
				return fmt.Errorf("failed to delete UDPRoute %s/%s: %w", ns, r.Metadata.Name, err)
			}
		}
	}
	return nil
}

func (c *kindCluster) Metrics(ctx context.Context, scNode string, of cluster.Component) (string, error) {
	kn, ok := c.nodes[scNode]
	if !ok {
		return "", fmt.Errorf("no node %s in the scenario", scNode)
	}
	port, ok := metricsPorts[of]
	if !ok {
		return "", fmt.Errorf("no component %q on node %s", of, scNode)
	}
	pod, err := c.meshPod(ctx, kn)
	if err != nil {
		return "", err
	}
	return c.k.getViaPortForward(ctx, c.values.Namespace, pod.Name, port, "/metrics")
}

// metricsPorts are the agent's and proxy's default loopback metrics ports
// (the DaemonSet leaves both flags at their defaults); a port forward
// reaches them in the hostNetwork pod's netns, which is the node's.
var metricsPorts = map[cluster.Component]int{cluster.Agent: 15090, cluster.Proxy: 15091}

func (c *kindCluster) meshPod(ctx context.Context, kindNode string) (*corev1.Pod, error) {
	l, err := c.k.cs.CoreV1().Pods(c.values.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=aether-node", FieldSelector: "spec.nodeName=" + kindNode})
	if err != nil {
		return nil, fmt.Errorf("failed to list the mesh pods on %s: %w", kindNode, err)
	}
	if len(l.Items) != 1 {
		return nil, fmt.Errorf("%d aether-node pods on %s, want 1", len(l.Items), kindNode)
	}
	return &l.Items[0], nil
}

func (c *kindCluster) meshRestarts(ctx context.Context) (map[string]int32, error) {
	l, err := c.k.cs.CoreV1().Pods(c.values.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to list the mesh pods: %w", err)
	}
	out := map[string]int32{}
	for _, p := range l.Items {
		for _, s := range p.Status.ContainerStatuses {
			out[p.Name+"/"+s.Name] = s.RestartCount
		}
	}
	return out, nil
}

// Check reports a mesh container that restarted since Up, or is gone.
func (c *kindCluster) Check(ctx context.Context) error {
	now, err := c.meshRestarts(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for name, n := range c.restarts {
		m, ok := now[name]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("mesh container %s is gone", name))
		case m != n:
			errs = append(errs, fmt.Errorf("mesh container %s restarted %d time(s) during the run", name, m-n))
		}
	}
	return errors.Join(errs...)
}

// Close deletes the scenario's namespaces.
func (c *kindCluster) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	seen := map[string]bool{}
	var errs []error
	for _, p := range c.pods {
		if p.Namespace == "default" || seen[p.Namespace] {
			continue
		}
		seen[p.Namespace] = true
		errs = append(errs, c.k.deleteNamespace(ctx, p.Namespace))
	}
	return errors.Join(errs...)
}
