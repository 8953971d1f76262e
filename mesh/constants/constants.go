// Package constants holds the numbers the CNI, the agent and the data plane
// must agree on: the three port roles of proposal 038 (R3), the two firewall
// marks (D2) with the netns each is set in and the marks of other node
// components they must stay clear of, and the routing table the divert mark
// selects. Each is pinned by a test in this package; changing one is a
// mesh-wide, breaking change.
package constants

import "fmt"

// Transport names a layer-4 protocol a port role serves.
type Transport string

const (
	TCP Transport = "tcp"
	UDP Transport = "udp"
)

const (
	// ProxyL4OutboundPort is the L4 mesh spelling: raw TCP (the floor of
	// proposal 037) and plaintext UDP services. Renamed from
	// ProxyTCPOutboundPort by 038 Phase 1a; it is not a TCP-only spelling.
	ProxyL4OutboundPort uint16 = 18082

	// InboundPort is the per-pod inbound: mTLS HTTP/2 on TCP, QUIC with mTLS
	// on UDP.
	InboundPort uint16 = 18008

	// EastWestTunnelPort is the east-west gateway: the mTLS SNI tunnel on TCP,
	// QUIC on UDP.
	EastWestTunnelPort uint16 = 18009

	// HTTPOutboundPort is the HTTP mesh spelling: applications send plain
	// HTTP to <svc>.<ns>.<mesh-domain>:18081. TCP only.
	HTTPOutboundPort uint16 = 18081
)

const (
	// CaptureDivertFwMark is set in the pod netns on captured packets; an ip
	// rule sends it to CaptureRouteTable, whose local default route delivers
	// the packet to a transparent socket with its header intact (038 D2).
	CaptureDivertFwMark uint32 = 0xae71

	// CapturePassthroughFwMark is set (SO_MARK) on the proxy's own egress
	// from a pod netns so that the capture chain returns early and never
	// re-captures it. It is set nowhere else: see PassthroughMark.
	CapturePassthroughFwMark uint32 = 0xae7e

	// CaptureRouteTable is the routing table the divert mark looks up. It
	// holds a single "local default dev lo" route.
	CaptureRouteTable = 0xae7

	// CaptureRulePriority is the priority of the fwmark ip rule; it sits
	// before the main table (32766) so the divert wins.
	CaptureRulePriority = 100
)

// PortRole is one of the three mesh roles that R3 gives a single number for
// both transports.
type PortRole struct {
	Name       string
	Port       uint16
	Transports []Transport
}

// PortRoles is the role table R3 pins: one number per role, and every role
// serves both transports on it.
func PortRoles() []PortRole {
	both := []Transport{TCP, UDP}
	return []PortRole{
		{Name: "l4-mesh-spelling", Port: ProxyL4OutboundPort, Transports: both},
		{Name: "per-pod-inbound", Port: InboundPort, Transports: both},
		{Name: "east-west-gateway", Port: EastWestTunnelPort, Transports: both},
	}
}

// CapturedPorts lists, per transport, the destination ports the CNI captures
// in the pod netns. UDP is exactly the three role numbers (038 Phase 1b: "the
// three UDP ports are literals"); TCP is the two outbound spellings.
func CapturedPorts() map[Transport][]uint16 {
	return map[Transport][]uint16{
		TCP: {HTTPOutboundPort, ProxyL4OutboundPort},
		UDP: {ProxyL4OutboundPort, InboundPort, EastWestTunnelPort},
	}
}

// CaptureMode is how the pod netns captures mesh traffic; the CNI installs
// it and the agent configures the proxy for it, so both read the same value
// (038 R6: TCP can follow later as a flag flip over a tested path).
type CaptureMode string

const (
	// CaptureTProxy is mark-and-divert: the header reaches the proxy intact,
	// so the matcher's arms select a service by its ClusterIP.
	CaptureTProxy CaptureMode = "tproxy"
	// CaptureRedirect is nftables REDIRECT: the destination is rewritten to
	// loopback, no arm can match, and on_no_match carries everything to the
	// tie-break winner. It is the pre-038 behaviour, kept as every selection
	// suite's control.
	CaptureRedirect CaptureMode = "redirect"
)

// ParseCaptureMode reads a capture mode name.
func ParseCaptureMode(s string) (CaptureMode, error) {
	switch CaptureMode(s) {
	case CaptureTProxy, CaptureRedirect:
		return CaptureMode(s), nil
	}
	return "", fmt.Errorf("unknown capture mode %q: want %q or %q", s, CaptureTProxy, CaptureRedirect)
}
