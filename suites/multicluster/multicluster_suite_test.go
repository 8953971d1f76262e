// Package multicluster is the two-cluster mesh's e2e (ARCHITECTURE.md,
// "Two clusters"), on the embedded netns cluster (rigs/node.UpClusters):
// fixtures/scenarios/multicluster.yaml's cluster-1 and cluster-2, each
// with its own nodes, ranges, CA and trust domain, joined only by their
// gateways on a shared network and by the SPIFFE bundles they exchange.
// A source in one cluster calls a service of the other by authority on
// 18081; its proxy sends the mTLS session (or the QUIC one, over a twin)
// to the other cluster's gateway on 18009, which forwards it by SNI
// without terminating it to the destination pod's inbound.
//
// The controls: a gateway that forwards every SNI to its first exposed
// service (delivered to the wrong pod, which the source's end-to-end TLS
// then refuses), and the clusters without the bundle exchange (handshakes
// refused and counted, the app sees nothing). At the gateway itself
// (gateway_test.go): junk and an unknown SNI on UDP 18009 are dropped and
// counted by reason and reach no pod; a QUIC client rebound as by a NAT
// keeps its connection and identity, while one that moves by its own path
// migration to a fresh connection ID is not followed (the control); and a
// spray of forged Initials leaves a valid flow served and the gateway's
// RSS and fds bounded. The witnesses are the
// destination apps' own records of the XFCC each request carried, the
// destination proxies' handshake counters and the gateways' passthrough
// counters; never the client.
package multicluster

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

func TestMulticluster(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "multicluster")
}

// envBin names a directory of prebuilt binaries to run instead of building.
const envBin = "AETHER_MULTICLUSTER_BIN"

const clustersFile = "../../fixtures/scenarios/multicluster.yaml"

// TestMain runs the suite on the embedded netns cluster only: kind
// brings up one cluster per suite, and this suite needs two joined by a
// network of their own.
func TestMain(m *testing.M) {
	provider.EmbeddedMain(m, "multicluster", "two clusters joined by their gateways on a shared network")
}

// setup is one configuration of the two clusters a case runs on.
type setup string

const (
	// federated: the mesh as shipped between two clusters, each source
	// on HTTP/2 (--mesh-transport h2).
	federated setup = "federated-h2"
	// federatedQUIC: the same on east-west QUIC wherever eligible
	// (--mesh-transport auto): remote pairs over their twins through the
	// gateways' UDP 18009.
	federatedQUIC setup = "federated-quic"
	// gatewayFirst: federated-h2 with cluster-2's gateway forwarding
	// every SNI to its first exposed service (the control
	// --test-only-gateway-first-service).
	gatewayFirst setup = "gateway-first-service"
	// unfederated: federated-h2 without the bundle exchange: each
	// cluster trusts its own CA alone.
	unfederated setup = "unfederated"
)

// rig holds the provider and the two clusters of the setup last asked
// for: one run at a time, since every setup takes the same addresses.
type rig struct {
	provider cluster.Provider
	multi    cluster.MultiProvider
	runRoot  string
	current  cluster.Multi
	setup    setup
}

func newRig() (*rig, error) {
	p, runRoot, err := provider.Open("multicluster", envBin)
	if err != nil {
		return nil, err
	}
	mp, ok := p.(cluster.MultiProvider)
	if !ok {
		return nil, fmt.Errorf("provider %s brings up no multi-cluster run", p.Name())
	}
	return &rig{provider: p, multi: mp, runRoot: runRoot}, nil
}

// clusters returns the run of setup s, closing another setup's first, and
// waits until each source reaches the other cluster (or, for the
// controls, until the bundles had their chance to arrive).
func (r *rig) clusters(ctx context.Context, s setup) (cluster.Multi, error) {
	if r.current != nil && r.setup == s {
		return r.current, nil
	}
	if err := r.Close(); err != nil {
		return nil, err
	}
	transport := "h2"
	if s == federatedQUIC {
		transport = "auto"
	}
	cfg := cluster.MultiConfig{Clusters: clustersFile, Mode: constants.CaptureTProxy,
		RunDir:      filepath.Join(r.runRoot, string(s)),
		Unfederated: s == unfederated,
		Logf:        func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) },
		AgentArgs: func(name string) []string {
			args := []string{"--mesh-transport", transport}
			if s == gatewayFirst && name == "cluster-2" {
				args = append(args, "--test-only-gateway-first-service")
			}
			return args
		},
	}
	m, err := r.multi.UpClusters(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s clusters on %s: %w", s, r.provider.Name(), err)
	}
	r.current, r.setup = m, s
	if err := waitReady(ctx, m, s); err != nil {
		return nil, fmt.Errorf("the %s clusters: %w", s, err)
	}
	return m, nil
}

var _ = Describe("Two clusters joined by their east-west gateways on 18009", Ordered, ContinueOnFailure, func() {
	rig, result := provider.RedGreen(redgreen.Suite{Name: "multicluster",
		Subject: "cross-cluster mTLS and QUIC through the gateways' SNI passthrough, each source its own remote SPIFFE ID"}, newRig, cases)

	// The control broken on purpose: given the subject's gateway (every
	// SNI to its own service) it shows no misroute, and the suite must
	// call the rig broken, naming the control. It runs last, on the
	// subject's clusters.
	It("calls the rig broken when the misrouting control is given the subject's gateway", func(ctx SpecContext) {
		broken := redgreen.Run(ctx, redgreen.Suite{Name: "multicluster", Subject: result().Subject,
			Cases: []redgreen.Case{misroutedControl(rig(), federated)}})
		GinkgoWriter.Println(broken.Table())
		Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), broken.Reason)
		Expect(broken.Reason).To(ContainSubstring("control gateway-first-service did not show its signature"))
		Expect(broken.Cases).To(HaveLen(1))
		Expect(broken.Cases[0].Reason).To(ContainSubstring("were answered 200"))
	}, NodeTimeout(5*time.Minute))
})

// Provider is the cluster provider the rig runs on.
func (r *rig) Provider() cluster.Provider { return r.provider }

// Close tears down the run the rig has up.
func (r *rig) Close() error {
	if r.current == nil {
		return nil
	}
	err := r.current.Close()
	r.current = nil
	if err != nil {
		return errors.Join(fmt.Errorf("closing the %s clusters", r.setup), err)
	}
	return nil
}

// caseTimeout bounds one case's traffic.
const caseTimeout = 2 * time.Minute
