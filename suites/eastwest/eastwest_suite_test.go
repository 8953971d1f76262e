// Package eastwest is east-west QUIC's e2e, by default on the embedded
// netns cluster (rigs/node, two nodes, fixtures/scenarios/eastwest.yaml):
// web-0 and batch-0 on node-a call api and cart on node-b by authority on
// 18081. Under --mesh-transport auto each request of a (source account,
// destination) pair rides that pair's twin, fetched on demand from
// node-a's agent, over HTTP/3 to the destination pod's QUIC inbound on UDP
// 18008. The control is the same cluster with --mesh-transport h2: every
// request goes over HTTP/2. A refused pair fails at once with 503 NC, and
// a twin added after its base cluster warms at once; their controls run
// the agents with test-only flags (a refusal left unanswered, twins that
// share their base's EDS name) and wait out the on-demand timeout. The
// witnesses are the proxies' access logs (protocol, peer SPIFFE ID,
// status, response flags, duration), the destination app's own record of
// the XFCC, and node-a's agent counters; never the client. The cases are
// written against suites/cluster, so the same suite runs on kind
// (AETHER_CLUSTER=kind, make e2e).
package eastwest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/provider"
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

// TestMain brings up and tears down the cluster the suite runs on: nothing
// on netns (each variant's cluster comes up on first use), a kind
// cluster with the mesh installed when AETHER_CLUSTER=kind.
func TestMain(m *testing.M) { provider.Main(m, "eastwest") }

// variant is one way of running the agents: their --mesh-transport and
// any test-only control flags. Each variant is its own cluster.
type variant string

const (
	// h2 is the HTTP/2 floor.
	h2 variant = "h2"
	// auto is the mesh as shipped.
	auto variant = "auto"
	// refusing is auto with one pair, web → cart, refused whatever the
	// registry says: every routed pair is admissible in a consistent
	// snapshot, so a refusable one is made by a test-only flag.
	refusing variant = "refusing"
	// controls is refusing with the two behaviours the mesh avoids: a
	// refusal left unanswered (Envoy's LinearCache) and twins that share
	// their base cluster's EDS name (#1008).
	controls variant = "controls"
)

// refusedTwin is the pair the refusing and controls variants refuse.
var refusedTwin = xdsnames.TwinCluster(xdsnames.Twin{Service: "cart", Namespace: namespace, SA: "web", SANamespace: namespace})

// transport is the variant's --mesh-transport; controlArgs its test-only
// agent flags.
func (v variant) transport() string {
	if v == h2 {
		return "h2"
	}
	return "auto"
}

func (v variant) controlArgs() []string {
	switch v {
	case refusing:
		return []string{"--test-only-refuse-twin=" + refusedTwin}
	case controls:
		return []string{"--test-only-refuse-twin=" + refusedTwin, "--test-only-unanswered-refusals", "--test-only-twin-shares-base-eds"}
	}
	return nil
}

// rig holds the provider and the cluster of the variant last asked for:
// one at a time, since on kind every cluster takes the scenario's names
// and ClusterIPs.
type rig struct {
	provider cluster.Provider
	runRoot  string
	variant  variant
	current  cluster.Cluster
}

func newRig() (*rig, error) {
	p, runRoot, err := provider.Open("eastwest", envBin)
	if err != nil {
		return nil, err
	}
	return &rig{provider: p, runRoot: runRoot}, nil
}

// cluster returns the two-node cluster of variant v, closing another
// variant's first.
func (r *rig) cluster(ctx context.Context, v variant) (cluster.Cluster, error) {
	if r.current != nil && r.variant == v {
		return r.current, nil
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	c, err := r.provider.Up(ctx, cluster.Config{
		Scenario: scenario, Mode: constants.CaptureTProxy, RunDir: filepath.Join(r.runRoot, string(v)),
		MTLS: &cluster.MTLS{TrustDomain: trustDomain, MeshDomain: meshDomain, CADir: filepath.Join(r.runRoot, "ca"),
			UpstreamCert: "per-source", MeshTransport: v.transport(), ControlArgs: v.controlArgs()},
		Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) },
	})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s cluster on %s: %w", v, r.provider.Name(), err)
	}
	r.current, r.variant = c, v
	if err := waitListeners(ctx, c, v == controls); err != nil {
		return nil, err
	}
	return c, nil
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

var _ = Describe("East-west QUIC: per-source twins over HTTP/3, fetched on demand", Ordered, ContinueOnFailure, func() {
	rig, result := provider.RedGreen(redgreen.Suite{Name: "eastwest", Subject: "eligible destinations reached over HTTP/3 through per-source twins fetched on demand"}, newRig, cases)

	// A control broken on purpose: #1008's control run on the mesh as
	// shipped, for batch's twin of cart (a pair the auto cluster has not
	// dialled), shows no stall, and the suite must call the rig broken.
	It("calls the rig broken when #1008's control is given twins with their own EDS names", func(ctx SpecContext) {
		c := onDemandCases(rig())[2]
		Expect(c.Name).To(Equal("twin-shares-base-eds-stalls"))
		c.Run = func(ctx context.Context) (redgreen.Observation, error) { return onDemand(ctx, rig(), auto, "batch-0") }
		broken := redgreen.Run(ctx, redgreen.Suite{Name: "eastwest", Subject: result().Subject, Cases: []redgreen.Case{c}})
		GinkgoWriter.Println(broken.Table())
		Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), broken.Reason)
		Expect(broken.Cases[0].Reason).To(ContainSubstring("want 503 NC"))
	}, NodeTimeout(5*time.Minute))
})

// Provider is the cluster provider the rig runs on.
func (r *rig) Provider() cluster.Provider { return r.provider }
