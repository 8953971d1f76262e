// Package provider is the suites' switch between cluster providers:
// AETHER_CLUSTER=netns (the default) runs a suite on the embedded netns
// cluster, AETHER_CLUSTER=kind on a kind cluster its TestMain sets up. The
// suite body is the same; only the provider differs.
package provider

import (
	"fmt"
	"os"
	"testing"

	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/cluster/kind"
)

// Main is a suite's TestMain. On netns it runs the tests; on kind it
// creates the suite's kind cluster first and destroys it after (kind.Run).
// A bad AETHER_CLUSTER runs nothing and says why.
func Main(m *testing.M, suite string) {
	os.Exit(run(m, suite))
}

func run(m *testing.M, suite string) int {
	name, err := cluster.Selected()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		return 2
	}
	if name == cluster.Netns {
		return m.Run()
	}
	o, err := kind.OptionsFromEnv(suite)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s on kind: %v\n", suite, err)
		return 1
	}
	return kind.Run(m, o)
}

// Get returns the selected provider; netns builds the netns one (it needs
// binaries and privileges only the suite knows how to find).
func Get(netns func() (cluster.Provider, error)) (cluster.Provider, error) {
	name, err := cluster.Selected()
	if err != nil {
		return nil, err
	}
	if name == cluster.Kind {
		return kind.Current()
	}
	return netns()
}
