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

// D2 says both marks are disjoint from kube-proxy's masked marks. Evaluated
// as the kernel evaluates "mark & mask == value", that is false: bit 0x8000
// is set in both, so kube-proxy's drop mark matches both. This pins the
// finding (ARCHITECTURE.md, "The pinned numbers and marks"); the phase0
// rig shows what it means on the wire.
func TestForeignMarkCollisionsArePinned(t *testing.T) {
	got := ForeignCollisions(map[string]uint32{
		"divert":      CaptureDivertFwMark,
		"passthrough": CapturePassthroughFwMark,
	}, ForeignMarks())
	want := []string{
		"divert (0xae71) matches kube-proxy drop (0x8000/0x8000)",
		"passthrough (0xae7e) matches kube-proxy drop (0x8000/0x8000)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("collisions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The evaluator itself must be able to say "no match".
	if (Mark{Value: 0x4000, Mask: 0x4000}).Matches(0xae71) {
		t.Fatal("0xae71 must not match masquerade 0x4000/0x4000")
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
