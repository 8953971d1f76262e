package phase0

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
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
	res, err := Run(redgreen.Announcing(context.Background()), Scenarios())
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

// TestBrokenControlsAreBrokenRigs breaks each control on purpose, mostly by
// giving it its subject's configuration (C2 instead installs nothing, as
// in the seed's first run). The rig must report a broken rig naming that
// control, and the row must fail on the control's own signature check, not
// on a probe error: the control is measured and found not to fail.
func TestBrokenControlsAreBrokenRigs(t *testing.T) {
	privileged.Require(t)
	for _, c := range []struct {
		control string
		brk     func(*Scenario)
		reason  string
	}{
		{"C2", func(s *Scenario) { s.Capture = CaptureNone }, "nothing delivered"},
		{"C3", func(s *Scenario) { s.Capture = CaptureDivert }, "delivered with ipi_addr 10.250.0.7"},
		{"REPLY-NOCMSG", func(s *Scenario) { s.Reply = ReplyPktinfo }, "the connected client accepted a reply from 10.250.0.7:18082"},
		{"MARK-NODE", func(s *Scenario) { s.EgressMark = constants.PassthroughMark(constants.NodeNetns) }, "past KUBE-FIREWALL"},
		{"MARK-POD-UNMARKED", func(s *Scenario) { s.EgressMark = constants.PassthroughMark(constants.PodNetns) }, "let the datagram to a captured port through"},
	} {
		t.Run(c.control, func(t *testing.T) {
			t.Parallel()
			sc := scenarioNamed(t, c.control)
			if sc.Role != redgreen.Control {
				t.Fatalf("%s is a %s, not a control", sc.Name, sc.Role)
			}
			c.brk(&sc)
			res, err := Run(context.Background(), []Scenario{sc})
			if err != nil {
				t.Errorf("tearing the rig down failed: %v", err)
			}
			if res.Verdict != redgreen.BrokenRig {
				t.Fatalf("with %s broken the verdict is %s (%s), want %s\n%s", c.control, res.Verdict, res.Reason, redgreen.BrokenRig, res.Table())
			}
			if want := "control " + c.control + " did not show its signature"; !strings.Contains(res.Reason, want) {
				t.Errorf("the broken-rig reason does not name %s: %s", c.control, res.Reason)
			}
			if len(res.Cases) != 1 || res.Cases[0].Matched || !strings.Contains(res.Cases[0].Reason, c.reason) {
				t.Errorf("broken %s row: %+v; want unmatched because %q", c.control, res.Cases, c.reason)
			}
		})
	}
}

func scenarioNamed(t *testing.T, name string) Scenario {
	t.Helper()
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("Scenarios has no %s", name)
	return Scenario{}
}

// TestArrivalCounterSeesAMark checks the witness MARK-POD relies on: the
// node's "arrived-marked" counter does count a marked datagram when one
// arrives. Over the node's own loopback a mark is not cleared, so a node
// socket with SO_MARK 0x1 (clear of KUBE-FIREWALL's bit) sending to the
// node's listener must move it, and not the unmarked one.
func TestArrivalCounterSeesAMark(t *testing.T) {
	privileged.Require(t)
	p, err := newPair("arrivals")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.close(); err != nil {
			t.Error(err)
		}
	})
	if err := Install(p.node, NodeRuleset(nodeListen)); err != nil {
		t.Fatal(err)
	}
	rx, err := transparent.ListenUDP(p.node.Path, nodeListen, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	tx, err := transparent.DialUDP(p.node.Path, netip.AddrPort{}, nodeListen, transparent.Options{Mark: 0x1})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if _, err := tx.Write([]byte("marked")); err != nil {
		t.Fatal(err)
	}
	got, _, err := readPayload(rx, "marked", deliveryWindow)
	if err != nil || !got {
		t.Fatalf("the node's own marked datagram was not delivered over loopback (err %v)", err)
	}
	ctrs, err := readCounters([]counter{{ctrArrivedMarked, p.node, chainArrivedMarked, 0}, {ctrArrivedPlain, p.node, chainArrivedPlain, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if ctrs[ctrArrivedMarked] != 1 || ctrs[ctrArrivedPlain] != 0 {
		t.Fatalf("arrival counters %v, want one marked arrival and no unmarked one", ctrs)
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
