package cluster

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/node"
)

// MultiConfig is a multi-cluster run to bring up: every cluster of a
// clusters file (mesh/registry's Clusters format), each with its own
// nodes, ranges, trust domain, CA and agents, joined by their gateways.
type MultiConfig struct {
	// Clusters is the clusters file.
	Clusters string
	Mode     constants.CaptureMode
	// RunDir keeps each cluster's logs and records, RunDir/<name>.
	RunDir string
	Logf   func(format string, args ...any)
	// Unfederated leaves out the bundle exchange between the clusters
	// (a control): each trusts its own CA alone.
	Unfederated bool
	// AgentArgs, when set, are cluster's extra aether-agent flags (the
	// federation's, a control's switch), after the provider's own mTLS
	// flags and remote exports.
	AgentArgs func(cluster string) []string
}

// MultiProvider brings up multi-cluster runs of one kind.
type MultiProvider interface {
	Name() string
	UpClusters(ctx context.Context, cfg MultiConfig) (Multi, error)
}

// Member is what a multi-cluster run knows of one of its clusters
// beyond Cluster: its entry in the clusters file and its gateway.
type Member struct {
	Name, TrustDomain, MeshDomain string
	// Gateway is the gateway's address on the shared network (its
	// listeners are on EastWestTunnelPort); zero when none.
	Gateway netip.Addr
	// CADir is the cluster's own CA (identity.CAFile in it); empty
	// without the mesh.
	CADir string
}

// Multi is a running multi-cluster run. Each cluster is a Cluster as a
// single-cluster suite sees one; closing the Multi closes them all.
type Multi interface {
	// Members lists the clusters in file order.
	Members() []Member
	// Cluster is the cluster named name, nil when there is none.
	Cluster(name string) Cluster
	// Check reports any process of any cluster that has died.
	Check(ctx context.Context) error
	Close() error
}

// UpClusters brings up every cluster of cfg.Clusters on the embedded netns
// cluster (rigs/node.UpClusters): each on its own underlay and bridge,
// the gateways on a shared bridge namespace.
func (p NetnsProvider) UpClusters(ctx context.Context, cfg MultiConfig) (Multi, error) {
	m, err := node.UpClusters(ctx, node.MultiConfig{Clusters: cfg.Clusters, Mode: cfg.Mode, RunDir: cfg.RunDir,
		Bin: p.Bin, Logf: cfg.Logf, AgentArgs: cfg.AgentArgs, Unfederated: cfg.Unfederated})
	if err != nil {
		return nil, err
	}
	return &netnsMulti{m: m}, nil
}

type netnsMulti struct{ m *node.Multi }

func (n *netnsMulti) Members() []Member {
	var out []Member
	for _, c := range n.m.Clusters() {
		_, gw := c.Gateway()
		out = append(out, Member{Name: c.Name, TrustDomain: c.TrustDomain, MeshDomain: c.MeshDomain, Gateway: gw, CADir: c.CADir})
	}
	return out
}

func (n *netnsMulti) Cluster(name string) Cluster {
	c := n.m.Cluster(name)
	if c == nil {
		return nil
	}
	// The cluster's access logs are in its own run dir, as rigs/node
	// gives its agents --access-log-dir.
	return &netnsCluster{c: c, runDir: c.RunDir}
}

func (n *netnsMulti) Check(context.Context) error { return n.m.Check() }

func (n *netnsMulti) Close() error { return n.m.Close() }

// MemberNamed finds cluster name among m's members.
func MemberNamed(m Multi, name string) (Member, Cluster, error) {
	for _, mb := range m.Members() {
		if mb.Name == name {
			if c := m.Cluster(name); c != nil {
				return mb, c, nil
			}
		}
	}
	return Member{}, nil, fmt.Errorf("no cluster %q in the run", name)
}

// EmbeddedMulti is the rigs/node run under m when m runs on the netns
// provider, else nil.
func EmbeddedMulti(m Multi) *node.Multi {
	if n, ok := m.(*netnsMulti); ok {
		return n.m
	}
	return nil
}

var _ MultiProvider = NetnsProvider{}
