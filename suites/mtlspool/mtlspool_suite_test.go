// Package mtlspool is east-west QUIC's security suite, on the embedded
// netns cluster (rigs/node, two nodes, fixtures/scenarios/eastwest.yaml):
// web-0 and batch-0 on node-a call api and cart on node-b, whose QUIC
// inbounds listen on UDP 18008. Each of its properties is shown broken by
// a real configuration first (aether-agent's --test-only-* controls, or a
// peer the mesh must refuse), then shown held by the mesh as shipped:
// per-source identity over QUIC, connection counts, the Q5 name check, R4
// (no resumption, no early data) and its gate, a pod's own egress to
// 18008, SVID rotation, and bad peers.
//
// The witnesses are never the source proxy's claim: the destination app's
// record of the XFCC on each request, the destination proxy's QUIC
// inbound counters (handshakes by peer SPIFFE ID, refusals by reason,
// drops), the kernel's UDP counters in the pod, the agents' published
// snapshots and logs, and the suite's own quic-go clients, which verify
// the server with go-spiffe and present SVIDs the suite signs under the
// mesh's CA. Those clients speak from a pod's netns on a socket marked as
// a proxy's own egress (the capture leaves it alone), as a peer node's
// proxy would; an unmarked one is the pod app of the egress case.
package mtlspool

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
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/provider"
)

func TestMTLSPool(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "mtlspool")
}

// envBin names a directory of prebuilt binaries to run instead of building.
const envBin = "AETHER_MTLSPOOL_BIN"

const (
	scenario    = "../../fixtures/scenarios/eastwest.yaml"
	trustDomain = "aether.test"
	meshDomain  = "mesh.test"
	namespace   = "demo"
	// svidTTL is the shipped variant's SVID lifetime: each SVID is
	// re-issued at half of it, so the rotation case sees one within
	// svidTTL/2. The control variants keep the agents' default (an hour):
	// a client drops a session whose server certificate has expired, and
	// the R4 control must keep its ticket.
	svidTTL = 16 * time.Second
)

// TestMain: the suite needs the embedded netns cluster, so it is not one
// of make e2e's suites.
func TestMain(m *testing.M) {
	provider.EmbeddedMain(m, "mtlspool", "its clients to mark sockets inside pod namespaces, and the agents' logs and state files")
}

// variant is one way of running the agents. Each is its own cluster.
type variant string

const (
	// shipped is the mesh as shipped.
	shipped variant = "shipped"
	// controls runs the agents with the test-only controls that break
	// identity, pooling, R4 and the inbound's address: twins that share
	// web's certificate, twins that pool per downstream connection, QUIC
	// chains with resumption and early data on, QUIC inbounds bound to
	// 0.0.0.0 with IP_TRANSPARENT.
	controls variant = "controls"
	// noSANs issues SVIDs without their DNS SANs (Q5's control).
	noSANs variant = "no-dns-sans"
)

// controlArgs are v's agent flags. Every variant trusts the revocable
// root of its run dir beside the CA's (--test-only-extra-roots): that is
// how the R4 case revokes its client, not a control.
func (r *rig) controlArgs(v variant) []string {
	args := []string{"--test-only-extra-roots=" + r.extraRoots(v)}
	switch v {
	case shipped:
		args = append(args, fmt.Sprintf("--svid-ttl=%s", svidTTL))
	case controls:
		args = append(args, "--test-only-twin-shared-cert="+spiffeID("web"), "--test-only-twin-pool-per-downstream", "--test-only-quic-resumption", "--test-only-quic-inbound-wildcard")
	case noSANs:
		args = append(args, "--test-only-svid-omit-dns-sans")
	}
	return args
}

// rig holds the provider, the CA every agent and the suite's clients sign
// under, and the cluster of the variant last asked for.
type rig struct {
	provider cluster.Provider
	runRoot  string
	caDir    string
	ca       *identity.CA
	// revocable is a second CA of the mesh's trust domain, trusted
	// through --test-only-extra-roots until the R4 case revokes it.
	revocable *identity.CA
	variant   variant
	current   cluster.Cluster
}

func newRig() (*rig, error) {
	p, runRoot, err := provider.Open("mtlspool", envBin)
	if err != nil {
		return nil, err
	}
	if p.Name() != cluster.Netns {
		return nil, fmt.Errorf("mtlspool runs on the %s provider only: its clients mark sockets inside pod namespaces and it reads the agents' logs and state", cluster.Netns)
	}
	r := &rig{provider: p, runRoot: runRoot, caDir: filepath.Join(runRoot, "ca")}
	if r.ca, err = identity.LoadOrCreateCA(r.caDir, identity.CAConfig{TrustDomain: trustDomain, MeshDomain: meshDomain}); err != nil {
		return nil, err
	}
	if r.revocable, err = identity.NewCA(identity.CAConfig{TrustDomain: trustDomain, MeshDomain: meshDomain}); err != nil {
		return nil, err
	}
	return r, nil
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
	if err := r.trustRevocable(v, true); err != nil {
		return nil, err
	}
	c, err := r.provider.Up(ctx, cluster.Config{
		Scenario: scenario, Mode: constants.CaptureTProxy, RunDir: r.runDir(v),
		MTLS: &cluster.MTLS{TrustDomain: trustDomain, MeshDomain: meshDomain, CADir: r.caDir,
			UpstreamCert: "per-source", MeshTransport: "auto", ControlArgs: r.controlArgs(v)},
		Logf: func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) },
	})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s cluster: %w", v, err)
	}
	r.current, r.variant = c, v
	if err := waitListeners(ctx, c, v == noSANs); err != nil {
		return nil, err
	}
	return c, nil
}

// runDir is where variant v's cluster keeps its logs and state.
func (r *rig) runDir(v variant) string { return filepath.Join(r.runRoot, string(v)) }

// extraRoots is the file v's agents read their extra roots from.
func (r *rig) extraRoots(v variant) string {
	return filepath.Join(r.runRoot, string(v)+"-extra-roots.pem")
}

// trustRevocable writes the revocable root into v's extra-roots file, or
// empties it: the agents re-read it and push the new bundle.
func (r *rig) trustRevocable(v variant, trust bool) error {
	var data []byte
	if trust {
		var err error
		if data, err = r.revocable.Bundle().Marshal(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(r.runRoot, 0o755); err != nil {
		return err
	}
	tmp := r.extraRoots(v) + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, r.extraRoots(v))
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

var _ = Describe("mtlspool: identity, pooling and R4 on east-west QUIC", Ordered, ContinueOnFailure, func() {
	rig, result := provider.RedGreen(redgreen.Suite{Name: "mtlspool", Subject: "east-west QUIC's security: per-source identity, one pool per twin, Q5 names, R4, own egress, rotation, bad peers"}, newRig, cases)

	// A control broken on purpose: the shared-certificate control run on
	// the mesh as shipped shows each source arriving as itself, and the
	// suite must call the rig broken.
	It("calls the rig broken when the shared-certificate control runs on the mesh as shipped", func(ctx SpecContext) {
		c := cases(rig())[0]
		Expect(c.Name).To(Equal("shared-cert-arrives-as-web"))
		c.Run = func(ctx context.Context) (redgreen.Observation, error) {
			return perSource(ctx, rig(), shipped, "broken")
		}
		broken := redgreen.Run(ctx, redgreen.Suite{Name: "mtlspool", Subject: result().Subject, Cases: []redgreen.Case{c}})
		GinkgoWriter.Println(broken.Table())
		Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), broken.Reason)
		Expect(broken.Cases[0].Reason).To(ContainSubstring("arrived as itself"))
	}, NodeTimeout(5*time.Minute))
})
