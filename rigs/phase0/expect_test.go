package phase0

import (
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

// Each expectation must reject the witnesses that would make its case
// meaningless, above all C2's "nothing delivered", which the seed's first
// run accepted as a pass.
func TestExpectationsRejectWrongWitnesses(t *testing.T) {
	vipPort := netip.AddrPortFrom(VIP, DialPort)
	toVIP := witness{Delivered: true, Dst: VIP}
	ctr := func(kv ...any) map[string]uint64 {
		m := map[string]uint64{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = uint64(kv[i+1].(int))
		}
		return m
	}
	scrubbed := ctr(ctrPassthrough, 1, ctrArrivedPlain, 1)
	for _, c := range []struct {
		name   string
		expect Expect
		w      witness
		ok     bool
		reason string
	}{
		{"C2 sees the rewritten address", DeliveredTo(Loopback), witness{Delivered: true, Dst: Loopback}, true, ""},
		{"C2 with nothing delivered", DeliveredTo(Loopback), witness{}, false, "nothing delivered"},
		{"C2 seeing the VIP", DeliveredTo(Loopback), toVIP, false, "ipi_addr is 10.250.0.7"},
		{"C1 seeing the rewritten address", DeliveredTo(VIP), witness{Delivered: true, Dst: Loopback}, false, "want 10.250.0.7"},
		{"C3 delivered", LeftPodUndelivered(), witness{Delivered: true, Dst: VIP, Counters: ctr(ctrArrivedPlain, 1)}, false, "delivered with ipi_addr"},
		{"C3 silent, left the pod", LeftPodUndelivered(), witness{Counters: ctr(ctrArrivedPlain, 1)}, true, ""},
		{"C3 silent, never left the pod", LeftPodUndelivered(), witness{}, false, "never left the pod"},
		{"C3 silent, arrived marked", LeftPodUndelivered(), witness{Counters: ctr(ctrArrivedMarked, 1)}, false, "never left the pod"},
		{"PORT never captured", CapturedUndelivered(), witness{}, false, "never captured"},
		{"PORT captured, refused", CapturedUndelivered(), witness{Counters: ctr(ctrCapture, 1)}, true, ""},
		{"PORT delivered", CapturedUndelivered(), witness{Delivered: true, Dst: VIP, Counters: ctr(ctrCapture, 1)}, false, "delivered with ipi_addr"},
		{"REPLY reached", ReplyReaches(vipPort), witness{Delivered: true, Dst: VIP, ReplySent: true, ReplyDelivered: true, ReplySrc: vipPort}, true, ""},
		{"REPLY from the pod address", ReplyReaches(vipPort), witness{Delivered: true, Dst: VIP, ReplyDelivered: true, ReplySrc: netip.MustParseAddrPort("10.244.0.2:18082")}, false, "came from 10.244.0.2:18082"},
		{"REPLY first leg lost", ReplyReaches(vipPort), witness{}, false, "first leg"},
		{"NOCMSG refused", ReplyRefused(), witness{Delivered: true, Dst: VIP, ReplySent: true, NoPorts: 1}, true, ""},
		{"NOCMSG never sent", ReplyRefused(), toVIP, false, "no reply was sent"},
		{"NOCMSG accepted", ReplyRefused(), witness{Delivered: true, Dst: VIP, ReplySent: true, ReplyDelivered: true}, false, "accepted a reply"},
		{"NOCMSG lost before UDP", ReplyRefused(), witness{Delivered: true, Dst: VIP, ReplySent: true}, false, "never arrived"},
		{"MARK-NODE dropped", DroppedByFirewall(), witness{Counters: ctr(ctrFirewallOutput, 1)}, true, ""},
		{"MARK-NODE silent without the rule", DroppedByFirewall(), witness{}, false, "counted no packet"},
		{"MARK-NODE silent, input counted", DroppedByFirewall(), witness{Counters: ctr(ctrFirewallInput, 1)}, false, "counted no packet"},
		{"MARK-NODE delivered", DroppedByFirewall(), witness{Delivered: true}, false, "past KUBE-FIREWALL"},
		{"MARK passes", PassesNodeRules(), witness{Delivered: true}, true, ""},
		{"MARK dropped", PassesNodeRules(), witness{Counters: ctr(ctrFirewallOutput, 1)}, false, "nothing delivered"},
		{"MARK counted", PassesNodeRules(), witness{Delivered: true, Counters: ctr(ctrFirewallOutput, 1)}, false, "counted 1"},
		{"POD-UNMARKED recaptured", Recaptured(), witness{Counters: ctr(ctrDivert, 1)}, true, ""},
		{"POD-UNMARKED delivered", Recaptured(), witness{Delivered: true, Counters: ctr(ctrDivert, 1)}, false, "let the datagram to a captured port through"},
		{"POD-UNMARKED lost elsewhere", Recaptured(), witness{}, false, "divert rule counted no packet"},
		{"POD-UNMARKED reached the node", Recaptured(), witness{Counters: ctr(ctrDivert, 1, ctrArrivedPlain, 1)}, false, "node counted 1 arrival"},
		{"MARK-POD scrubbed", ScrubbedAtVeth(), witness{Delivered: true, Counters: scrubbed}, true, ""},
		{"MARK-POD mark survived", ScrubbedAtVeth(), witness{Delivered: true, Counters: ctr(ctrPassthrough, 1, ctrArrivedMarked, 1)}, false, "crossed the veth"},
		{"MARK-POD diverted", ScrubbedAtVeth(), witness{Counters: ctr(ctrDivert, 1)}, false, "passthrough rule counted nothing"},
		{"MARK-POD dropped on input", ScrubbedAtVeth(), witness{Counters: ctr(ctrPassthrough, 1, ctrArrivedPlain, 1, ctrFirewallInput, 1)}, false, "input drop counted 1"},
		{"MARK-POD never delivered", ScrubbedAtVeth(), witness{Counters: scrubbed}, false, "nothing delivered"},
		{"MARK-POD never arrived", ScrubbedAtVeth(), witness{Delivered: true, Counters: ctr(ctrPassthrough, 1)}, false, "no unmarked arrival"},
		{"no check", Expect{Text: "x"}, toVIP, false, "no check"},
	} {
		err := c.expect.Check(c.w)
		if c.ok && err != nil {
			t.Errorf("%s: rejected: %v", c.name, err)
		}
		if !c.ok && (err == nil || !strings.Contains(err.Error(), c.reason)) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.reason)
		}
	}
}

// The scenario table carries the controls the issue names, each beside the
// subject it is the control of, and every expectation is declared, not
// derived from the marks under test: MARK-NODE expects a drop and MARK a
// pass whatever mesh/constants says.
func TestScenarioTable(t *testing.T) {
	want := map[string]redgreen.Role{
		"C1": redgreen.Subject, "C2": redgreen.Control, "C3": redgreen.Control, "MAIN": redgreen.Subject,
		"PORT": redgreen.Subject, "REPLY": redgreen.Subject, "REPLY-NOCMSG": redgreen.Control,
		"MARK-NODE": redgreen.Control, "MARK": redgreen.Subject, "MARK-POD-UNMARKED": redgreen.Control, "MARK-POD": redgreen.Subject,
	}
	expects := map[string]string{
		"C3": LeftPodUndelivered().Text, "MARK-NODE": DroppedByFirewall().Text, "MARK": PassesNodeRules().Text,
		"MARK-POD-UNMARKED": Recaptured().Text, "MARK-POD": ScrubbedAtVeth().Text,
	}
	seen := map[string]bool{}
	for _, sc := range Scenarios() {
		if seen[sc.Name] {
			t.Errorf("scenario %s appears twice", sc.Name)
		}
		seen[sc.Name] = true
		role, ok := want[sc.Name]
		if !ok {
			t.Errorf("unexpected scenario %s", sc.Name)
			continue
		}
		if sc.Role != role {
			t.Errorf("%s is a %s, want %s", sc.Name, sc.Role, role)
		}
		if e, ok := expects[sc.Name]; ok && sc.Expect.Text != e {
			t.Errorf("%s expects %q, want %q", sc.Name, sc.Expect.Text, e)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d scenarios, want %d", len(seen), len(want))
	}
	// The control is 038's placement and value: the passthrough mark on a
	// node-netns socket. Its subject is the same socket as the proxy makes
	// it now.
	for _, sc := range Scenarios() {
		if sc.Name == "MARK-NODE" && (sc.Sender != constants.NodeNetns || sc.EgressMark != 0xae7e) {
			t.Errorf("MARK-NODE sends SO_MARK %#x from the %s netns, want 0xae7e from the node netns", sc.EgressMark, sc.Sender)
		}
	}
}

// The rule sets the rig installs, in nft syntax, as testdata/rulesets.golden.
// REFRESH_GOLDEN=true rewrites the file; otherwise a change shows as a diff.
func TestRulesetsGolden(t *testing.T) {
	var b strings.Builder
	b.WriteString("# pod netns, C1 MAIN PORT REPLY REPLY-NOCMSG (plus the ip rule and local route below)\n")
	b.WriteString(Render(DivertRuleset(DialPort)))
	r := divertRule()
	rt := divertRoute(1)
	b.WriteString("ip rule: priority " + itoa(r.Priority) + " fwmark " + hex(r.Mark) + " lookup " + itoa(r.Table) + "\n")
	b.WriteString("ip route: local default dev lo table " + itoa(rt.Table) + "\n")
	b.WriteString("\n# pod netns, C2\n")
	b.WriteString(Render(RedirectRuleset(DialPort)))
	b.WriteString("\n# node netns, every capture case (C3's witness)\n")
	b.WriteString(Render(PeerRuleset()))
	b.WriteString("\n# node netns, MARK-NODE MARK MARK-POD-UNMARKED MARK-POD (the pod netns has the divert rule set above)\n")
	b.WriteString(Render(NodeRuleset(nodeListen)))
	got := b.String()

	if err := golden.Check(filepath.Join("testdata", "rulesets.golden"), "rendered rule sets", []byte(got)); err != nil {
		t.Error(err)
	}
}

func itoa(i int) string   { return strconv.Itoa(i) }
func hex(v uint32) string { return "0x" + strconv.FormatUint(uint64(v), 16) }

// A case's check reads its own evidence back: it judges the witness in
// it, and refuses an empty observation, evidence of another type and a
// witness another scenario measured, without panicking. The row records
// the evidence as the witness's facts.
func TestCheckReadsTheCasesEvidence(t *testing.T) {
	c1, c2 := scenarioNamed(t, "C1"), scenarioNamed(t, "C2")
	toVIP := witness{Delivered: true, Dst: VIP, Counters: map[string]uint64{ctrCapture: 1}}
	check := New().caseFor(c1).Check
	if err := check(redgreen.Observation{Evidence: evidence{scenario: c1, witness: toVIP}}); err != nil {
		t.Errorf("C1's check rejected its own delivery to the VIP: %v", err)
	}
	for _, c := range []struct {
		name   string
		o      redgreen.Observation
		reason string
	}{
		{"empty", redgreen.Observation{}, "holds <nil> evidence"},
		{"a map", redgreen.Observation{Evidence: map[string]any{"delivered": true}}, "holds map[string]interface {} evidence"},
		{"C2's witness", redgreen.Observation{Evidence: evidence{scenario: c2, witness: toVIP}}, "the evidence is C2's, not C1's"},
		{"its own, nothing delivered", redgreen.Observation{Evidence: evidence{scenario: c1}}, "nothing delivered"},
	} {
		if err := check(c.o); err == nil || !strings.Contains(err.Error(), c.reason) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.reason)
		}
	}
	b, err := json.Marshal(evidence{scenario: c1, witness: toVIP})
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(toVIP.facts(c1))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != string(want) {
		t.Errorf("the evidence records %s, want the witness's facts %s", b, want)
	}
}
