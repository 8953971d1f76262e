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
	suite := New().Suite(nil)
	err := suite.Setup(func() error {
		if why := privileged.Missing(privileged.NetAdmin, privileged.SysAdmin); why != "" {
			return fmt.Errorf("skipped: %s", why)
		}
		removed, err := netns.Sweep()
		if err != nil {
			return fmt.Errorf("sweeping stale namespaces failed: %w", err)
		}
		if len(removed) > 0 {
			fmt.Fprintf(os.Stderr, "phase0: swept stale namespaces %v\n", removed)
		}
		return nil
	})
	// Without privileges the tests skip (or fail, when required) on their
	// own; a failed sweep stops the package.
	if err != nil && privileged.Missing(privileged.NetAdmin, privileged.SysAdmin) == "" {
		fmt.Fprintf(os.Stderr, "phase0: %v\n", err)
		os.Exit(1)
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

// TestBrokenC2IsABrokenRig breaks the load-bearing control on purpose: C2
// installs nothing, as in the seed's first run, so it delivers nothing. The
// rig must report a broken rig, not a pass and not a plain failure.
func TestBrokenC2IsABrokenRig(t *testing.T) {
	privileged.Require(t)
	scs := Scenarios()
	broke := false
	for i := range scs {
		if scs[i].Name == "C2" {
			scs[i].Capture = CaptureNone
			broke = true
		}
	}
	if !broke {
		t.Fatal("Scenarios has no C2 to break")
	}
	res, err := Run(context.Background(), scs)
	if err != nil {
		t.Errorf("tearing the rig down failed: %v", err)
	}
	if res.Verdict != redgreen.BrokenRig {
		t.Fatalf("with C2 broken the verdict is %s (%s), want %s\n%s", res.Verdict, res.Reason, redgreen.BrokenRig, res.Table())
	}
	if !strings.Contains(res.Reason, "control C2 did not show its signature") {
		t.Errorf("the broken-rig reason does not name C2: %s", res.Reason)
	}
	for _, c := range res.Cases {
		switch {
		case c.Name == "C2" && (c.Matched || c.Facts["delivered"] != false):
			t.Errorf("broken C2 row: matched=%v facts=%v; want unmatched with nothing delivered", c.Matched, c.Facts)
		case c.Name != "C2" && !c.Matched:
			// The break must be the only thing wrong, or this test proves
			// nothing about C2.
			t.Errorf("%s did not match with only C2 broken: %s", c.Name, c.Reason)
		}
	}
}

// TestVerifySeesTampering installs each ruleset, then changes the kernel's
// copy behind the rig's back and asserts the listing-back check sees it.
func TestVerifySeesTampering(t *testing.T) {
	privileged.Require(t)
	n, err := netns.Create("p0-verify")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Delete(); err != nil {
			t.Error(err)
		}
	})

	if err := Verify(n, DivertRuleset(DialPort)); err == nil || !strings.Contains(err.Error(), "is not installed") {
		t.Fatalf("Verify on an empty netns: %v, want \"is not installed\"", err)
	}
	rs := DivertRuleset(DialPort)
	if err := Install(n, rs); err != nil {
		t.Fatal(err)
	}
	if err := Verify(n, rs); err != nil {
		t.Fatalf("Verify right after Install: %v", err)
	}
	if err := Verify(n, DivertRuleset(DialPort+1)); err == nil || !strings.Contains(err.Error(), "th dport == 18083") {
		t.Errorf("Verify against another port: %v, want a diff naming th dport == 18083", err)
	}
	if err := Install(n, rs); err == nil {
		t.Error("installing the same table twice succeeded; the second copy would double every rule")
	} else if err := VerifyNoTable(n, rigTable); err != nil {
		t.Errorf("a re-install that doubled every rule was not rolled back: %v", err)
	}

	// A kernel refusal raises and leaves no table: route chains exist only
	// on the output hook for IPv4.
	bad := Ruleset{Table: rigTable, Chains: []Chain{{Name: "bad", Type: rs.Chains[0].Type, Hook: 0, Priority: 0}}}
	if err := Install(n, bad); err == nil {
		t.Fatal("a route chain on prerouting installed without error")
	}
	if err := VerifyNoTable(n, rigTable); err != nil {
		t.Errorf("a refused install left a table behind: %v", err)
	}

	if err := Install(n, rs); err != nil {
		t.Fatal(err)
	}
	deleteRule(t, n, rs.Chains[0].Name, 0)
	if err := Verify(n, rs); err == nil || !strings.Contains(err.Error(), "holds 1 rule(s), want 2") {
		t.Errorf("Verify after deleting the passthrough rule: %v", err)
	}
	if err := Remove(n, rigTable); err != nil {
		t.Fatal(err)
	}

	if err := InstallDivertRoute(n); err != nil {
		t.Fatal(err)
	}
	h, err := n.Handle()
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := VerifyNoDivertRoute(n); err == nil {
		t.Error("VerifyNoDivertRoute passed with the rule and route installed")
	}
	if err := h.RuleDel(divertRule()); err != nil {
		t.Fatal(err)
	}
	if err := VerifyDivertRoute(n); err == nil || !strings.Contains(err.Error(), "0 ip rule(s)") {
		t.Errorf("VerifyDivertRoute after deleting the ip rule: %v", err)
	}
	// Half a divert (a route without its rule) is not "no divert".
	if err := VerifyNoDivertRoute(n); err == nil {
		t.Error("VerifyNoDivertRoute passed with the local route still in the capture table")
	}
}
