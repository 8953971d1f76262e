package constants

import (
	"strings"
	"testing"
)

func TestEastWestPortIsSharedAcrossTransports(t *testing.T) {
	if err := CheckPortRoles(PortRoles()); err != nil {
		t.Fatal(err)
	}
	want := map[string]uint16{"l4-mesh-spelling": 18082, "per-pod-inbound": 18008, "east-west-gateway": 18009}
	for _, r := range PortRoles() {
		if want[r.Name] != r.Port {
			t.Errorf("role %s: port %d, pinned %d", r.Name, r.Port, want[r.Name])
		}
		delete(want, r.Name)
	}
	if len(want) != 0 {
		t.Errorf("roles missing from the table: %v", want)
	}
	if HTTPOutboundPort != 18081 {
		t.Errorf("HTTP mesh spelling is %d, pinned 18081", HTTPOutboundPort)
	}
}

// The gate must be seen red: each wrong table names its specific fault.
func TestPortRoleGateRejectsWrongTables(t *testing.T) {
	both := []Transport{TCP, UDP}
	cases := []struct {
		name  string
		roles []PortRole
		want  string
	}{
		{"udp on its own number", []PortRole{
			{Name: "per-pod-inbound", Port: 18008, Transports: []Transport{TCP}},
			{Name: "per-pod-inbound", Port: 18010, Transports: []Transport{UDP}},
		}, "second number"},
		{"tcp only", []PortRole{{Name: "l4-mesh-spelling", Port: 18082, Transports: []Transport{TCP}}}, "does not serve udp"},
		{"udp only", []PortRole{{Name: "east-west-gateway", Port: 18009, Transports: []Transport{UDP}}}, "does not serve tcp"},
		{"two roles one port", []PortRole{
			{Name: "a", Port: 18009, Transports: both},
			{Name: "b", Port: 18009, Transports: both},
		}, "two roles"},
	}
	for _, c := range cases {
		err := CheckPortRoles(c.roles)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

func TestCapturedUDPPortsAreTheThreeRoles(t *testing.T) {
	udp := CapturedPorts()[UDP]
	if len(udp) != 3 {
		t.Fatalf("captured UDP ports %v, want exactly the three role numbers", udp)
	}
	roles := map[uint16]bool{}
	for _, r := range PortRoles() {
		roles[r.Port] = true
	}
	for _, p := range udp {
		if !roles[p] {
			t.Errorf("captured UDP port %d is not a role number", p)
		}
	}
}

func TestMarksDifferAndNeitherMasksTheOther(t *testing.T) {
	if CaptureDivertFwMark != 0xae71 || CapturePassthroughFwMark != 0xae7e {
		t.Fatalf("marks are %#x/%#x, pinned 0xae71/0xae7e", CaptureDivertFwMark, CapturePassthroughFwMark)
	}
	if err := CheckMarks(CaptureDivertFwMark, CapturePassthroughFwMark); err != nil {
		t.Fatal(err)
	}
}

func TestMarkGateRejectsWrongMarks(t *testing.T) {
	for _, c := range []struct {
		d, p uint32
		want string
	}{
		{0xae7e, 0xae7e, "both"},
		{0xae7f, 0xae7e, "divert mark 0xae7f is a bitmask superset"},
		{0xae70, 0xae7e, "passthrough mark 0xae7e is a bitmask superset"},
	} {
		err := CheckMarks(c.d, c.p)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckMarks(%#x, %#x) = %v, want an error containing %q", c.d, c.p, err, c.want)
		}
	}
}

// D2 as the kernel evaluates it: every mark aether sets is disjoint from
// the marks its netns carries. It holds because of where the marks are set
// (both only in the pod netns), not because of their values.
func TestMarkUsesAreDisjointFromTheirNetns(t *testing.T) {
	if err := CheckMarkUses(MarkUses(), ForeignMarks()); err != nil {
		t.Fatal(err)
	}
	want := map[string]Netns{"divert": PodNetns, "passthrough": PodNetns}
	for _, u := range MarkUses() {
		if want[u.Name] != u.Netns {
			t.Errorf("%s mark %#x is set in the %s netns, want only the %s netns", u.Name, u.Mark, u.Netns, want[u.Name])
		}
		delete(want, u.Name)
	}
	if len(want) != 0 {
		t.Errorf("marks missing from MarkUses: %v", want)
	}
	if m := PassthroughMark(NodeNetns); m != 0 {
		t.Errorf("a node-netns socket gets SO_MARK %#x, want none", m)
	}
}

// The gate must be seen red. Proposal 038's placement (0xae7e on the
// proxy's node-netns egress) collides with kube-proxy's drop bit and with
// Cilium's IPsec encrypt mark; the same value in the pod netns does not,
// and neither does a value that keeps clear of every node entry.
func TestMarkGateRedOnCollision(t *testing.T) {
	for _, c := range []struct {
		name string
		use  MarkUse
		want []string // substrings, each a collision the error must name
	}{
		{"038's placement", MarkUse{"passthrough", 0xae7e, NodeNetns}, []string{
			"kube-proxy KUBE-FIREWALL drop (0x8000/0x8000", "Cilium MARK_MAGIC_ENCRYPT (IPsec) (0xe00/0xf00"}},
		{"masquerade bit", MarkUse{"x", 0x4000, NodeNetns}, []string{"kube-proxy KUBE-POSTROUTING masquerade"}},
		{"a calico bit, tested clear", MarkUse{"x", 0x10000, NodeNetns}, []string{"Calico"}},
		{"aws connmark", MarkUse{"x", 0x80, NodeNetns}, []string{"AWS VPC CNI"}},
		{"ztunnel's own mark in a pod", MarkUse{"x", 0x539, PodNetns}, []string{"Istio ztunnel InpodMark"}},
		{"ztunnel's mark under a wider value", MarkUse{"x", 0xf111, PodNetns}, []string{"Istio ztunnel InpodTProxyMark"}},
	} {
		err := CheckMarkUses([]MarkUse{c.use}, ForeignMarks())
		if err == nil {
			t.Errorf("%s: %#x in the %s netns passed the gate", c.name, c.use.Mark, c.use.Netns)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v\ndoes not name %q", c.name, err, w)
			}
		}
	}
	for _, u := range []MarkUse{
		{"passthrough", 0xae7e, PodNetns},
		{"divert", 0xae71, PodNetns},
		{"clear of every node entry", 0x1, NodeNetns},
	} {
		if err := CheckMarkUses([]MarkUse{u}, ForeignMarks()); err != nil {
			t.Errorf("%#x in the %s netns: %v", u.Mark, u.Netns, err)
		}
	}
}

// The evaluator is the kernel's: m&mask == value, and a rule on clear bits
// (value 0) is only changed by a mark that sets one of them.
func TestMarkCollides(t *testing.T) {
	for _, c := range []struct {
		rule Mark
		m    uint32
		want bool
	}{
		{Mark{0x8000, 0x8000}, 0xae7e, true},
		{Mark{0x8000, 0x8000}, 0x7fff, false},
		{Mark{0x4000, 0x4000}, 0xae71, false},
		{Mark{0x0e00, 0x0f00}, 0xae71, true},
		{Mark{0x0a00, 0x0e00}, 0xae7e, false},
		{Mark{0, 0xffff0000}, 0xae7e, false},
		{Mark{0, 0xffff0000}, 0x20000, true},
		{Mark{0x539, 0xfff}, 0xae7e, false},
	} {
		if got := c.rule.Collides(c.m); got != c.want {
			t.Errorf("%#x/%#x collides with %#x = %v, want %v", c.rule.Value, c.rule.Mask, c.m, got, c.want)
		}
	}
}

// Every table entry names its owner, its use and its source, and is a
// well-formed match (value inside mask).
func TestForeignMarksAreCited(t *testing.T) {
	if len(ForeignMarks()) == 0 {
		t.Fatal("the foreign mark table is empty")
	}
	for _, f := range ForeignMarks() {
		if f.Owner == "" || f.Use == "" || f.Source == "" || (f.Netns != PodNetns && f.Netns != NodeNetns) {
			t.Errorf("entry %+v lacks an owner, use, source or netns", f)
		}
		if f.Value&^f.Mask != 0 || f.Mask == 0 {
			t.Errorf("%s %s: value %#x is not inside mask %#x; no packet could match", f.Owner, f.Use, f.Value, f.Mask)
		}
	}
}

func TestParseCaptureMode(t *testing.T) {
	for _, s := range []string{"tproxy", "redirect"} {
		if m, err := ParseCaptureMode(s); err != nil || string(m) != s {
			t.Errorf("ParseCaptureMode(%q) = %q, %v", s, m, err)
		}
	}
	for _, s := range []string{"", "TPROXY", "ebpf"} {
		_, err := ParseCaptureMode(s)
		if err == nil || !strings.Contains(err.Error(), `"`+s+`"`) {
			t.Errorf("ParseCaptureMode(%q) = %v, want an error naming the value", s, err)
		}
	}
}
