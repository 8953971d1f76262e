package phase0

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

func TestMain(m *testing.M) {
	if privileged.Missing(privileged.NetAdmin, privileged.SysAdmin) == "" {
		if removed, err := netns.Sweep(); err != nil {
			fmt.Fprintf(os.Stderr, "phase0: sweeping stale namespaces failed: %v\n", err)
			os.Exit(1)
		} else if len(removed) > 0 {
			fmt.Fprintf(os.Stderr, "phase0: swept stale namespaces %v\n", removed)
		}
	}
	code := m.Run()
	if err := netns.Cleanup(); err != nil {
		fmt.Fprintf(os.Stderr, "phase0: cleanup failed: %v\n", err)
		code = 1
	}
	if err := netns.LeakCheck(); err != nil {
		fmt.Fprintf(os.Stderr, "phase0: %v\n", err)
		code = 1
	}
	os.Exit(code)
}

// TestPhase0 runs every case, controls first, and writes the suite result
// for `make gate`.
func TestPhase0(t *testing.T) {
	privileged.Require(t)
	res, err := Run(context.Background(), Scenarios())
	t.Log("\n" + res.Table())
	if err != nil {
		t.Errorf("tearing the rig down failed: %v", err)
	}
	if werr := res.Write(""); werr != nil {
		t.Error(werr)
	}
	if res.Verdict != redgreen.Pass {
		t.Fatalf("verdict %s: %s", res.Verdict, res.Reason)
	}
	for _, c := range res.Cases {
		if !c.Matched {
			t.Errorf("%s: %s", c.Name, c.Reason)
		}
	}
	if got, want := len(res.Cases), len(Scenarios()); got != want {
		t.Errorf("%d case rows, want %d", got, want)
	}
	t.Logf("facts: %s", dumpFacts(res))
}

func dumpFacts(res redgreen.Result) string {
	var b strings.Builder
	for _, c := range res.Cases {
		fmt.Fprintf(&b, "\n%s %v", c.Name, c.Facts)
	}
	return b.String()
}
