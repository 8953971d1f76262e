package cni

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

func TestCNI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "aether CNI")
}

var _ = BeforeSuite(func() {
	dir, err := os.MkdirTemp("", "aether-cni-test-")
	Expect(err).NotTo(HaveOccurred())
	testAgentSocket = filepath.Join(dir, "cni.sock")
	DeferCleanup(os.RemoveAll, dir)
	// Only namespaces of dead runs go; parallel packages keep theirs.
	if privileged.Missing() == "" {
		_, err := netns.Sweep()
		Expect(err).NotTo(HaveOccurred())
	}
})

var _ = AfterSuite(func() {
	Expect(netns.Cleanup()).To(Succeed())
	Expect(netns.LeakCheck()).To(Succeed())
})
