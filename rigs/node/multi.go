package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/netns"
)

// MultiConfig describes a multi-cluster run: every cluster of a clusters
// file (registry.Clusters), each brought up as Up brings up one, on its
// own bridge and underlay, with its own registry file, CA, trust and mesh
// domains and agents, the clusters joined only by their gateway nodes on
// the shared network (WANPrefix).
type MultiConfig struct {
	// Clusters is the path of a clusters file.
	Clusters string
	// Mode is every cluster's capture mode (NoMesh: network and backends
	// only).
	Mode constants.CaptureMode
	// RunDir holds one run dir per cluster, RunDir/<cluster name>. Empty:
	// a new temporary directory, left in place.
	RunDir string
	Bin    Binaries
	Logf   func(format string, args ...any)
	// Unfederated leaves out the bundle exchange: each cluster's agents
	// trust their own CA alone (a control). Otherwise every agent serves
	// its cluster's SPIFFE bundle on BundleEndpointPort and federates with
	// every other cluster's, fetched from that cluster's gateway address.
	Unfederated bool
	// AgentArgs, when set, gives extra flags to cluster's agents, after
	// the rig's own (its --trust-domain, --mesh-domain, --ca-dir,
	// --access-log-dir and one --remote-export per other cluster's
	// export): where the federation's flags go.
	AgentArgs func(cluster string) []string
}

// Multi is a running multi-cluster run.
type Multi struct {
	// File is the clusters file; RunDir holds the clusters' run dirs.
	File, RunDir string
	clusters     []*Cluster
	wan          *wan
	closed       bool
}

var multiSeq atomic.Int32

// ClusterUnderlay is the underlay of the k-th cluster (from 0) of a
// multi-cluster run: 10.243.<k>.0/24, the first being UnderlayPrefix, a
// cluster brought up alone's.
func ClusterUnderlay(k int) netip.Prefix {
	b := UnderlayPrefix.Addr().As4()
	b[2] += byte(k)
	return netip.PrefixFrom(netip.AddrFrom4(b), UnderlayPrefix.Bits())
}

// plannedCluster is a cluster of a clusters file, checked, before anything
// is built.
type plannedCluster struct {
	registry.ScenarioCluster
	state    *registry.State
	underlay netip.Prefix
	gateway  netip.Addr
}

// loadClusters reads a clusters file and checks every cluster's
// addresses against the rig's plan and against each other's.
func loadClusters(path string) ([]plannedCluster, error) {
	if path == "" {
		return nil, errors.New("no clusters file given")
	}
	cs, err := registry.LoadClustersFile(path)
	if err != nil {
		return nil, err
	}
	out := make([]plannedCluster, len(cs))
	names := make([]string, len(cs))
	states := make([]*registry.State, len(cs))
	for i := range cs {
		// As loadScenario does: the rig's pods get their netns paths from
		// the CNI handoff only.
		for j := range cs[i].Scenario.Pods {
			cs[i].Scenario.Pods[j].Netns = ""
		}
		st, err := cs[i].State(path)
		if err != nil {
			return nil, err
		}
		out[i] = plannedCluster{ScenarioCluster: cs[i], state: st, underlay: ClusterUnderlay(i)}
		for _, n := range st.Nodes {
			if n.Gateway != nil {
				out[i].gateway = n.Gateway.Address
			}
		}
		names[i], states[i] = cs[i].Name, st
	}
	if err := checkClustersPlan(path, names, states); err != nil {
		return nil, err
	}
	return out, nil
}

// UpClusters brings up every cluster of cfg.Clusters, in file order. Each
// cluster's export (registry.ExportOf) is written to its run dir before
// any cluster comes up, rewritten whenever its registry is, and given to
// every other cluster's agents with --remote-export. On failure everything
// built so far is torn down and the error names the cluster.
func UpClusters(ctx context.Context, cfg MultiConfig) (m *Multi, err error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	switch cfg.Mode {
	case NoMesh, constants.CaptureRedirect, constants.CaptureTProxy:
	default:
		return nil, fmt.Errorf("unknown capture mode %q (want %q or %q)", cfg.Mode, constants.CaptureRedirect, constants.CaptureTProxy)
	}
	planned, err := loadClusters(cfg.Clusters)
	if err != nil {
		return nil, err
	}
	if cfg.RunDir == "" {
		if cfg.RunDir, err = os.MkdirTemp("", "aether-clusters-"); err != nil {
			return nil, fmt.Errorf("failed to create a run dir: %w", err)
		}
	}
	m = &Multi{File: cfg.Clusters, RunDir: cfg.RunDir}
	defer func() {
		if err != nil {
			if cerr := m.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("and the rollback failed: %w", cerr))
			}
			m = nil
		}
	}()
	// Every cluster's files first: the agents of the first cluster read
	// the last one's export as they start.
	dirs := make([]string, len(planned))
	exports := make([]*exportTarget, len(planned))
	for i := range planned {
		pc := &planned[i]
		dirs[i] = filepath.Join(cfg.RunDir, pc.Name)
		if err := os.MkdirAll(dirs[i], 0o755); err != nil {
			return m, fmt.Errorf("cluster %q: failed to create its run dir: %w", pc.Name, err)
		}
		// The cluster's own scenario, which Up reads as it reads a
		// single cluster's.
		scen := filepath.Join(dirs[i], "scenario.yaml")
		if err := os.WriteFile(scen, pc.Raw, 0o644); err != nil {
			return m, fmt.Errorf("cluster %q: failed to write its scenario: %w", pc.Name, err)
		}
		if !pc.gateway.IsValid() {
			continue
		}
		exports[i] = &exportTarget{path: filepath.Join(dirs[i], "export.yaml"),
			cluster: pc.Name, trustDomain: pc.TrustDomain, meshDom: pc.MeshDomain}
		ex, err := exportOf(pc.Scenario, scen, exports[i])
		if err != nil {
			return m, err
		}
		if err := registry.WriteExportFile(exports[i].path, ex); err != nil {
			return m, err
		}
	}
	// Every cluster's CA exists before any agent starts: each cluster's
	// agents are handed the others' bundles to authenticate their bundle
	// endpoints until the first fetch.
	bundles := make([]string, len(planned))
	if cfg.Mode != NoMesh {
		for i := range planned {
			if bundles[i], err = clusterCA(&planned[i], dirs[i]); err != nil {
				return m, err
			}
		}
	}
	if m.wan, err = newWAN("m" + strconv.Itoa(int(multiSeq.Add(1))) + "~wan"); err != nil {
		return m, err
	}
	bin := cfg.Bin
	for i := range planned {
		pc := &planned[i]
		cc := Config{Scenario: filepath.Join(dirs[i], "scenario.yaml"), Mode: cfg.Mode, RunDir: dirs[i], Bin: bin,
			Logf:     func(f string, a ...any) { cfg.Logf("%s: "+f, append([]any{pc.Name}, a...)...) },
			underlay: pc.underlay, wan: m.wan, export: exports[i]}
		var remotes []string
		for j := range planned {
			if j == i || !planned[j].gateway.IsValid() {
				continue
			}
			cc.peers = append(cc.peers, peer{cluster: planned[j].Name, underlay: planned[j].underlay, gateway: planned[j].gateway})
			remotes = append(remotes, exports[j].path)
		}
		if cfg.Mode != NoMesh {
			if cc.AgentArgs, err = clusterAgentArgs(pc, dirs[i], remotes); err != nil {
				return m, err
			}
			if !cfg.Unfederated {
				cc.AgentArgs = append(cc.AgentArgs, federationArgs(planned, bundles, i)...)
			}
			if cfg.AgentArgs != nil {
				cc.AgentArgs = append(cc.AgentArgs, cfg.AgentArgs(pc.Name)...)
			}
		}
		c, err := Up(ctx, cc)
		if err != nil {
			return m, fmt.Errorf("cluster %q: %w", pc.Name, err)
		}
		c.Name, c.TrustDomain, c.MeshDomain = pc.Name, pc.TrustDomain, pc.MeshDomain
		if exports[i] != nil {
			c.ExportFile = exports[i].path
		}
		if cfg.Mode != NoMesh {
			c.CADir = filepath.Join(dirs[i], "ca")
		}
		m.clusters = append(m.clusters, c)
		// The programs are built (or found) once, for every cluster.
		bin = c.cfg.Bin
	}
	cfg.Logf("%d clusters up, run dir %s", len(m.clusters), m.RunDir)
	return m, nil
}

// clusterAgentArgs are the rig's flags for a cluster's agents: the mTLS
// path in its own trust and mesh domains under its own CA, which the rig
// makes here so the cluster's agents all load one root, its access logs
// in its run dir, and the other clusters' exports.
func clusterAgentArgs(pc *plannedCluster, dir string, remotes []string) ([]string, error) {
	ca := filepath.Join(dir, "ca")
	access := filepath.Join(dir, "access")
	if err := os.MkdirAll(access, 0o755); err != nil {
		return nil, fmt.Errorf("cluster %q: failed to create its access log dir: %w", pc.Name, err)
	}
	args := []string{"--trust-domain", pc.TrustDomain, "--mesh-domain", pc.MeshDomain, "--ca-dir", ca, "--access-log-dir", access}
	for _, r := range remotes {
		args = append(args, "--remote-export", r)
	}
	return args, nil
}

// BundleEndpointPort is where every agent of a multi-cluster run serves its
// cluster's SPIFFE bundle (aether-agent --bundle-endpoint, on all of its
// node's addresses): the other clusters fetch it at the gateway's address
// on the shared network, the one of the cluster's nodes they can reach.
const BundleEndpointPort = 15443

// bundleRefreshHint is what the rig's bundle endpoints advertise: short,
// so a rotation crosses within a case, and the fetchers' own floor (5 s)
// still bounds the load.
const bundleRefreshHint = "5s"

// clusterCA makes (or loads) the cluster's own CA under dir/ca and writes
// its bundle, certificates only, to dir/bundle.pem, the file the other
// clusters' agents are handed; it returns that file's path.
func clusterCA(pc *plannedCluster, dir string) (string, error) {
	ca, err := identity.LoadOrCreateCA(filepath.Join(dir, "ca"), identity.CAConfig{TrustDomain: pc.TrustDomain, MeshDomain: pc.MeshDomain})
	if err != nil {
		return "", fmt.Errorf("cluster %q: its CA in %s: %w", pc.Name, filepath.Join(dir, "ca"), err)
	}
	pem, err := ca.Bundle().Marshal()
	if err != nil {
		return "", fmt.Errorf("cluster %q: its bundle: %w", pc.Name, err)
	}
	path := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(path, pem, 0o644); err != nil {
		return "", fmt.Errorf("cluster %q: failed to write its bundle: %w", pc.Name, err)
	}
	return path, nil
}

// federationArgs are cluster i's agents' federation flags: serve the
// cluster's bundle, and federate with every other cluster that has a
// gateway, at its bundle endpoint behind the gateway's address, bootstrapped
// from its bundle file.
func federationArgs(planned []plannedCluster, bundles []string, i int) []string {
	args := []string{"--bundle-endpoint", netip.AddrPortFrom(netip.IPv4Unspecified(), BundleEndpointPort).String(),
		"--bundle-refresh-hint", bundleRefreshHint}
	for j := range planned {
		if j == i || !planned[j].gateway.IsValid() {
			continue
		}
		url := "https://" + netip.AddrPortFrom(planned[j].gateway, BundleEndpointPort).String() + "/"
		args = append(args, "--federate", planned[j].TrustDomain+"="+url, "--federate-bundle", planned[j].TrustDomain+"="+bundles[j])
	}
	return args
}

// Clusters returns the clusters in file order.
func (m *Multi) Clusters() []*Cluster { return append([]*Cluster(nil), m.clusters...) }

// Cluster returns the cluster named name, or nil.
func (m *Multi) Cluster(name string) *Cluster {
	for _, c := range m.clusters {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// WAN returns the namespace of the shared network's bridge.
func (m *Multi) WAN() *netns.NS {
	if m.wan == nil {
		return nil
	}
	return m.wan.ns
}

// Check reports any process of any cluster that has exited.
func (m *Multi) Check() error {
	var errs []error
	for _, c := range m.clusters {
		if err := c.Check(); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", c.Name, err))
		}
	}
	return errors.Join(errs...)
}

// Close tears every cluster down, the last first, then the shared
// network. It is safe to call twice.
func (m *Multi) Close() error {
	if m.closed {
		return nil
	}
	m.closed = true
	var errs []error
	for i := len(m.clusters) - 1; i >= 0; i-- {
		if err := m.clusters[i].Close(); err != nil {
			errs = append(errs, fmt.Errorf("cluster %q: %w", m.clusters[i].Name, err))
		}
	}
	if err := m.wan.close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
