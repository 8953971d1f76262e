package phase0

import (
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
		{"C3 delivered", NotDelivered(false), toVIP, false, "delivered with ipi_addr"},
		{"C3 silent", NotDelivered(false), witness{}, true, ""},
		{"PORT never captured", NotDelivered(true), witness{}, false, "never captured"},
		{"PORT captured, refused", NotDelivered(true), witness{RuleHits: 1}, true, ""},
		{"REPLY reached", ReplyReaches(vipPort), witness{Delivered: true, Dst: VIP, ReplySent: true, ReplyDelivered: true, ReplySrc: vipPort}, true, ""},
		{"REPLY from the pod address", ReplyReaches(vipPort), witness{Delivered: true, Dst: VIP, ReplyDelivered: true, ReplySrc: netip.MustParseAddrPort("10.244.0.2:18082")}, false, "came from 10.244.0.2:18082"},
		{"REPLY first leg lost", ReplyReaches(vipPort), witness{}, false, "first leg"},
		{"NOCMSG refused", ReplyRefused(), witness{Delivered: true, Dst: VIP, ReplySent: true, NoPorts: 1}, true, ""},
		{"NOCMSG never sent", ReplyRefused(), toVIP, false, "no reply was sent"},
		{"NOCMSG accepted", ReplyRefused(), witness{Delivered: true, Dst: VIP, ReplySent: true, ReplyDelivered: true}, false, "accepted a reply"},
		{"NOCMSG lost before UDP", ReplyRefused(), witness{Delivered: true, Dst: VIP, ReplySent: true}, false, "never arrived"},
		{"MARK dropped", MarkDropped(), witness{RuleHits: 1}, true, ""},
		{"MARK silent without the rule", MarkDropped(), witness{}, false, "counted no packet"},
		{"MARK delivered", MarkDropped(), witness{Delivered: true}, false, "past the drop rule"},
		{"unmarked passes", MarkPasses(), witness{Delivered: true}, true, ""},
		{"unmarked dropped", MarkPasses(), witness{RuleHits: 1}, false, "nothing delivered"},
		{"unmarked counted", MarkPasses(), witness{Delivered: true, RuleHits: 1}, false, "drop rule counted 1"},
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

// The scenario table carries the controls the issue names, and MARK's
// expectation follows mesh/constants' evaluation of the marks, so the rig
// checks that evaluation against the kernel rather than restating it.
func TestScenarioTable(t *testing.T) {
	want := map[string]redgreen.Role{
		"C1": redgreen.Subject, "C2": redgreen.Control, "C3": redgreen.Control, "MAIN": redgreen.Subject,
		"PORT": redgreen.Subject, "REPLY": redgreen.Subject, "REPLY-NOCMSG": redgreen.Control,
		"MARK": redgreen.Subject, "MARK-UNMARKED": redgreen.Control,
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
		if sc.Name == "MARK" {
			dropped := KubeProxyDrop().Matches(constants.CapturePassthroughFwMark)
			if got := sc.Expect.Text == MarkDropped().Text; got != dropped {
				t.Errorf("MARK expects dropped=%v, constants say the drop mark matches %#x: %v", got, constants.CapturePassthroughFwMark, dropped)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("%d scenarios, want %d", len(seen), len(want))
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
	b.WriteString("\n# node netns, MARK MARK-UNMARKED\n")
	b.WriteString(Render(MaskedDropRuleset(KubeProxyDrop())))
	got := b.String()

	if err := golden.Check(filepath.Join("testdata", "rulesets.golden"), "rendered rule sets", []byte(got)); err != nil {
		t.Error(err)
	}
}

func itoa(i int) string   { return strconv.Itoa(i) }
func hex(v uint32) string { return "0x" + strconv.FormatUint(uint64(v), 16) }
