package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/results"
	"sigs.k8s.io/yaml"
)

// NoMesh, as a cluster's capture mode, builds the network and the backends
// only: no aether-cni in the chain, no agent, no proxy.
const NoMesh constants.CaptureMode = ""

// Config describes a cluster to bring up.
type Config struct {
	// Scenario is the path of a scenario file (mesh/registry format).
	Scenario string
	// Mode is the capture mode given to aether-cni and aether-agent.
	Mode constants.CaptureMode
	// RunDir receives the registry file, the CNI cache, process logs and
	// backend records. Empty: a new temporary directory, left in place.
	RunDir string
	// Bin says where the programs are; missing ones are built from the
	// module that contains the working directory.
	Bin Binaries
	// Logf, when set, narrates the bring-up.
	Logf func(format string, args ...any)
	// AgentArgs are extra flags every aether-agent gets (the mTLS path's
	// trust and mesh domains, its CA, a control's switch).
	AgentArgs []string
	// EchoTLS, when set, is every pod app's own mTLS port (the HTTP
	// echo's --tls value): the app-to-app baseline of the benchmark.
	EchoTLS string

	// What UpClusters sets for each cluster of a multi-cluster run.
	// underlay is the nodes' bridge prefix (zero: UnderlayPrefix); wan is
	// the shared network (nil: a cluster with a gateway node makes its
	// own); peers are the other clusters its gateway node routes to;
	// export is set to have every registry write rewrite the cluster's
	// export file.
	underlay netip.Prefix
	wan      *wan
	peers    []peer
	export   *exportTarget
}

// Cluster is a running embedded cluster.
type Cluster struct {
	Mode   constants.CaptureMode
	RunDir string
	// RegistryFile is the scenario the agents watch. It holds no netns
	// paths: the agents take those from the CNI handoff.
	RegistryFile string
	// Name, TrustDomain and MeshDomain are the cluster's entry in a
	// clusters file (UpClusters); empty for a cluster brought up alone.
	Name, TrustDomain, MeshDomain string
	// ExportFile is where the cluster's export is kept (rewritten with
	// every registry write), which the other clusters' agents read; empty
	// unless the cluster is one of several and has a gateway node.
	ExportFile string
	// CADir is the cluster's own CA (identity.CAFile in it), made by
	// UpClusters with the mesh on; empty otherwise.
	CADir string

	cfg    Config
	id     int
	bridge *netns.NS
	// underlay is the nodes' bridge prefix.
	underlay netip.Prefix
	// ownWAN is the shared network of a cluster brought up alone with a
	// gateway node; in a multi-cluster run the Multi owns it.
	ownWAN      *wan
	gateway     *Node
	gatewayAddr netip.Addr
	nodes       []*Node
	pods        []*Pod
	cni         *cniRunner

	mu       sync.Mutex
	scenario registry.Scenario
	procs    []*proc
	closed   bool
	// hashes is the sha256 of each mesh binary the cluster runs, by name,
	// hashed as it came up.
	hashes map[string]string
}

// Node is one node namespace.
type Node struct {
	Name     string
	Index    int
	NS       *netns.NS
	Underlay netip.Addr
	// AgentMetrics and ProxyMetrics are loopback addresses inside NS.
	AgentMetrics netip.AddrPort
	ProxyMetrics netip.AddrPort
	// XDS is the agent's listen address the proxy dials.
	XDS string
	// HandoffSocket is where the node's agent takes pods from aether-cni
	// (its agentSocket); the records lie in handoff.StateDir of it.
	HandoffSocket string
	agent         *proc
	proxy         *proc
}

// Pod is one pod namespace.
type Pod struct {
	Name      string
	Namespace string
	Node      string
	IP        netip.Addr
	NS        *netns.NS
	// Record is the backend's record file (see Record).
	Record  string
	backend *proc
	cniID   string
	// adds counts CNI ADDs, so each sandbox gets its own container ID.
	adds int
}

// Key returns the pod's registry key.
func (p *Pod) Key() registry.Key { return registry.Key{Namespace: p.Namespace, Name: p.Name} }

var clusterSeq atomic.Int32

// UnderlayPrefix holds the nodes' bridge addresses. Like every rig range it
// exists only inside the rig's namespaces.
var UnderlayPrefix = netip.MustParsePrefix("10.243.0.0/24")

// Up builds the cluster described by cfg. On failure everything built so far
// is torn down and the error says which step failed.
func Up(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	switch cfg.Mode {
	case NoMesh, constants.CaptureRedirect, constants.CaptureTProxy:
	default:
		return nil, fmt.Errorf("unknown capture mode %q (want %q or %q)", cfg.Mode, constants.CaptureRedirect, constants.CaptureTProxy)
	}
	sc, st, err := loadScenario(cfg.Scenario)
	if err != nil {
		return nil, err
	}
	if removed, err := netns.Sweep(); err != nil {
		cfg.Logf("stale sweep: %v", err)
	} else if len(removed) > 0 {
		cfg.Logf("swept %d stale namespace(s) of dead runs: %v", len(removed), removed)
	}
	if cfg.RunDir == "" {
		if cfg.RunDir, err = os.MkdirTemp("", "aether-node-"); err != nil {
			return nil, fmt.Errorf("failed to create a run dir: %w", err)
		}
	}
	if err := prepareRunDir(cfg.RunDir); err != nil {
		return nil, err
	}
	if !cfg.underlay.IsValid() {
		cfg.underlay = UnderlayPrefix
	}
	c = &Cluster{Mode: cfg.Mode, RunDir: cfg.RunDir, cfg: cfg, id: int(clusterSeq.Add(1)), scenario: *sc,
		underlay: cfg.underlay, RegistryFile: filepath.Join(cfg.RunDir, "registry.yaml")}
	defer func() {
		if err != nil {
			if cerr := c.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("and the rollback failed: %w", cerr))
			}
			c = nil
		}
	}()

	if err := c.binaries(); err != nil {
		return c, err
	}
	// Results name the exact mesh binaries they judged (rigs/results).
	if c.Mode != NoMesh {
		if c.hashes, err = results.HashBinaries(c.cfg.Bin.Dir, MeshBinaries...); err != nil {
			return c, err
		}
	}
	if err := c.buildTopology(st); err != nil {
		return c, err
	}
	if err := c.writeRegistry(); err != nil {
		return c, err
	}
	if c.cni, err = newCNIRunner(c); err != nil {
		return c, err
	}
	// The node agents come up before the pods, as a node's DaemonSet does,
	// so each ADD hands its pod over to a listening agent.
	if c.Mode != NoMesh {
		if err := c.startMesh(ctx); err != nil {
			return c, err
		}
	}
	for _, p := range c.pods {
		if err := c.cni.add(ctx, p); err != nil {
			return c, err
		}
	}
	if err := c.startBackends(ctx, st); err != nil {
		return c, err
	}
	for _, n := range c.nodes {
		if c.Mode == NoMesh {
			break
		}
		if err := c.WaitProxyReady(ctx, n, 30*time.Second); err != nil {
			return c, err
		}
	}
	cfg.Logf("cluster %d up: %d node(s), %d pod(s), capture %q, run dir %s", c.id, len(c.nodes), len(c.pods), c.Mode, c.RunDir)
	return c, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func loadScenario(path string) (*registry.Scenario, *registry.State, error) {
	if path == "" {
		return nil, nil, errors.New("no scenario file given")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read scenario file %q: %w", path, err)
	}
	// The registry's decoder, not a plain strict one: that matches field
	// names without regard to case, and rewriting the file would then hide
	// a typo the agent itself refuses.
	sc, err := registry.DecodeScenario(path, data)
	if err != nil {
		return nil, nil, err
	}
	// The rig's pods get their netns paths from the CNI handoff only; a
	// path the scenario names (for a file-source agent without one) is not
	// the rig's namespace and is dropped.
	for i := range sc.Pods {
		sc.Pods[i].Netns = ""
	}
	st, err := sc.State(path)
	if err != nil {
		return nil, nil, err
	}
	st.DeriveEndpoints()
	if err := checkPlan(path, st); err != nil {
		return nil, nil, err
	}
	return sc, st, nil
}

// gatewayFor is the node-side address of a pod's point-to-point link: the
// .1 of the pod's /24, as ptp would get it from host-local.
func gatewayFor(ip netip.Addr) netip.Addr {
	b := ip.As4()
	b[3] = 1
	return netip.AddrFrom4(b)
}

// Node returns the node named name, or nil.
func (c *Cluster) Node(name string) *Node {
	for _, n := range c.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Bridge returns the namespace holding the bridge the nodes hang off.
func (c *Cluster) Bridge() *netns.NS { return c.bridge }

// Underlay is the prefix of the nodes' bridge addresses: UnderlayPrefix
// for a cluster brought up alone, the k-th cluster's own in a
// multi-cluster run.
func (c *Cluster) Underlay() netip.Prefix { return c.underlay }

// Gateway returns the cluster's gateway node and its address on the
// shared network, or nil when no node is the cluster's gateway.
func (c *Cluster) Gateway() (*Node, netip.Addr) { return c.gateway, c.gatewayAddr }

// WAN returns the namespace of the shared network's bridge when the
// cluster made its own (a cluster brought up alone with a gateway node),
// else nil.
func (c *Cluster) WAN() *netns.NS {
	if c.ownWAN == nil {
		return nil
	}
	return c.ownWAN.ns
}

// Nodes returns the nodes in scenario order.
func (c *Cluster) Nodes() []*Node { return append([]*Node(nil), c.nodes...) }

// Pods returns the pods in scenario order.
func (c *Cluster) Pods() []*Pod { return append([]*Pod(nil), c.pods...) }

// MeshBinaries are the mesh binaries a cluster runs, by file name.
var MeshBinaries = []string{"aether-cni", "aether-agent", "aether-proxy"}

// BinaryHashes is the sha256 of each mesh binary the cluster runs, by name,
// hashed as it came up (none with NoMesh), for a result's build stamp.
func (c *Cluster) BinaryHashes() map[string]string { return maps.Clone(c.hashes) }

// Pod returns the pod namespace/name, or nil.
func (c *Cluster) Pod(namespace, name string) *Pod {
	for _, p := range c.pods {
		if p.Namespace == namespace && p.Name == name {
			return p
		}
	}
	return nil
}

// Resolve turns "<name>.<namespace>" (or a bare name in "default") into an
// address: a pod's IP or a service's ClusterIP. A name that is both is an
// error rather than a guess.
func (c *Cluster) Resolve(name string) (netip.Addr, error) {
	key := registry.Key{Namespace: "default", Name: name}
	if k, err := registry.ParseKey(name); err == nil {
		key = k
	}
	var found []netip.Addr
	if p := c.Pod(key.Namespace, key.Name); p != nil {
		found = append(found, p.IP)
	}
	c.mu.Lock()
	for _, s := range c.scenario.Services {
		if s.Name == key.Name && orDefault(s.Namespace, "default") == key.Namespace {
			if ip, err := netip.ParseAddr(s.ClusterIP); err == nil {
				found = append(found, ip)
			}
		}
	}
	c.mu.Unlock()
	switch len(found) {
	case 0:
		return netip.Addr{}, fmt.Errorf("no pod or service %s in the cluster", key)
	case 1:
		return found[0], nil
	}
	return netip.Addr{}, fmt.Errorf("%s names both a pod and a service", key)
}

// ServiceVIP returns the ClusterIP of service namespace/name.
func (c *Cluster) ServiceVIP(namespace, name string) (netip.Addr, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.scenario.Services {
		if s.Name == name && orDefault(s.Namespace, "default") == namespace {
			ip, err := netip.ParseAddr(s.ClusterIP)
			if err != nil {
				return netip.Addr{}, fmt.Errorf("service %s/%s: field clusterIP: %w", namespace, name, err)
			}
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("no service %s/%s in the cluster", namespace, name)
}

// Scenario returns a copy of the scenario the agents currently read.
func (c *Cluster) Scenario() registry.Scenario {
	c.mu.Lock()
	defer c.mu.Unlock()
	return cloneScenario(c.scenario)
}

func cloneScenario(sc registry.Scenario) registry.Scenario {
	b, err := yaml.Marshal(sc)
	if err != nil {
		panic(fmt.Sprintf("scenario does not marshal: %v", err))
	}
	var out registry.Scenario
	if err := yaml.Unmarshal(b, &out); err != nil {
		panic(fmt.Sprintf("scenario does not round-trip: %v", err))
	}
	return out
}

// Update changes the scenario the agents watch: edit gets a copy, and the
// result is checked by the registry's own loader before it replaces the file
// atomically. Pods cannot be added or removed (they need CNI ADD/DEL); the
// rest (services, endpoints, UDPRoutes, readiness) may change freely.
func (c *Cluster) Update(edit func(*registry.Scenario)) error {
	c.mu.Lock()
	next := cloneScenario(c.scenario)
	c.mu.Unlock()
	edit(&next)
	if len(next.Pods) != len(c.pods) {
		return fmt.Errorf("scenario update changes the pod list (%d -> %d pods); the rig cannot add or remove pods while up", len(c.pods), len(next.Pods))
	}
	for _, sp := range next.Pods {
		p := c.Pod(orDefault(sp.Namespace, "default"), sp.Name)
		if p == nil || sp.Node != p.Node || sp.IP != p.IP.String() {
			return fmt.Errorf("scenario update changes pod %s/%s (name, node or ip); the rig cannot re-plumb a live pod", orDefault(sp.Namespace, "default"), sp.Name)
		}
		if sp.Netns != "" {
			return fmt.Errorf("scenario update gives pod %s/%s netns %q; the rig's agents take netns paths from the CNI handoff only", orDefault(sp.Namespace, "default"), sp.Name, sp.Netns)
		}
	}
	st, err := next.State(c.RegistryFile)
	if err == nil {
		err = checkPlan(c.RegistryFile, st)
	}
	if err != nil {
		return fmt.Errorf("scenario update rejected: %w", err)
	}
	c.mu.Lock()
	prev := c.scenario
	c.scenario = next
	c.mu.Unlock()
	if err := c.writeRegistry(); err != nil {
		c.mu.Lock()
		c.scenario = prev
		c.mu.Unlock()
		return err
	}
	return nil
}

func (c *Cluster) writeRegistry() error {
	c.mu.Lock()
	b, err := yaml.Marshal(c.scenario)
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("failed to encode the registry file: %w", err)
	}
	// Rename into place: the agent's file source must never read half a file.
	tmp := c.RegistryFile + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("failed to write registry file %q: %w", tmp, err)
	}
	if err := os.Rename(tmp, c.RegistryFile); err != nil {
		return fmt.Errorf("failed to replace registry file %q: %w", c.RegistryFile, err)
	}
	return c.writeExport()
}

// exportTarget is where a cluster of a multi-cluster run writes its export
// (registry.ExportOf), which the other clusters' agents read with
// --remote-export.
type exportTarget struct {
	path                          string
	cluster, trustDomain, meshDom string
}

// writeExport rewrites the cluster's export from the scenario it now
// serves, so the other clusters learn a change of its services or
// endpoints as its own agents do. A cluster without an export target, or
// without a gateway, has nothing to write.
func (c *Cluster) writeExport() error {
	x := c.cfg.export
	if x == nil {
		return nil
	}
	c.mu.Lock()
	sc := cloneScenario(c.scenario)
	c.mu.Unlock()
	ex, err := exportOf(&sc, c.RegistryFile, x)
	if err != nil || ex == nil {
		return err
	}
	return registry.WriteExportFile(x.path, ex)
}

// exportOf is sc's export, nil when sc has no gateway node.
func exportOf(sc *registry.Scenario, file string, x *exportTarget) (*registry.Export, error) {
	st, err := sc.State(file)
	if err != nil {
		return nil, fmt.Errorf("export of cluster %q: %w", x.cluster, err)
	}
	st.DeriveEndpoints()
	hasGateway := false
	for _, n := range st.Nodes {
		hasGateway = hasGateway || n.Gateway != nil
	}
	if !hasGateway {
		return nil, nil
	}
	return registry.ExportOf(st, x.cluster, x.trustDomain, x.meshDom)
}

// backendPorts is every (protocol, targetPort) a scenario's services name:
// every pod's backend binds them all, so any pod can become an endpoint of
// any service while the cluster is up. A TCP port with appProtocol http is
// served by the HTTP echo.
func backendPorts(st *registry.State) (udp, tcp, http []int) {
	seen := map[string]bool{}
	for _, s := range st.Services {
		for _, p := range s.Ports {
			id := string(p.Protocol) + "/" + strconv.Itoa(int(p.TargetPort))
			if seen[id] {
				continue
			}
			seen[id] = true
			switch {
			case p.Protocol == registry.ProtocolUDP:
				udp = append(udp, int(p.TargetPort))
			case p.AppProtocol == registry.AppProtocolHTTP:
				http = append(http, int(p.TargetPort))
			default:
				tcp = append(tcp, int(p.TargetPort))
			}
		}
	}
	sort.Ints(udp)
	sort.Ints(tcp)
	sort.Ints(http)
	return udp, tcp, http
}

// Records returns what pod namespace/name's backend has received so far,
// the ready line excluded.
func (c *Cluster) Records(namespace, name string) ([]Record, error) {
	p := c.Pod(namespace, name)
	if p == nil {
		return nil, fmt.Errorf("no pod %s/%s in the cluster", namespace, name)
	}
	all, err := ReadRecords(p.Record)
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

// Close stops every process, runs CNI DEL for every pod, and deletes every
// namespace the cluster made. It is safe to call twice.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	procs := c.procs
	c.mu.Unlock()
	var errs []error
	// Mesh processes first, so no proxy holds a socket in a pod being torn
	// down, then the backends.
	for i := len(procs) - 1; i >= 0; i-- {
		if err := procs[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.cni != nil {
		for _, p := range c.pods {
			if p.cniID == "" {
				continue
			}
			if err := c.cni.del(context.Background(), p); err != nil {
				errs = append(errs, err)
			}
		}
		c.cni.log.Close()
	}
	for _, p := range c.pods {
		if p.NS != nil {
			if err := p.NS.Delete(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, n := range c.nodes {
		if n.NS != nil {
			if err := n.NS.Delete(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.bridge != nil {
		if err := c.bridge.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.ownWAN.close(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster %d teardown: %w", c.id, err)
	}
	return nil
}

func (c *Cluster) tag(parts ...string) string {
	return "c" + strconv.Itoa(c.id) + "~" + strings.Join(parts, "~")
}
