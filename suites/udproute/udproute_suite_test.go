// Package udproute is the UDPRoute selection e2e of proposal 038 Phase 3a on
// the embedded netns cluster (rigs/node): several UDPRoute-backed services
// behind the one transparent listener on 18082, each reaching its own
// backend. The control is the same cluster with REDIRECT capture in the CNI
// and the agent, which must collapse the services onto the tie-break winner;
// the subject is TPROXY mark-and-divert. The witness is each backend's own
// record and the proxy's counters, never the client.
package udproute

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

func TestUDPRoute(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "udproute")
}

// envBin names a directory of prebuilt binaries (ptp, static, aether-cni,
// aether-agent, aether-proxy, aether-node) to run instead of building them.
const envBin = "AETHER_UDPROUTE_BIN"

// scenario is the one file both capture modes run.
const scenario = "../../fixtures/scenarios/udproute.yaml"

// rig holds what the suite shares: the binaries built once, and one cluster
// per capture mode, brought up on first use.
type rig struct {
	bin      node.Binaries
	runRoot  string
	clusters map[constants.CaptureMode]*node.Cluster
}

func (r *rig) cluster(ctx context.Context, mode constants.CaptureMode) (*node.Cluster, error) {
	if c := r.clusters[mode]; c != nil {
		return c, nil
	}
	c, err := node.Up(ctx, node.Config{Scenario: scenario, Mode: mode, Bin: r.bin,
		RunDir: filepath.Join(r.runRoot, string(mode)), Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) }})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s cluster: %w", mode, err)
	}
	r.clusters[mode] = c
	return c, nil
}

func (r *rig) close(mode constants.CaptureMode) error {
	c := r.clusters[mode]
	delete(r.clusters, mode)
	if c == nil {
		return nil
	}
	return c.Close()
}

var _ = Describe("UDPRoute selection behind one transparent listener on 18082", Ordered, func() {
	var (
		r      *rig
		result redgreen.Result
	)

	BeforeAll(func(ctx SpecContext) {
		privileged.Require(GinkgoT())
		root, err := node.ModuleRoot(".")
		Expect(err).NotTo(HaveOccurred())
		runRoot := GinkgoT().TempDir()
		if dir := os.Getenv(redgreen.EnvReportDir); dir != "" {
			// Keep the clusters' logs and records beside the report.
			runRoot = filepath.Join(dir, "udproute-run")
			Expect(os.RemoveAll(runRoot)).To(Succeed())
		}
		bin := node.Binaries{Dir: os.Getenv(envBin), Node: filepath.Join(os.Getenv(envBin), "aether-node")}
		if bin.Dir == "" {
			bin, err = node.BuildShared(root, "ptp", "static", "aether-cni", "aether-agent", "aether-proxy", "aether-node")
			Expect(err).NotTo(HaveOccurred())
		}
		r = &rig{bin: bin, runRoot: runRoot,
			clusters: map[constants.CaptureMode]*node.Cluster{}}

		suite := redgreen.Suite{Name: "udproute", Subject: "TPROXY mark-and-divert capture: per-ClusterIP UDPRoute selection on 18082", Cases: cases(r)}
		result = redgreen.Run(ctx, suite)
		GinkgoWriter.Println(result.Table())
		Expect(result.Write("")).To(Succeed())
	}, NodeTimeout(10*time.Minute))

	AfterAll(func() {
		if r == nil {
			return
		}
		for mode := range r.clusters {
			Expect(r.close(mode)).To(Succeed())
		}
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
