// Package lifecycle is the twin pair lifecycle's e2e on the embedded netns
// cluster (rigs/node, two nodes, testdata/lifecycle.yaml): web-0, batch-0
// and cron-0 on node-a call api (web also cart) on node-b by authority on
// 18081, each (source account, destination) pair over its QUIC twin,
// fetched on demand from node-a's agent. Each case drives one event of a
// pair's life (an agent restart under traffic, a source account leaving
// the node and returning, a proxy hot restart, an agent restart inside
// one, the migration off a persisted up-front fan-out, a source pod
// re-created on a new IP) on the mesh as shipped, after its control: a
// real configuration that breaks it (the pre-#1073 prune rule, pairs
// dropped on removal, a proxy restarted without handing its listeners
// over, a fetch window longer than the case). The witnesses are the
// clients' per-request results, node-a's proxy access log (status,
// response flags, the cluster routed to), node-b's (protocol and peer
// SPIFFE ID at the inbound), the destination app's own record, and
// node-a's agent (/debug/pairs, its state file, its counters); never one
// process's word alone.
package lifecycle

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
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/provider"
)

func TestLifecycle(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "lifecycle")
}

// envBin names a directory of prebuilt binaries to run instead of building.
const envBin = "AETHER_LIFECYCLE_BIN"

const (
	scenario    = "testdata/lifecycle.yaml"
	trustDomain = "aether.test"
	meshDomain  = "mesh.test"
	namespace   = "demo"
	// window is the agents' --east-west-quic-pair-fetch-window: short, so
	// that a case outlives it.
	window = 3 * time.Second
)

// TestMain: the suite needs the embedded netns cluster, so it is not one
// of make e2e's suites; each variant's cluster comes up on first use.
func TestMain(m *testing.M) {
	provider.EmbeddedMain(m, "lifecycle", "agent restarts, pods taken off their node and proxy hot restarts through the embedded cluster's rig")
}

// variant is one way of running the agents. Each variant is its own
// cluster: a control's flag breaks every pair on its node.
type variant string

const (
	// shipped is the mesh as shipped, with the short fetch window.
	shipped variant = "shipped"
	// pruneUnfetched is the pre-#1073 rule: at the end of the window,
	// every pair whose twin was not fetched by name since the agent
	// started is pruned, live ones included.
	pruneUnfetched variant = "prune-unfetched"
	// dropOnRemoval has no dormant state: a pair whose source account
	// leaves the node is dropped (pre-#1036).
	dropOnRemoval variant = "drop-on-removal"
	// windowHour is the mesh as shipped with the default window, an hour:
	// longer than any case, so nothing is pruned by it.
	windowHour variant = "window-1h"
)

// agentArgs are the variant's agent flags. Every agent samples its
// proxy's counters, so that a prune of a twin that served a request in
// the last minute is counted as such.
func (v variant) agentArgs() []string {
	args := []string{"--proxy-metrics-url", node.ProxyMetricsURL(), "--east-west-quic-pair-fetch-window", window.String()}
	switch v {
	case pruneUnfetched:
		return append(args, "--test-only-prune-unfetched-since-start")
	case dropOnRemoval:
		return append(args, "--test-only-drop-pair-on-removal")
	case windowHour:
		return append(args[:2], "--east-west-quic-pair-fetch-window", "1h")
	}
	return args
}

// rig holds the provider and the cluster of the variant last asked for,
// one at a time.
type rig struct {
	provider cluster.Provider
	runRoot  string
	variant  variant
	current  cluster.Cluster
}

func newRig() (*rig, error) {
	p, runRoot, err := provider.Open("lifecycle", envBin)
	if err != nil {
		return nil, err
	}
	if p.Name() != cluster.Netns {
		return nil, fmt.Errorf("the lifecycle cases restart node agents, take pods off their node and hot-restart proxies through the embedded cluster (rigs/node); the %s provider offers none of these", p.Name())
	}
	return &rig{provider: p, runRoot: runRoot}, nil
}

// cluster returns the two-node cluster of variant v, closing another
// variant's first, with the embedded cluster under it.
func (r *rig) cluster(ctx context.Context, v variant) (cluster.Cluster, *node.Cluster, error) {
	if r.current != nil && r.variant == v {
		return r.current, cluster.Embedded(r.current), nil
	}
	if err := r.Close(); err != nil {
		return nil, nil, err
	}
	c, err := r.provider.Up(ctx, cluster.Config{
		Scenario: scenario, Mode: constants.CaptureTProxy, RunDir: filepath.Join(r.runRoot, string(v)),
		MTLS: &cluster.MTLS{TrustDomain: trustDomain, MeshDomain: meshDomain, CADir: filepath.Join(r.runRoot, "ca"),
			UpstreamCert: "per-source", MeshTransport: "auto", ControlArgs: v.agentArgs()},
		Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) },
	})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to bring up the %s cluster: %w", v, err)
	}
	r.current, r.variant = c, v
	nc := cluster.Embedded(c)
	if nc == nil {
		return nil, nil, errors.New("the netns provider gave a cluster that is not the embedded one")
	}
	if err := warmUp(ctx, c); err != nil {
		return nil, nil, err
	}
	return c, nc, nil
}

// Close tears down the cluster the rig has up.
func (r *rig) Close() error {
	c := r.current
	r.current, r.variant = nil, ""
	if c == nil {
		return nil
	}
	return c.Close()
}

// Provider is the cluster provider the rig runs on.
func (r *rig) Provider() cluster.Provider { return r.provider }

var _ = Describe("Twin pair lifecycle: pairs survive restarts and departures, and only unused ones are pruned", Ordered, ContinueOnFailure, func() {
	rig, result := provider.RedGreen(redgreen.Suite{Name: "lifecycle", Subject: "twin pairs carried over agent restarts, departures and proxy hot restarts, pruned only when unused"}, newRig, cases)

	// Each control's check, given what the same procedure showed on the
	// mesh as shipped (its subject's observation), must call the rig
	// broken: the control's signature is the broken configuration's, not
	// the procedure's.
	It("calls the rig broken when a control's check is given the mesh as shipped", func(ctx SpecContext) {
		res := result()
		all := cases(rig())
		for _, pair := range controlSubject {
			control, ok1 := caseNamed(all, pair.control)
			subject, ok2 := rowNamed(res, pair.subject)
			Expect(ok1 && ok2).To(BeTrue(), "no case %s or no row %s", pair.control, pair.subject)
			ev, err := pair.evidence(subject.Facts)
			Expect(err).NotTo(HaveOccurred(), "%s's row", pair.subject)
			control.Run = func(context.Context) (redgreen.Observation, error) {
				return redgreen.Observation{Summary: subject.Observed, Witness: subject.Witness, Evidence: ev}, nil
			}
			broken := redgreen.Run(ctx, redgreen.Suite{Name: "lifecycle", Subject: res.Subject, Cases: []redgreen.Case{control}})
			GinkgoWriter.Println(broken.Table())
			Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), "%s given %s's observation: %s", pair.control, pair.subject, broken.Reason)
			// The control ran its check on the evidence and found its
			// signature missing: not a type it could not read.
			Expect(broken.Cases[0].Reason).NotTo(ContainSubstring("evidence, not"), "%s given %s's observation", pair.control, pair.subject)
		}
	})
})

func caseNamed(cs []redgreen.Case, name string) (redgreen.Case, bool) {
	for _, c := range cs {
		if c.Name == name {
			return c, true
		}
	}
	return redgreen.Case{}, false
}

func rowNamed(res redgreen.Result, name string) (redgreen.CaseResult, bool) {
	for _, row := range res.Cases {
		if row.Name == name {
			return row, true
		}
	}
	return redgreen.CaseResult{}, false
}
