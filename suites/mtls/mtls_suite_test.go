// Package mtls is the mTLS HTTP/2 path's e2e on the embedded netns cluster
// (rigs/node, two nodes): two source pods with different service accounts
// on node-a call one destination on node-b by authority on 18081; the
// outbound proxy routes to the service's h2 cluster, whose upstream TLS
// presents each source's own SVID (Envoy's certificate mapper on hashable
// filter state), and the inbound proxy on 18008 validates it and sets XFCC.
// The control is the same cluster whose h2 cluster presents one static
// certificate (#831): source B's requests arrive as A. The witness is the
// destination app's own record of the XFCC each request carried, and the
// proxies' counters; never the client.
package mtls

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
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

func TestMTLS(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "mtls")
}

// envBin names a directory of prebuilt binaries to run instead of building.
const envBin = "AETHER_MTLS_BIN"

const (
	scenario    = "../../fixtures/scenarios/mtls.yaml"
	trustDomain = "aether.test"
	meshDomain  = "mesh.test"
	namespace   = "demo"
	// echoTLSPort is the destination app's own mTLS port: the benchmark's
	// app-to-app baseline.
	echoTLSPort = 7443
)

// upstreamCert is how the h2 clusters choose their certificate.
type upstreamCert string

const (
	perSource  upstreamCert = "per-source"
	staticCert upstreamCert = "static"
	unhashed   upstreamCert = "unhashed-identity"
)

// rig holds the binaries, the shared CA every agent and the suite's own
// clients sign under, and one cluster per upstream-certificate mode.
type rig struct {
	bin      node.Binaries
	runRoot  string
	caDir    string
	ca       *identity.CA
	clusters map[upstreamCert]*node.Cluster
}

func newRig() (*rig, error) {
	root, err := node.ModuleRoot(".")
	if err != nil {
		return nil, err
	}
	runRoot := GinkgoT().TempDir()
	if dir := os.Getenv(redgreen.EnvReportDir); dir != "" {
		runRoot = filepath.Join(dir, "mtls-run")
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
	r := &rig{bin: bin, runRoot: runRoot, caDir: filepath.Join(runRoot, "ca"), clusters: map[upstreamCert]*node.Cluster{}}
	r.ca, err = identity.LoadOrCreateCA(r.caDir, identity.CAConfig{TrustDomain: trustDomain, MeshDomain: meshDomain})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// cluster brings up (once) the two-node cluster whose h2 clusters choose
// their certificate by mode.
func (r *rig) cluster(ctx context.Context, mode upstreamCert) (*node.Cluster, error) {
	if c := r.clusters[mode]; c != nil {
		return c, nil
	}
	dir := filepath.Join(r.runRoot, string(mode))
	echoTLS, err := r.echoTLS(dir)
	if err != nil {
		return nil, err
	}
	c, err := node.Up(ctx, node.Config{
		Scenario: scenario, Mode: constants.CaptureTProxy, Bin: r.bin, RunDir: dir,
		AgentArgs: []string{"--trust-domain", trustDomain, "--mesh-domain", meshDomain,
			"--ca-dir", r.caDir, "--access-log-dir", filepath.Join(dir, "access"), "--upstream-cert", string(mode),
			// This suite proves the HTTP/2 floor; east-west QUIC has its own.
			"--mesh-transport", "h2"},
		EchoTLS: echoTLS,
		Logf:    func(f string, a ...any) { GinkgoWriter.Printf(f+"\n", a...) },
	})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the %s cluster: %w", mode, err)
	}
	r.clusters[mode] = c
	// The proxies append their access logs here; like Envoy they open the
	// file, not its directory.
	if err := os.MkdirAll(filepath.Join(dir, "access"), 0o755); err != nil {
		return nil, err
	}
	if err := waitHTTPListeners(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// echoTLS writes the destination app's own SVID (sa-dst, from the shared
// CA) and the bundle, for its mTLS port.
func (r *rig) echoTLS(dir string) (string, error) {
	files := filepath.Join(dir, "echo-tls")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return "", err
	}
	svid, err := r.svid("sa-dst", time.Hour, time.Time{})
	if err != nil {
		return "", err
	}
	chain, key, err := svid.Marshal()
	if err != nil {
		return "", err
	}
	bundle, err := r.ca.Bundle().Marshal()
	if err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{"svid.pem": chain, "key.pem": key, "bundle.pem": bundle} {
		if err := os.WriteFile(filepath.Join(files, name), b, 0o600); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d,%s,%s,%s,%s", echoTLSPort, filepath.Join(files, "svid.pem"), filepath.Join(files, "key.pem"), filepath.Join(files, "bundle.pem"), trustDomain), nil
}

func (r *rig) closeAll() error {
	var first error
	for mode, c := range r.clusters {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
		delete(r.clusters, mode)
	}
	return first
}

var _ = Describe("Identity on the mTLS HTTP/2 path: 18081 out, 18008 in", Ordered, func() {
	var (
		r      *rig
		result redgreen.Result
	)

	BeforeAll(func(ctx SpecContext) {
		suite := redgreen.Suite{Name: "mtls", Subject: "per-source SVIDs on the h2 upstream (certificate mapper on hashable filter state), mTLS at 18008"}
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

	// The control broken on purpose: given per-source selection it shows
	// no #831, and the suite must call the rig broken, naming the control.
	It("calls the rig broken when the control is given per-source selection", func(ctx SpecContext) {
		broken := redgreen.Run(ctx, redgreen.Suite{Name: "mtls", Subject: result.Subject,
			Cases: []redgreen.Case{staticControl(r, perSource)}})
		GinkgoWriter.Println(broken.Table())
		Expect(broken.Verdict).To(Equal(redgreen.BrokenRig), broken.Reason)
		Expect(broken.Cases[0].Reason).To(ContainSubstring("arrived as itself"))
	}, NodeTimeout(5*time.Minute))

	It("measures app → proxy → proxy → app over h2 against app → app over TLS", func(ctx SpecContext) {
		c, err := r.cluster(ctx, perSource)
		Expect(err).NotTo(HaveOccurred())
		b, err := benchmark(ctx, r, c)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(b.Table())
		AddReportEntry("benchmark", b.Table())
		Expect(b.write(r.runRoot)).To(Succeed())
	}, NodeTimeout(5*time.Minute))
})
