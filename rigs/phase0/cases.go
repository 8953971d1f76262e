// Package phase0 is proposal 038's Phase 0 spike rebuilt as a privileged,
// self-validating rig: in fresh pod namespaces it establishes, red then
// green, the kernel facts the capture path rests on (mark-and-divert keeps
// the ClusterIP in ipi_addr, REDIRECT loses it, a socket created via setns
// keeps it when read from elsewhere, the port is not a free variable, a
// reply needs ipi_spec_dst), and shows where the passthrough mark may be
// set: on a node-netns socket kube-proxy's KUBE-FIREWALL drops it; on a
// pod-netns socket the capture chain reads it and the veth clears it before
// any node rule can.
//
// Every case's verdict comes from the receiving socket's own record (its
// IP_PKTINFO) and kernel counters, never from the sender.
package phase0

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

// SuiteName is the name the rig's result is written under.
const SuiteName = "phase0"

var (
	// VIP is the ClusterIP the client dials; no interface holds it.
	VIP = netip.MustParseAddr("10.250.0.7")
	// Loopback is where nftables REDIRECT sends locally originated traffic.
	Loopback = netip.MustParseAddr("127.0.0.1")
	// DialPort is the port every capture case dials: the L4 mesh spelling.
	DialPort = constants.ProxyL4OutboundPort
)

// Capture is the capture configuration a case installs in its pod netns.
type Capture int

const (
	CaptureNone     Capture = iota // no rule at all
	CaptureDivert                  // route-chain mark + ip rule + local route
	CaptureRedirect                // nat output REDIRECT
)

func (c Capture) String() string {
	switch c {
	case CaptureNone:
		return "none"
	case CaptureDivert:
		return "mark-and-divert"
	case CaptureRedirect:
		return "redirect"
	}
	return fmt.Sprintf("capture(%d)", int(c))
}

// Reply says whether, and how, the capture listener answers.
type Reply int

const (
	ReplyNone    Reply = iota
	ReplyPktinfo       // IP_PKTINFO ipi_spec_dst = the received ipi_addr
	ReplyBare          // no control message: the kernel picks the source
)

// Kind selects the probe a scenario runs.
type Kind int

const (
	// KindCapture: a client in the pod dials VIP:DialPort and a listener in
	// the pod is the witness.
	KindCapture Kind = iota
	// KindMarkEgress: a socket with SO_MARK EgressMark, made in the pod or
	// the node netns, sends across the veth to a receiver on the other
	// side; the node runs kube-proxy's rules and the pod the capture chain.
	KindMarkEgress
)

// Scenario is one Phase 0 case: its configuration and its expected
// signature, declared apart from the probe that measures it.
type Scenario struct {
	Name        string
	Role        redgreen.Role
	Description string
	Kind        Kind

	Capture      Capture
	ListenPort   uint16
	ReadFromRoot bool // create the listener via setns, read it from the rig's own netns
	Reply        Reply

	Sender     constants.Netns // KindMarkEgress: where the sending socket is made
	EgressMark uint32          // KindMarkEgress: the sender's SO_MARK

	Expect Expect
}

// Scenarios are the Phase 0 cases, controls included. The MARK cases take
// their configuration from the product (constants.PassthroughMark, the
// mark the proxy gives a socket in each netns); their expectations are the
// rig's own.
func Scenarios() []Scenario {
	return []Scenario{
		{Name: "C1", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort,
			Description: "socket created and read in the pod netns, mark-and-divert",
			Expect:      DeliveredTo(VIP)},
		{Name: "C2", Role: redgreen.Control, Kind: KindCapture, Capture: CaptureRedirect, ListenPort: DialPort,
			Description: "nftables REDIRECT, read in the pod netns: ipi_addr tracks the real header",
			Expect:      DeliveredTo(Loopback)},
		{Name: "C3", Role: redgreen.Control, Kind: KindCapture, Capture: CaptureNone, ListenPort: DialPort,
			Description: "no capture rule: the datagram leaves by the pod's default route",
			Expect:      LeftPodUndelivered()},
		{Name: "MAIN", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort, ReadFromRoot: true,
			Description: "socket created in the pod netns via setns, read from the rig's own netns",
			Expect:      DeliveredTo(VIP)},
		{Name: "PORT", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort + 1,
			Description: "divert preserves the dport; a listener on another port gets nothing",
			Expect:      CapturedUndelivered()},
		{Name: "REPLY", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort, Reply: ReplyPktinfo,
			Description: "reply with ipi_spec_dst = VIP from the bound port reaches a connected client",
			Expect:      ReplyReaches(netip.AddrPortFrom(VIP, DialPort))},
		{Name: "REPLY-NOCMSG", Role: redgreen.Control, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort, Reply: ReplyBare,
			Description: "the same reply without the cmsg: the connected client drops it",
			Expect:      ReplyRefused()},
		{Name: "MARK-NODE", Role: redgreen.Control, Kind: KindMarkEgress, Sender: constants.NodeNetns, EgressMark: constants.CapturePassthroughFwMark,
			Description: fmt.Sprintf("proposal 038's placement: SO_MARK %#x on the proxy's node-netns egress, kube-proxy node rules", constants.CapturePassthroughFwMark),
			Expect:      DroppedByFirewall()},
		{Name: "MARK", Role: redgreen.Subject, Kind: KindMarkEgress, Sender: constants.NodeNetns, EgressMark: constants.PassthroughMark(constants.NodeNetns),
			Description: fmt.Sprintf("the proxy's node-netns egress as it is made now (SO_MARK %#x), kube-proxy node rules", constants.PassthroughMark(constants.NodeNetns)),
			Expect:      PassesNodeRules()},
		{Name: "MARK-POD-UNMARKED", Role: redgreen.Control, Kind: KindMarkEgress, Sender: constants.PodNetns, EgressMark: 0,
			Description: "a socket made in the pod netns without a mark, to a captured port: the capture chain takes it back",
			Expect:      Recaptured()},
		{Name: "MARK-POD", Role: redgreen.Subject, Kind: KindMarkEgress, Sender: constants.PodNetns, EgressMark: constants.PassthroughMark(constants.PodNetns),
			Description: fmt.Sprintf("a socket made in the pod netns with SO_MARK %#x (constants.PassthroughMark), to a captured port: passes capture, reaches the node without its mark", constants.PassthroughMark(constants.PodNetns)),
			Expect:      ScrubbedAtVeth()},
	}
}

// witness is what the receiving side and the kernel recorded for one case.
type witness struct {
	Delivered bool
	Dst       netip.Addr     // the listener's ipi_addr
	OrigDst   netip.AddrPort // IP_ORIGDSTADDR
	Src       netip.AddrPort

	PodNetns    uint64 // inode of the pod netns
	SocketNetns uint64 // inode of the listener socket's netns (SIOCGSKNS)
	ReaderNetns uint64 // inode of the netns of the thread that read it

	ReplySent      bool
	ReplyDelivered bool
	ReplySrc       netip.AddrPort

	// Counters are the packets each named nftables counter counted during
	// the probe, keyed by the ctr* names below.
	Counters map[string]uint64
	NoPorts  uint64 // UdpNoPorts increase in the receiving netns
	SendErr  string // the sender's errno, recorded but never the verdict
	SoMark   uint32 // the sender's SO_MARK as read back

	Window time.Duration // how long the receiver listened
}

// The counters a case may read, named as they appear in its facts.
const (
	ctrCapture        = "capture_rule"          // pod: the capture case's rule (divert or redirect)
	ctrPassthrough    = "pod_passthrough"       // pod: the capture chain's passthrough-mark return
	ctrDivert         = "pod_divert"            // pod: the capture chain's divert rule
	ctrArrivedPlain   = "node_arrived_unmarked" // node prerouting: the datagram arrived without a mark
	ctrArrivedMarked  = "node_arrived_marked"   // node prerouting: the datagram arrived with a mark
	ctrFirewallOutput = "kube_firewall_output"  // node: KUBE-FIREWALL drop on output
	ctrFirewallInput  = "kube_firewall_input"   // node: KUBE-FIREWALL drop on input
)

// Expect is a case's expected signature: text for the table and a check
// against the witness.
type Expect struct {
	Text          string
	delivers      bool // the first leg is expected to arrive
	replyDelivers bool
	check         func(witness) error
}

// Check reports whether w shows the expected signature.
func (e Expect) Check(w witness) error {
	if e.check == nil {
		return errors.New("the expectation has no check")
	}
	return e.check(w)
}

// DeliveredTo expects the listener to receive the datagram with ipi_addr
// dst.
func DeliveredTo(dst netip.Addr) Expect {
	return Expect{Text: "delivered, ipi_addr " + dst.String(), delivers: true, check: func(w witness) error {
		if !w.Delivered {
			return errors.New("nothing delivered")
		}
		if w.Dst != dst {
			return fmt.Errorf("ipi_addr is %s, want %s", w.Dst, dst)
		}
		return nil
	}}
}

// CapturedUndelivered is PORT's signature: the capture rule counted the
// datagram and the listener got nothing, so "nothing" means the socket
// lookup refused it, not that the rule never fired.
func CapturedUndelivered() Expect {
	return Expect{Text: "captured (rule counted it), nothing delivered", check: func(w witness) error {
		if w.Delivered {
			return fmt.Errorf("delivered with ipi_addr %s", w.Dst)
		}
		if w.Counters[ctrCapture] == 0 {
			return errors.New("nothing delivered, but the capture rule counted no packet: the datagram was never captured")
		}
		return nil
	}}
}

// LeftPodUndelivered is C3's signature: the listener gets nothing, and the
// node netns saw the datagram arrive, unmarked, on its way to the VIP: it
// left the pod by the normal route. Without that witness any broken path
// (a send that never happened, a veth that is down) would look the same.
func LeftPodUndelivered() Expect {
	return Expect{Text: "nothing delivered; the node saw it arrive (left by the default route)", check: func(w witness) error {
		if w.Delivered {
			return fmt.Errorf("delivered with ipi_addr %s", w.Dst)
		}
		if w.Counters[ctrArrivedPlain] == 0 {
			return fmt.Errorf("nothing delivered, but the node counted no arrival for %s:%d: the datagram never left the pod", VIP, DialPort)
		}
		return nil
	}}
}

// ReplyReaches expects the first leg delivered to the VIP and the reply to
// reach the connected client from src.
func ReplyReaches(src netip.AddrPort) Expect {
	return Expect{Text: "reply from " + src.String() + " reaches the connected client", delivers: true, replyDelivers: true,
		check: func(w witness) error {
			if err := DeliveredTo(src.Addr()).Check(w); err != nil {
				return fmt.Errorf("first leg: %w", err)
			}
			if !w.ReplyDelivered {
				return errors.New("the connected client received no reply")
			}
			if w.ReplySrc != src {
				return fmt.Errorf("the reply came from %s, want %s", w.ReplySrc, src)
			}
			return nil
		}}
}

// ReplyRefused expects the first leg delivered to the VIP, the reply sent,
// and the connected client to get nothing while the pod's UDP layer counts
// a datagram no socket took (the reply arrived and was refused).
func ReplyRefused() Expect {
	return Expect{Text: "reply sent, connected client gets nothing (UdpNoPorts)", delivers: true,
		check: func(w witness) error {
			if err := DeliveredTo(VIP).Check(w); err != nil {
				return fmt.Errorf("first leg: %w", err)
			}
			if !w.ReplySent {
				return errors.New("no reply was sent")
			}
			if w.ReplyDelivered {
				return fmt.Errorf("the connected client accepted a reply from %s", w.ReplySrc)
			}
			if w.NoPorts == 0 {
				return errors.New("the client got nothing, but UdpNoPorts did not move: the reply never arrived")
			}
			return nil
		}}
}

// DroppedByFirewall is MARK-NODE's signature: the receiver in the pod gets
// nothing and KUBE-FIREWALL's output drop counted the datagram.
func DroppedByFirewall() Expect {
	return Expect{Text: "dropped by KUBE-FIREWALL (mark & 0x8000 == 0x8000) on the node's output", check: func(w witness) error {
		if w.Delivered {
			return fmt.Errorf("delivered to %s past KUBE-FIREWALL", w.Dst)
		}
		if w.Counters[ctrFirewallOutput] == 0 {
			return errors.New("nothing delivered, but KUBE-FIREWALL's output drop counted no packet")
		}
		return nil
	}}
}

// PassesNodeRules expects the pod's receiver to get the datagram with
// KUBE-FIREWALL counting nothing.
func PassesNodeRules() Expect {
	return Expect{Text: "passes kube-proxy's node rules, delivered to the pod", delivers: true, check: func(w witness) error {
		if !w.Delivered {
			return fmt.Errorf("nothing delivered (KUBE-FIREWALL output counted %d, send error %q)", w.Counters[ctrFirewallOutput], w.SendErr)
		}
		if n := w.Counters[ctrFirewallOutput]; n != 0 {
			return fmt.Errorf("delivered, yet KUBE-FIREWALL's output drop counted %d packet(s)", n)
		}
		return nil
	}}
}

// Recaptured is MARK-POD-UNMARKED's signature: the pod's capture chain
// diverts the proxy's own datagram, so the node never sees it.
func Recaptured() Expect {
	return Expect{Text: "diverted by the pod's capture chain, never reaches the node", check: func(w witness) error {
		if w.Delivered {
			return errors.New("delivered to the node: the capture chain let the datagram to a captured port through")
		}
		if w.Counters[ctrDivert] == 0 {
			return errors.New("nothing delivered, but the divert rule counted no packet")
		}
		if n := w.Counters[ctrArrivedPlain] + w.Counters[ctrArrivedMarked]; n != 0 {
			return fmt.Errorf("diverted, yet the node counted %d arrival(s)", n)
		}
		return nil
	}}
}

// ScrubbedAtVeth is MARK-POD's signature: the capture chain let the
// datagram pass on its passthrough mark, the node saw it arrive with no
// mark at all, KUBE-FIREWALL's input drop counted nothing, and the node's
// receiver got it.
func ScrubbedAtVeth() Expect {
	return Expect{Text: "passes capture on its mark; arrives at the node unmarked; delivered", delivers: true, check: func(w witness) error {
		if w.Counters[ctrPassthrough] == 0 {
			return fmt.Errorf("the capture chain's passthrough rule counted nothing (divert counted %d): the mark was not seen in the pod", w.Counters[ctrDivert])
		}
		if n := w.Counters[ctrArrivedMarked]; n != 0 {
			return fmt.Errorf("the node counted %d arrival(s) still carrying a mark: the mark crossed the veth", n)
		}
		if w.Counters[ctrArrivedPlain] == 0 {
			return errors.New("the node counted no unmarked arrival")
		}
		if n := w.Counters[ctrFirewallInput]; n != 0 {
			return fmt.Errorf("KUBE-FIREWALL's input drop counted %d packet(s)", n)
		}
		if !w.Delivered {
			return fmt.Errorf("nothing delivered to the node's receiver (send error %q)", w.SendErr)
		}
		return nil
	}}
}

// evidence is a case's typed evidence: what its witness recorded and the
// scenario it was measured under, which its check reads back. The row
// records it as the witness's facts, whose keys depend on the scenario's
// kind, capture and reply.
type evidence struct {
	scenario Scenario
	witness  witness
}

func (e evidence) MarshalJSON() ([]byte, error) { return json.Marshal(e.witness.facts(e.scenario)) }

func (w witness) facts(sc Scenario) map[string]any {
	f := map[string]any{"delivered": w.Delivered}
	if w.Delivered {
		f["ipi_addr"] = w.Dst.String()
		f["orig_dst"] = w.OrigDst.String()
		f["src"] = w.Src.String()
	}
	for name, v := range w.Counters {
		f[name] = v
	}
	switch sc.Kind {
	case KindCapture:
		f["capture"] = sc.Capture.String()
		f["listen_port"] = sc.ListenPort
		f["pod_netns_inode"] = w.PodNetns
		f["socket_netns_inode"] = w.SocketNetns
		f["reader_netns_inode"] = w.ReaderNetns
		f["udp_no_ports_delta"] = w.NoPorts
		if sc.Reply != ReplyNone {
			f["reply_sent"] = w.ReplySent
			f["reply_delivered"] = w.ReplyDelivered
			if w.ReplyDelivered {
				f["reply_src"] = w.ReplySrc.String()
			}
		}
	case KindMarkEgress:
		f["sender_netns"] = string(sc.Sender)
		f["so_mark"] = fmt.Sprintf("%#x", w.SoMark)
		f["sender_error"] = w.SendErr
	}
	return f
}

func (w witness) summary(sc Scenario) string {
	var parts []string
	if w.Delivered {
		parts = append(parts, fmt.Sprintf("delivered, ipi_addr %s", w.Dst))
	} else {
		parts = append(parts, "nothing delivered in "+w.Window.String())
	}
	switch sc.Kind {
	case KindCapture:
		if sc.Capture != CaptureNone && !w.Delivered {
			parts = append(parts, fmt.Sprintf("rule counted %d", w.Counters[ctrCapture]))
		}
		if sc.Capture == CaptureNone {
			parts = append(parts, fmt.Sprintf("node saw %d arrive", w.Counters[ctrArrivedPlain]+w.Counters[ctrArrivedMarked]))
		}
		if w.NoPorts > 0 {
			parts = append(parts, fmt.Sprintf("UdpNoPorts +%d", w.NoPorts))
		}
		switch {
		case sc.Reply == ReplyNone:
		case w.ReplyDelivered:
			parts = append(parts, "reply from "+w.ReplySrc.String()+" reached the client")
		case w.ReplySent:
			parts = append(parts, "reply sent, client got nothing")
		}
	case KindMarkEgress:
		parts = append([]string{fmt.Sprintf("SO_MARK %#x from the %s netns", w.SoMark, sc.Sender)}, parts...)
		var moved []string
		for _, name := range slices.Sorted(maps.Keys(w.Counters)) {
			if v := w.Counters[name]; v != 0 {
				moved = append(moved, fmt.Sprintf("%s +%d", name, v))
			}
		}
		if len(moved) == 0 {
			moved = []string{"no counter moved"}
		}
		parts = append(parts, strings.Join(moved, " "))
		if w.SendErr != "" {
			parts = append(parts, "send: "+w.SendErr)
		}
	}
	return strings.Join(parts, ", ")
}
