// Package udproute is the UDPRoute selection e2e of proposal 038 Phase 3a,
// by default on the embedded netns cluster (rigs/node): several
// UDPRoute-backed services behind the one transparent listener on 18082,
// each reaching its own backend. The control is the same cluster with REDIRECT capture in the CNI
// and the agent, which must collapse the services onto the tie-break winner;
// the subject is TPROXY mark-and-divert. The witness is each backend's own
// record and the proxy's counters, never the client. The cases are written
// against suites/cluster, so the same suite runs on kind
// (AETHER_CLUSTER=kind, make e2e).
package udproute

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/provider"
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

// TestMain brings up and tears down the cluster the suite runs on: nothing
// on netns (each case's cluster comes up on first use), a kind cluster
// with the mesh installed when AETHER_CLUSTER=kind.
func TestMain(m *testing.M) { provider.Main(m, "udproute") }

// rig holds what the suite shares: the provider, and one cluster per
// capture mode, brought up on first use.
type rig struct {
	provider cluster.Provider
	runRoot  string
	clusters map[constants.CaptureMode]cluster.Cluster
}

func (r *rig) cluster(ctx context.Context, mode constants.CaptureMode) (cluster.Cluster, error) {
	if c := r.clusters[mode]; c != nil {
		return c, nil
	}
	c, err := r.provider.Up(ctx, cluster.Config{Scenario: scenario, Mode: mode,
		RunDir: filepath.Join(r.runRoot, string(mode)), Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) }})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s cluster on %s: %w", mode, r.provider.Name(), err)
	}
	r.clusters[mode] = c
	return c, nil
}

// newRig picks the provider; on netns it finds or builds the binaries. The
// clusters come up on first use.
func newRig() (*rig, error) {
	p, runRoot, err := provider.Open("udproute", envBin)
	if err != nil {
		return nil, err
	}
	return &rig{provider: p, runRoot: runRoot, clusters: map[constants.CaptureMode]cluster.Cluster{}}, nil
}

func (r *rig) close(mode constants.CaptureMode) error {
	c := r.clusters[mode]
	delete(r.clusters, mode)
	if c == nil {
		return nil
	}
	return c.Close()
}

var _ = Describe("UDPRoute selection behind one transparent listener on 18082", Ordered, ContinueOnFailure, func() {
	rig, result := provider.RedGreen(redgreen.Suite{Name: "udproute", Subject: "TPROXY mark-and-divert capture: per-ClusterIP UDPRoute selection on 18082"}, newRig, cases)

	// The control broken on purpose: given the subject's TPROXY capture it
	// shows no collapse, and the suite must call the rig broken, naming the
	// control, rather than pass or fail. It runs last: it uses, then frees,
	// the subject's cluster.
	It("calls the rig broken when the control is given the subject's capture", func(ctx SpecContext) {
		broken := redgreen.Run(ctx, redgreen.Suite{Name: "udproute", Subject: result().Subject,
			Cases: []redgreen.Case{selectionControl(rig(), constants.CaptureTProxy)}})
		GinkgoWriter.Println(broken.Table())
		Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), broken.Reason)
		Expect(broken.Reason).To(ContainSubstring("control selection-redirect did not show its signature"))
		Expect(broken.Cases).To(HaveLen(1))
		Expect(broken.Cases[0].Reason).To(ContainSubstring("the services landed on different backends"))
	}, NodeTimeout(5*time.Minute))
})

// Provider is the cluster provider the rig runs on.
func (r *rig) Provider() cluster.Provider { return r.provider }

// Close tears down every capture mode's cluster the rig brought up.
func (r *rig) Close() error {
	var errs []error
	for mode := range r.clusters {
		errs = append(errs, r.close(mode))
	}
	return errors.Join(errs...)
}
