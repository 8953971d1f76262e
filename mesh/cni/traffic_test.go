package cni

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

var (
	clusterIP  = netip.MustParseAddr("10.96.0.10")
	meshPort   = constants.ProxyL4OutboundPort
	vip        = netip.AddrPortFrom(clusterIP, meshPort)
	clusterIP6 = netip.MustParseAddr("fd00:96::a")
	vip6       = netip.AddrPortFrom(clusterIP6, meshPort)
)

// trafficRig is a pod with the plugin's rules installed in a given mode and
// a node that also answers on the ClusterIP, so traffic that is not
// captured has somewhere to arrive and be seen. sabotage makes every
// control install the subject's configuration instead of its own, for the
// test that breaks the controls on purpose.
type trafficRig struct {
	p        *podNet
	sabotage bool
}

// controlMode is the mode the REDIRECT controls install.
func (r *trafficRig) controlMode() constants.CaptureMode {
	if r.sabotage {
		return constants.CaptureTProxy
	}
	return constants.CaptureRedirect
}

// withoutReturn installs the tproxy set minus its first rule, the
// passthrough return (038 D2), lists it back, and runs fn.
func (r *trafficRig) withoutReturn(fn func() (redgreen.Observation, error)) (redgreen.Observation, error) {
	rs, err := Build(constants.CaptureTProxy, Pod{Addrs: r.p.addrs}, Options{})
	if err != nil {
		return redgreen.Observation{}, err
	}
	for i := range rs.Tables {
		c := &rs.Tables[i].Chains[0]
		if c.Rules[0] != (Rule{Mark: constants.CapturePassthroughFwMark, Action: ActionAccept}) {
			return redgreen.Observation{}, fmt.Errorf("chain %s %s starts with %+v, not the passthrough return", rs.Tables[i].Family, c.Name, c.Rules[0])
		}
		if !r.sabotage {
			c.Rules = slices.Clone(c.Rules[1:])
		}
	}
	in := &Installer{NetnsPath: r.p.pod.Path}
	if err := in.Install(rs); err != nil {
		return redgreen.Observation{}, err
	}
	defer func() { _ = in.Remove() }()
	if d, err := in.Verify(rs); err != nil || !d.None() {
		return redgreen.Observation{}, fmt.Errorf("the set without the return is not what the namespace holds before measuring: %v %v", d, err)
	}
	return fn()
}

func (r *trafficRig) withMode(mode constants.CaptureMode, fn func() (redgreen.Observation, error)) (redgreen.Observation, error) {
	a := cmdArgs(r.p.pod.Path, netConf("1.1.0", prevResult(r.p.pod.Path, r.p.addrs), map[string]any{"captureMode": string(mode)}))
	if _, _, err := testutils.CmdAddWithArgs(a, func() error { return Add(a) }); err != nil {
		return redgreen.Observation{}, fmt.Errorf("ADD in %s mode: %w", mode, err)
	}
	defer func() { _ = testutils.CmdDelWithArgs(a, func() error { return Del(a) }) }()
	// Listed back before anything is measured: a rule set that did not
	// install would make the measurement mean nothing.
	if err := testutils.CmdCheckWithArgs(a, func() error { return Check(a) }); err != nil {
		return redgreen.Observation{}, fmt.Errorf("CHECK in %s mode before measuring: %w", mode, err)
	}
	return fn()
}

// udpToVIP sends one datagram from the pod to the ClusterIP and reports
// what a transparent listener in the pod netns saw: the kernel's metadata
// and the payload it got.
func (r *trafficRig) udpToVIP(payload string, vip netip.AddrPort) (transparent.Meta, string, error) {
	unspec := netip.IPv4Unspecified()
	if vip.Addr().Is6() {
		unspec = netip.IPv6Unspecified()
	}
	ln, err := transparent.ListenUDP(r.p.pod.Path, netip.AddrPortFrom(unspec, meshPort), transparent.Options{Transparent: true})
	if err != nil {
		return transparent.Meta{}, "", err
	}
	defer ln.Close()
	cl, err := transparent.DialUDP(r.p.pod.Path, netip.AddrPort{}, vip, transparent.Options{})
	if err != nil {
		return transparent.Meta{}, "", err
	}
	defer cl.Close()
	if _, err := cl.Write([]byte(payload)); err != nil {
		return transparent.Meta{}, "", fmt.Errorf("failed to send to %s: %w", vip, err)
	}
	_ = ln.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, m, err := ln.ReadDatagram(buf)
	if err != nil {
		return m, "", fmt.Errorf("the pod's capture listener received nothing: %w", err)
	}
	return m, string(buf[:n]), nil
}

// udpCase measures one datagram to vip in mode. Its signature is positive:
// the payload sent arrived at the pod's listener, and the kernel reported
// want as ipi_addr and want:18082 as the original destination (the
// rewritten loopback for a control, the ClusterIP for a subject).
func (r *trafficRig) udpCase(name string, role redgreen.Role, mode constants.CaptureMode, vip netip.AddrPort, want netip.Addr, description, expect string) redgreen.Case {
	payload := name
	wantDst := netip.AddrPortFrom(want, vip.Port())
	return redgreen.Case{
		Name: name, Role: role, Description: description, Expect: expect,
		Run: func(context.Context) (redgreen.Observation, error) {
			return r.withMode(mode, func() (redgreen.Observation, error) {
				m, got, err := r.udpToVIP(payload, vip)
				return redgreen.Observation{
					Summary:  fmt.Sprintf("received %q, ipi_addr=%s origdst=%s", got, m.Dst, m.OrigDst),
					Witness:  "the pod listener's payload and IP_PKTINFO / IP_ORIGDSTADDR",
					Evidence: udpSeen{Received: got, IPIAddr: m.Dst.String(), OrigDst: m.OrigDst.String(), Src: m.Src.String()},
				}, err
			})
		},
		Check: func(o redgreen.Observation) error {
			f, err := redgreen.EvidenceOf[udpSeen](o)
			if err != nil {
				return err
			}
			if f.Received != payload || f.IPIAddr != want.String() || f.OrigDst != wantDst.String() {
				return fmt.Errorf("received %q with ipi_addr=%v orig_dst=%v, want %q with %s and %s",
					f.Received, f.IPIAddr, f.OrigDst, payload, want, wantDst)
			}
			return nil
		},
	}
}

// udpSeen is a UDP case's evidence: the payload the pod's listener got
// and the kernel's metadata for it.
type udpSeen struct {
	Received string `json:"received"`
	IPIAddr  string `json:"ipi_addr"`
	OrigDst  string `json:"orig_dst"`
	Src      string `json:"src"`
}

// tcpSeen is a TCP case's evidence: the accepted connection's local
// address (getsockname) and its peer.
type tcpSeen struct {
	Local string `json:"local"`
	Peer  string `json:"peer"`
}

// passthroughSeen is a passthrough case's evidence: what the node's
// listener and the pod's capture listener each got; NodeSawSrc is set
// only when a datagram reached the node.
type passthroughSeen struct {
	NodeGotMarked  bool   `json:"node_got_marked"`
	NodeSawSrc     string `json:"node_saw_src,omitempty"`
	PodGotMarked   bool   `json:"pod_got_marked"`
	PodGotUnmarked bool   `json:"pod_got_unmarked"`
}

// tcpCase measures one connect to vip in mode: accepted by the pod's
// listener with local address want.
func (r *trafficRig) tcpCase(name string, role redgreen.Role, mode constants.CaptureMode, want netip.AddrPort, description, expect string) redgreen.Case {
	return redgreen.Case{
		Name: name, Role: role, Description: description, Expect: expect,
		Run: func(ctx context.Context) (redgreen.Observation, error) {
			return r.withMode(mode, func() (redgreen.Observation, error) { return r.tcpToVIP(ctx) })
		},
		Check: func(o redgreen.Observation) error {
			f, err := redgreen.EvidenceOf[tcpSeen](o)
			if err != nil {
				return err
			}
			if f.Local != want.String() {
				return fmt.Errorf("accepted connection's local address is %v, want %s", f.Local, want)
			}
			return nil
		},
	}
}

func (r *trafficRig) suite() redgreen.Suite {
	loop4, loop6 := netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()
	return redgreen.Suite{
		Name:    "cni-capture",
		Subject: "aether-cni mark-and-divert capture in the pod netns (038 Phase 1 as shipped)",
		Cases: []redgreen.Case{
			r.udpCase("redirect-udp", redgreen.Control, r.controlMode(), vip, loop4,
				"captureMode=redirect: a datagram from the pod to 10.96.0.10:18082, nat output redirect to the same port",
				"delivered, ipi_addr = 127.0.0.1 and origdst = 127.0.0.1:18082 (rewritten), not the ClusterIP"),
			r.udpCase("redirect-udp6", redgreen.Control, r.controlMode(), vip6, loop6,
				"captureMode=redirect: a datagram from the pod to [fd00:96::a]:18082 (the ip6 nat table)",
				"delivered, ipi6_addr = ::1 and origdst = [::1]:18082 (rewritten), not the ClusterIP"),
			r.tcpCase("redirect-tcp", redgreen.Control, r.controlMode(), netip.AddrPortFrom(loop4, meshPort),
				"captureMode=redirect: a TCP connect from the pod to 10.96.0.10:18082",
				"accepted with local address 127.0.0.1:18082 (rewritten), not the ClusterIP"),
			{
				Name: "no-return-passthrough", Role: redgreen.Control,
				Description: "the tproxy set without its passthrough return: the proxy's own egress, SO_MARK 0xae7e, to 10.96.0.10:18082",
				Expect:      "captured: the pod listener gets the marked datagram (the proxy would loop), the node gets nothing",
				Run: func(context.Context) (redgreen.Observation, error) {
					return r.withoutReturn(r.passthrough)
				},
				Check: func(o redgreen.Observation) error {
					f, err := redgreen.EvidenceOf[passthroughSeen](o)
					if err != nil {
						return err
					}
					if !f.PodGotMarked || f.NodeGotMarked {
						return fmt.Errorf("pod got marked=%v, node got marked=%v; want true, false", f.PodGotMarked, f.NodeGotMarked)
					}
					return nil
				},
			},
			r.udpCase("tproxy-udp", redgreen.Subject, constants.CaptureTProxy, vip, clusterIP,
				"captureMode=tproxy: a datagram from the pod to 10.96.0.10:18082",
				"delivered to the pod's transparent listener, ipi_addr = 10.96.0.10, origdst = 10.96.0.10:18082"),
			r.udpCase("tproxy-udp6", redgreen.Subject, constants.CaptureTProxy, vip6, clusterIP6,
				"captureMode=tproxy: a datagram from the pod to [fd00:96::a]:18082 (the ip6 table and the ip -6 rule/route pair)",
				"delivered to the pod's transparent IPv6 listener, ipi6_addr = fd00:96::a, origdst = [fd00:96::a]:18082"),
			r.tcpCase("tproxy-tcp", redgreen.Subject, constants.CaptureTProxy, vip,
				"captureMode=tproxy: a TCP connect from the pod to 10.96.0.10:18082",
				"accepted by the pod's transparent listener with local address 10.96.0.10:18082"),
			{
				Name: "tproxy-passthrough", Role: redgreen.Subject,
				Description: "captureMode=tproxy: the proxy's own egress, SO_MARK 0xae7e, to 10.96.0.10:18082",
				Expect:      "not captured (the pod listener gets nothing) and delivered to the node; an unmarked datagram right after is captured",
				Run: func(context.Context) (redgreen.Observation, error) {
					return r.withMode(constants.CaptureTProxy, r.passthrough)
				},
				Check: func(o redgreen.Observation) error {
					f, err := redgreen.EvidenceOf[passthroughSeen](o)
					if err != nil {
						return err
					}
					if f.PodGotMarked || !f.NodeGotMarked || !f.PodGotUnmarked {
						return fmt.Errorf("pod got marked=%v, node got marked=%v, pod got unmarked=%v; want false, true, true",
							f.PodGotMarked, f.NodeGotMarked, f.PodGotUnmarked)
					}
					return nil
				},
			},
		},
	}
}

func (r *trafficRig) tcpToVIP(ctx context.Context) (redgreen.Observation, error) {
	ln, err := transparent.ListenTCP(r.p.pod.Path, netip.AddrPortFrom(netip.IPv4Unspecified(), meshPort), transparent.Options{Transparent: true})
	if err != nil {
		return redgreen.Observation{}, err
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	cl, err := transparent.DialTCP(dctx, r.p.pod.Path, vip, transparent.Options{})
	if err != nil {
		return redgreen.Observation{}, err
	}
	defer cl.Close()
	_ = ln.SetDeadline(time.Now().Add(2 * time.Second))
	c, ok := <-accepted
	if !ok {
		return redgreen.Observation{}, errors.New("the pod's transparent TCP listener accepted nothing")
	}
	defer c.Close()
	local := c.LocalAddr().(*net.TCPAddr).AddrPort()
	local = netip.AddrPortFrom(local.Addr().Unmap(), local.Port())
	return redgreen.Observation{
		Summary:  fmt.Sprintf("accepted, local %s, peer %s", local, c.RemoteAddr()),
		Witness:  "the accepted socket's local address (getsockname on the listener side)",
		Evidence: tcpSeen{Local: local.String(), Peer: c.RemoteAddr().String()},
	}, nil
}

// passthrough sends a marked datagram, then an unmarked one, and asks both
// receivers what they got: the marked one must reach the node, never the
// pod's listener, and the unmarked one shows the listener was live.
func (r *trafficRig) passthrough() (redgreen.Observation, error) {
	podLn, err := transparent.ListenUDP(r.p.pod.Path, netip.AddrPortFrom(netip.IPv4Unspecified(), meshPort), transparent.Options{Transparent: true})
	if err != nil {
		return redgreen.Observation{}, err
	}
	defer podLn.Close()
	nodeLn, err := transparent.ListenUDP(r.p.node.Path, vip, transparent.Options{})
	if err != nil {
		return redgreen.Observation{}, err
	}
	defer nodeLn.Close()

	marked, err := transparent.DialUDP(r.p.pod.Path, netip.AddrPort{}, vip, transparent.Options{Mark: constants.CapturePassthroughFwMark})
	if err != nil {
		return redgreen.Observation{}, err
	}
	defer marked.Close()
	if _, err := marked.Write([]byte("marked")); err != nil {
		return redgreen.Observation{}, fmt.Errorf("failed to send the marked datagram: %w", err)
	}
	var ev passthroughSeen
	buf := make([]byte, 64)
	_ = nodeLn.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, m, err := nodeLn.ReadDatagram(buf)
	ev.NodeGotMarked = err == nil && string(buf[:n]) == "marked"
	node := "nothing arrived at the node"
	if err == nil {
		// Only a datagram that arrived has a source to show.
		ev.NodeSawSrc = m.Src.String()
		node = fmt.Sprintf("node got %q from %v", buf[:n], m.Src)
	}

	plain, err := transparent.DialUDP(r.p.pod.Path, netip.AddrPort{}, vip, transparent.Options{})
	if err != nil {
		return redgreen.Observation{}, err
	}
	defer plain.Close()
	if _, err := plain.Write([]byte("plain")); err != nil {
		return redgreen.Observation{}, fmt.Errorf("failed to send the unmarked datagram: %w", err)
	}
	// The unmarked datagram was sent after the marked one on the same
	// path; whatever the pod listener holds now is everything it got.
	_ = podLn.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, _, err := podLn.ReadDatagram(buf)
		if err != nil {
			break
		}
		switch string(buf[:n]) {
		case "marked":
			ev.PodGotMarked = true
		case "plain":
			ev.PodGotUnmarked = true
			_ = podLn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		}
	}
	return redgreen.Observation{
		Summary: fmt.Sprintf("%s, pod got marked=%v, pod got unmarked=%v",
			node, ev.PodGotMarked, ev.PodGotUnmarked),
		Witness:  "the node's listener on the ClusterIP and the pod's capture listener",
		Evidence: ev,
	}, nil
}

var _ = Describe("traffic through the installed rules, red then green", func() {
	var p *podNet
	BeforeEach(func() {
		// A suite that cannot start says why in its result, so the gate
		// prints the cause rather than a missing file.
		err := (&trafficRig{}).suite().Setup(func() error {
			if why := privileged.Missing(privileged.NetAdmin, privileged.SysAdmin); why != "" {
				return fmt.Errorf("skipped: %s", why)
			}
			var err error
			if p, err = newPod("traffic", true); err != nil {
				return fmt.Errorf("the pod and node namespaces did not come up: %w", err)
			}
			DeferCleanup(p.close)
			// The node answers on the ClusterIP, so uncaptured traffic
			// arrives somewhere observable.
			if err := netns.AddAddr(p.node, "lo", netip.PrefixFrom(clusterIP, 32)); err != nil {
				return fmt.Errorf("adding the ClusterIP to the node's lo: %w", err)
			}
			return nil
		})
		if err != nil && privileged.Missing(privileged.NetAdmin, privileged.SysAdmin) != "" {
			privileged.Require(GinkgoT())
		}
		Expect(err).NotTo(HaveOccurred())
	})

	It("captures with the header intact in tproxy mode, and the redirect controls lose it", func() {
		rig := &trafficRig{p: p}
		res := redgreen.Run(redgreen.Announcing(context.Background()), rig.suite())
		fmt.Fprint(GinkgoWriter, res.Table())
		Expect(res.Write("")).To(Succeed())
		Expect(res.Err()).NotTo(HaveOccurred(), res.Table())
		for _, c := range res.Cases {
			Expect(c.Witness).NotTo(BeEmpty(), "case %s", c.Name)
			Expect(c.Facts).NotTo(BeEmpty(), "case %s", c.Name)
		}
		nothingOurs(p.pod.Path)
	})

	It("is a broken rig, naming every control, when the controls install the subject's configuration", func() {
		// Sabotage: the controls measure the subject's configuration (tproxy,
		// with the passthrough return). Each
		// must fail its own signature and the suite must say BROKEN_RIG,
		// never PASS. This result is not written to the report directory.
		rig := &trafficRig{p: p, sabotage: true}
		res := redgreen.Run(context.Background(), rig.suite())
		fmt.Fprint(GinkgoWriter, res.Table())
		Expect(res.Verdict).To(Equal(redgreen.BrokenRig), res.Table())
		for _, c := range []string{"redirect-udp", "redirect-udp6", "redirect-tcp", "no-return-passthrough"} {
			Expect(res.Reason).To(ContainSubstring("control "+c+" did not show its signature"), res.Table())
		}
		// The controls ran and were delivered: they failed on the
		// signature, not for want of traffic.
		for _, c := range res.Cases[:4] {
			Expect(c.Reason).NotTo(ContainSubstring("run failed"), "case %s", c.Name)
		}
		nothingOurs(p.pod.Path)
	})
})

var _ = Describe("the traffic cases' checks", func() {
	It("refuse an empty observation, zero evidence and evidence of another type, without panicking", func() {
		for _, c := range (&trafficRig{}).suite().Cases {
			Expect(c.Check(redgreen.Observation{})).To(MatchError(ContainSubstring("holds <nil> evidence")), "case %s", c.Name)
			for _, zero := range []any{udpSeen{}, tcpSeen{}, passthroughSeen{}} {
				Expect(c.Check(redgreen.Observation{Evidence: zero})).To(HaveOccurred(), "case %s given zero %T", c.Name, zero)
			}
			Expect(c.Check(redgreen.Observation{Evidence: map[string]any{"local": "10.96.0.10:18082"}})).
				To(MatchError(ContainSubstring("map[string]interface {}")), "case %s", c.Name)
		}
	})

	It("record the keys the rows have always carried", func() {
		keys := func(v any) []string {
			b, err := json.Marshal(v)
			Expect(err).NotTo(HaveOccurred())
			var m map[string]any
			Expect(json.Unmarshal(b, &m)).To(Succeed())
			return slices.Sorted(maps.Keys(m))
		}
		Expect(keys(udpSeen{})).To(Equal([]string{"ipi_addr", "orig_dst", "received", "src"}))
		Expect(keys(tcpSeen{})).To(Equal([]string{"local", "peer"}))
		// The node's source is recorded only when a datagram reached it.
		Expect(keys(passthroughSeen{})).To(Equal([]string{"node_got_marked", "pod_got_marked", "pod_got_unmarked"}))
		Expect(keys(passthroughSeen{NodeGotMarked: true, NodeSawSrc: "10.244.0.2:40000"})).
			To(Equal([]string{"node_got_marked", "node_saw_src", "pod_got_marked", "pod_got_unmarked"}))
	})
})
