// Package provider is the suites' switch between cluster providers:
// AETHER_CLUSTER=netns (the default) runs a suite on the embedded netns
// cluster, AETHER_CLUSTER=kind on a kind cluster its TestMain sets up. The
// suite body is the same; only the provider differs.
package provider

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/cluster/kind"
)

// Main is a suite's TestMain. On netns it runs the tests; on kind it
// creates the suite's kind cluster first and destroys it after (kind.Run).
// A bad AETHER_CLUSTER runs nothing and says why.
func Main(m *testing.M, suite string) {
	os.Exit(run(m, suite))
}

// kept are the run folders Open made outside any report folder: removed
// when the suite passes, kept and named when it fails, so a failure's
// agent and proxy logs outlive the test's temporary folders.
var kept []string

func run(m *testing.M, suite string) int {
	rc := runSuite(m, suite)
	settleRunFolders(rc, suite, os.Stderr)
	return rc
}

// settleRunFolders removes the run folders Open made when the suite
// passed (rc 0) and names them on w when it did not.
func settleRunFolders(rc int, suite string, w io.Writer) {
	for _, dir := range kept {
		if rc == 0 {
			os.RemoveAll(dir)
			continue
		}
		fmt.Fprintf(w, "%s failed: its clusters' logs and records are kept in %s\n", suite, dir)
	}
	kept = nil
}

func runSuite(m *testing.M, suite string) int {
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

// EmbeddedMain is the TestMain of a suite that needs what only the
// embedded netns cluster offers (agents restarted under their proxies,
// pods leaving their node, a node's state files, sockets marked inside a
// pod): it is not one of make e2e's suites, and on any other provider it
// runs nothing and says why, rather than fail every row as a broken rig.
func EmbeddedMain(m *testing.M, suite, needs string) {
	os.Exit(runEmbedded(m, suite, needs))
}

// tests is what a TestMain runs: *testing.M.
type tests interface{ Run() int }

func runEmbedded(m tests, suite, needs string) int {
	rc := embedded(m, suite, needs)
	settleRunFolders(rc, suite, os.Stderr)
	return rc
}

func embedded(m tests, suite, needs string) int {
	name, err := cluster.Selected()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", suite, err)
		return 2
	}
	if name != cluster.Netns {
		fmt.Fprintf(os.Stderr, "%s runs only on the embedded netns cluster (it needs %s); AETHER_CLUSTER=%s cannot run it\n", suite, needs, name)
		return 2
	}
	return m.Run()
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

// Open is what every suite's rig starts from: the folder its clusters run
// in (beside the report when AETHER_REPORT_DIR is set, so their logs and
// records stay with it; else a temporary folder Main keeps when the suite
// fails) and the provider. On netns it needs the capabilities and the
// binaries: those in the folder envBin names, else one build shared
// across runs and suites (node.BuildShared).
func Open(suite, envBin string) (cluster.Provider, string, error) {
	var runRoot string
	if dir := os.Getenv(redgreen.EnvReportDir); dir != "" {
		runRoot = filepath.Join(dir, suite+"-run")
		if err := os.RemoveAll(runRoot); err != nil {
			return nil, "", fmt.Errorf("failed to clear %s: %w", runRoot, err)
		}
	} else {
		var err error
		if runRoot, err = os.MkdirTemp("", "aether-"+suite+"-run-"); err != nil {
			return nil, "", fmt.Errorf("failed to make the run folder: %w", err)
		}
		kept = append(kept, runRoot)
	}
	p, err := Get(func() (cluster.Provider, error) {
		if why := privileged.Missing(privileged.NetAdmin, privileged.SysAdmin); why != "" {
			return nil, fmt.Errorf("skipped: %s", why)
		}
		root, err := node.ModuleRoot(".")
		if err != nil {
			return nil, err
		}
		bin := node.Binaries{Dir: os.Getenv(envBin), Node: filepath.Join(os.Getenv(envBin), "aether-node")}
		if bin.Dir == "" {
			if bin, err = node.BuildShared(root, "ptp", "static", "aether-cni", "aether-agent", "aether-proxy", "aether-node"); err != nil {
				return nil, fmt.Errorf("failed to build the binaries: %w", err)
			}
		}
		return cluster.NetnsProvider{Bin: bin}, nil
	})
	return p, runRoot, err
}
