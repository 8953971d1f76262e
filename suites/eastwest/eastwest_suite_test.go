// Package eastwest is east-west QUIC's e2e on the embedded netns cluster
// (rigs/node, two nodes, fixtures/scenarios/eastwest.yaml): web-0 and
// batch-0 on node-a call api and cart on node-b by authority on 18081.
// Under --mesh-transport auto each request of a (source account,
// destination) pair rides that pair's twin, fetched on demand from
// node-a's agent, over HTTP/3 to the destination pod's QUIC inbound on UDP
// 18008. The control is the same cluster with --mesh-transport h2: every
// request goes over HTTP/2. The witnesses are node-b's proxy access log
// (the protocol and the peer's SPIFFE ID the inbound saw), the
// destination app's own record of the XFCC, and node-a's agent counters;
// never the client.
package eastwest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

func TestEastWest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "eastwest")
}

// envBin names a directory of prebuilt binaries to run instead of building.
const envBin = "AETHER_EASTWEST_BIN"

const (
	scenario    = "../../fixtures/scenarios/eastwest.yaml"
	trustDomain = "aether.test"
	meshDomain  = "mesh.test"
	namespace   = "demo"
)

// transport is aether-agent's --mesh-transport.
type transport string

const (
	auto transport = "auto"
	h2   transport = "h2"
)

// rig holds the binaries and one cluster per transport.
type rig struct {
	bin      node.Binaries
	runRoot  string
	clusters map[transport]*node.Cluster
}

func newRig() (*rig, error) {
	root, err := node.ModuleRoot(".")
	if err != nil {
		return nil, err
	}
	runRoot := GinkgoT().TempDir()
	if dir := os.Getenv(redgreen.EnvReportDir); dir != "" {
		runRoot = filepath.Join(dir, "eastwest-run")
		if err := os.RemoveAll(runRoot); err != nil {
			return nil, fmt.Errorf("failed to clear %s: %w", runRoot, err)
		}
	}
	bin := node.Binaries{Dir: os.Getenv(envBin), Node: filepath.Join(os.Getenv(envBin), "aether-node")}
	if bin.Dir == "" {
		if bin, err = node.BuildShared(root, "ptp", "static", "aether-cni", "aether-agent", "aether-proxy", "aether-node"); err != nil {
			return nil, fmt.Errorf("failed to build the binaries: %w", err)
		}
	}
	return &rig{bin: bin, runRoot: runRoot, clusters: map[transport]*node.Cluster{}}, nil
}

// cluster brings up (once) the two-node cluster whose agents run with
// --mesh-transport tr.
func (r *rig) cluster(ctx context.Context, tr transport) (*node.Cluster, error) {
	if c := r.clusters[tr]; c != nil {
		return c, nil
	}
	dir := filepath.Join(r.runRoot, string(tr))
	if err := os.MkdirAll(filepath.Join(dir, "access"), 0o755); err != nil {
		return nil, err
	}
	c, err := node.Up(ctx, node.Config{
		Scenario: scenario, Mode: constants.CaptureTProxy, Bin: r.bin, RunDir: dir,
		AgentArgs: []string{"--trust-domain", trustDomain, "--mesh-domain", meshDomain,
			"--ca-dir", filepath.Join(r.runRoot, "ca"), "--access-log-dir", filepath.Join(dir, "access"),
			"--mesh-transport", string(tr)},
		Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) },
	})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s cluster: %w", tr, err)
	}
	r.clusters[tr] = c
	if err := waitListeners(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

func (r *rig) closeAll() error {
	var first error
	for tr, c := range r.clusters {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
		delete(r.clusters, tr)
	}
	return first
}

var _ = Describe("East-west QUIC: per-source twins over HTTP/3, fetched on demand", Ordered, func() {
	var (
		r      *rig
		result redgreen.Result
	)

	BeforeAll(func(ctx SpecContext) {
		suite := redgreen.Suite{Name: "eastwest", Subject: "eligible destinations reached over HTTP/3 through per-source twins fetched on demand"}
		err := suite.Setup(func() (err error) {
			if why := privileged.Missing(privileged.NetAdmin, privileged.SysAdmin); why != "" {
				return fmt.Errorf("skipped: %s", why)
			}
			r, err = newRig()
			return err
		})
		privileged.Require(GinkgoT())
		Expect(err).NotTo(HaveOccurred())

		suite.Cases = cases(r)
		result = redgreen.Run(ctx, suite)
		GinkgoWriter.Println(result.Table())
		Expect(result.Write("")).To(Succeed())
	}, NodeTimeout(10*time.Minute))

	AfterAll(func() {
		if r == nil {
			return
		}
		Expect(r.closeAll()).To(Succeed())
		Expect(netns.LeakCheck()).To(Succeed())
	})

	It("shows the control's signature and every subject green", func() {
		Expect(result.Cases).NotTo(BeEmpty())
		for _, row := range result.Cases {
			By(fmt.Sprintf("%s (%s): %s", row.Name, row.Role, row.Observed))
			Expect(row.Matched).To(BeTrue(), "%s %s: expected %s, observed %s: %s", row.Role, row.Name, row.Expected, row.Observed, row.Reason)
		}
		Expect(result.Err()).NotTo(HaveOccurred())
	})
})
