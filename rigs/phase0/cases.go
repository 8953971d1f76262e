// Package phase0 is proposal 038's Phase 0 spike rebuilt as a privileged,
// self-validating rig: in fresh pod namespaces it establishes, red then
// green, the kernel facts the capture path rests on (mark-and-divert keeps
// the ClusterIP in ipi_addr, REDIRECT loses it, a socket created via setns
// keeps it when read from elsewhere, the port is not a free variable, a
// reply needs ipi_spec_dst) and answers whether a kube-proxy style
// `meta mark & 0x8000 == 0x8000 drop` rule drops the passthrough mark.
//
// Every case's verdict comes from the receiving socket's own record (its
// IP_PKTINFO) and kernel counters, never from the sender.
package phase0

import (
	"errors"
	"fmt"
	"net/netip"
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
	// KindMarkEgress: a socket in the node netns sends to the pod with
	// SO_MARK set, through a masked drop rule.
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

	EgressMark uint32 // KindMarkEgress: the sender's SO_MARK

	Expect Expect
}

// Scenarios are the Phase 0 cases, controls included.
func Scenarios() []Scenario {
	drop := KubeProxyDrop()
	markExpect := MarkPasses()
	if drop.Matches(constants.CapturePassthroughFwMark) {
		markExpect = MarkDropped()
	}
	return []Scenario{
		{Name: "C1", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort,
			Description: "socket created and read in the pod netns, mark-and-divert",
			Expect:      DeliveredTo(VIP)},
		{Name: "C2", Role: redgreen.Control, Kind: KindCapture, Capture: CaptureRedirect, ListenPort: DialPort,
			Description: "nftables REDIRECT, read in the pod netns: ipi_addr tracks the real header",
			Expect:      DeliveredTo(Loopback)},
		{Name: "C3", Role: redgreen.Control, Kind: KindCapture, Capture: CaptureNone, ListenPort: DialPort,
			Description: "no capture rule: delivery depends on the rule",
			Expect:      NotDelivered(false)},
		{Name: "MAIN", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort, ReadFromRoot: true,
			Description: "socket created in the pod netns via setns, read from the rig's own netns",
			Expect:      DeliveredTo(VIP)},
		{Name: "PORT", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort + 1,
			Description: "divert preserves the dport; a listener on another port gets nothing",
			Expect:      NotDelivered(true)},
		{Name: "REPLY", Role: redgreen.Subject, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort, Reply: ReplyPktinfo,
			Description: "reply with ipi_spec_dst = VIP from the bound port reaches a connected client",
			Expect:      ReplyReaches(netip.AddrPortFrom(VIP, DialPort))},
		{Name: "REPLY-NOCMSG", Role: redgreen.Control, Kind: KindCapture, Capture: CaptureDivert, ListenPort: DialPort, Reply: ReplyBare,
			Description: "the same reply without the cmsg: the connected client drops it",
			Expect:      ReplyRefused()},
		{Name: "MARK-UNMARKED", Role: redgreen.Control, Kind: KindMarkEgress, EgressMark: 0,
			Description: fmt.Sprintf("node netns with `meta mark & %#x == %#x drop`: the same socket unmarked passes", drop.Mask, drop.Value),
			Expect:      MarkPasses()},
		{Name: "MARK", Role: redgreen.Subject, Kind: KindMarkEgress, EgressMark: constants.CapturePassthroughFwMark,
			Description: fmt.Sprintf("node netns with `meta mark & %#x == %#x drop`: is SO_MARK %#x egress dropped?", drop.Mask, drop.Value, constants.CapturePassthroughFwMark),
			Expect:      markExpect},
	}
}

// KubeProxyDrop is kube-proxy's drop mark as mesh/constants records it.
func KubeProxyDrop() constants.Mark {
	for _, m := range constants.ForeignMarks() {
		if m.Name == "kube-proxy drop" {
			return m
		}
	}
	// constants pins this entry; its absence is a programming error.
	panic("mesh/constants.ForeignMarks has no \"kube-proxy drop\" entry")
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

	RuleHits uint64 // packets the case's counted rule matched during the probe
	NoPorts  uint64 // UdpNoPorts increase in the receiving netns
	SendErr  string // the sender's errno, recorded but never the verdict
	SoMark   uint32 // the sender's SO_MARK as read back

	Window time.Duration // how long the receiver listened
}

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

// NotDelivered expects the listener to receive nothing. afterCapture also
// requires the capture rule to have counted the datagram, so "nothing"
// means the socket lookup refused it, not that the rule never fired.
func NotDelivered(afterCapture bool) Expect {
	text := "nothing delivered"
	if afterCapture {
		text = "captured (rule counted it), nothing delivered"
	}
	return Expect{Text: text, check: func(w witness) error {
		if w.Delivered {
			return fmt.Errorf("delivered with ipi_addr %s", w.Dst)
		}
		if afterCapture && w.RuleHits == 0 {
			return errors.New("nothing delivered, but the capture rule counted no packet: the datagram was never captured")
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

// MarkDropped expects the receiver to get nothing and the masked drop rule
// to have counted the packet.
func MarkDropped() Expect {
	return Expect{Text: "dropped by the masked drop rule", check: func(w witness) error {
		if w.Delivered {
			return fmt.Errorf("delivered to %s past the drop rule", w.Dst)
		}
		if w.RuleHits == 0 {
			return errors.New("nothing delivered, but the drop rule counted no packet")
		}
		return nil
	}}
}

// MarkPasses expects the receiver to get the datagram and the drop rule to
// count nothing.
func MarkPasses() Expect {
	return Expect{Text: "passes the masked drop rule, delivered", delivers: true, check: func(w witness) error {
		if !w.Delivered {
			return fmt.Errorf("nothing delivered (drop rule counted %d, send error %q)", w.RuleHits, w.SendErr)
		}
		if w.RuleHits != 0 {
			return fmt.Errorf("delivered, yet the drop rule counted %d packet(s)", w.RuleHits)
		}
		return nil
	}}
}

func (w witness) facts(sc Scenario) map[string]any {
	f := map[string]any{"delivered": w.Delivered}
	if w.Delivered {
		f["ipi_addr"] = w.Dst.String()
		f["orig_dst"] = w.OrigDst.String()
		f["src"] = w.Src.String()
	}
	switch sc.Kind {
	case KindCapture:
		f["capture"] = sc.Capture.String()
		f["listen_port"] = sc.ListenPort
		f["pod_netns_inode"] = w.PodNetns
		f["socket_netns_inode"] = w.SocketNetns
		f["reader_netns_inode"] = w.ReaderNetns
		f["udp_no_ports_delta"] = w.NoPorts
		if sc.Capture != CaptureNone {
			f["rule_packets"] = w.RuleHits
		}
		if sc.Reply != ReplyNone {
			f["reply_sent"] = w.ReplySent
			f["reply_delivered"] = w.ReplyDelivered
			if w.ReplyDelivered {
				f["reply_src"] = w.ReplySrc.String()
			}
		}
	case KindMarkEgress:
		f["so_mark"] = fmt.Sprintf("%#x", w.SoMark)
		f["drop_rule_packets"] = w.RuleHits
		f["sender_error"] = w.SendErr
		drop := KubeProxyDrop()
		f["drop_rule"] = fmt.Sprintf("meta mark & %#x == %#x drop", drop.Mask, drop.Value)
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
			parts = append(parts, fmt.Sprintf("rule counted %d", w.RuleHits))
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
		verb := "passed"
		if !w.Delivered && w.RuleHits > 0 {
			verb = "DROPPED"
		}
		parts = append([]string{fmt.Sprintf("SO_MARK %#x %s", w.SoMark, verb)}, parts...)
		parts = append(parts, fmt.Sprintf("drop rule counted %d", w.RuleHits))
		if w.SendErr != "" {
			parts = append(parts, "send: "+w.SendErr)
		}
	}
	return strings.Join(parts, ", ")
}
