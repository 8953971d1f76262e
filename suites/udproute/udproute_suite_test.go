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

// newRig finds or builds the binaries; the clusters come up on first use.
func newRig() (*rig, error) {
	root, err := node.ModuleRoot(".")
	if err != nil {
		return nil, err
	}
	runRoot := GinkgoT().TempDir()
	if dir := os.Getenv(redgreen.EnvReportDir); dir != "" {
		// Keep the clusters' logs and records beside the report.
		runRoot = filepath.Join(dir, "udproute-run")
		if err := os.RemoveAll(runRoot); err != nil {
			return nil, fmt.Errorf("failed to clear %s: %w", runRoot, err)
		}
	}
	bin := node.Binaries{Dir: os.Getenv(envBin), Node: filepath.Join(os.Getenv(envBin), "aether-node")}
	if bin.Dir == "" {
		// One build shared across runs (and with aether-node), not a copy
		// per run beside the report.
		if bin, err = node.BuildShared(root, "ptp", "static", "aether-cni", "aether-agent", "aether-proxy", "aether-node"); err != nil {
			return nil, fmt.Errorf("failed to build the binaries: %w", err)
		}
	}
	return &rig{bin: bin, runRoot: runRoot, clusters: map[constants.CaptureMode]*node.Cluster{}}, nil
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
		suite := redgreen.Suite{Name: "udproute", Subject: "TPROXY mark-and-divert capture: per-ClusterIP UDPRoute selection on 18082"}
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

	// The control broken on purpose: given the subject's TPROXY capture it
	// shows no collapse, and the suite must call the rig broken, naming the
	// control, rather than pass or fail. It runs last: it uses, then frees,
	// the subject's cluster.
	It("calls the rig broken when the control is given the subject's capture", func(ctx SpecContext) {
		broken := redgreen.Run(ctx, redgreen.Suite{Name: "udproute", Subject: result.Subject,
			Cases: []redgreen.Case{selectionControl(r, constants.CaptureTProxy)}})
		GinkgoWriter.Println(broken.Table())
		Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), broken.Reason)
		Expect(broken.Reason).To(ContainSubstring("control selection-redirect did not show its signature"))
		Expect(broken.Cases).To(HaveLen(1))
		Expect(broken.Cases[0].Reason).To(ContainSubstring("the services landed on different backends"))
	}, NodeTimeout(5*time.Minute))
})
