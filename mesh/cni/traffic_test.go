package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
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
// captured has somewhere to arrive and be seen.
type trafficRig struct {
	p *podNet
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
// what a transparent listener in the pod netns saw.
func (r *trafficRig) udpToVIP(payload string, vip netip.AddrPort) (transparent.Meta, error) {
	unspec := netip.IPv4Unspecified()
	if vip.Addr().Is6() {
		unspec = netip.IPv6Unspecified()
	}
	ln, err := transparent.ListenUDP(r.p.pod.Path, netip.AddrPortFrom(unspec, meshPort), transparent.Options{Transparent: true})
	if err != nil {
		return transparent.Meta{}, err
	}
	defer ln.Close()
	cl, err := transparent.DialUDP(r.p.pod.Path, netip.AddrPort{}, vip, transparent.Options{})
	if err != nil {
		return transparent.Meta{}, err
	}
	defer cl.Close()
	if _, err := cl.Write([]byte(payload)); err != nil {
		return transparent.Meta{}, fmt.Errorf("failed to send to %s: %w", vip, err)
	}
	_ = ln.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	n, m, err := ln.ReadDatagram(buf)
	if err != nil {
		return m, fmt.Errorf("the pod's capture listener received nothing: %w", err)
	}
	if string(buf[:n]) != payload {
		return m, fmt.Errorf("the pod's capture listener received %q, want %q", buf[:n], payload)
	}
	return m, nil
}

func udpObservation(m transparent.Meta) redgreen.Observation {
	return redgreen.Observation{
		Summary: fmt.Sprintf("ipi_addr=%s origdst=%s", m.Dst, m.OrigDst),
		Witness: "the pod listener's IP_PKTINFO / IP_ORIGDSTADDR",
		Facts:   map[string]any{"ipi_addr": m.Dst.String(), "orig_dst": m.OrigDst.String(), "src": m.Src.String()},
	}
}

func (r *trafficRig) suite() redgreen.Suite {
	return redgreen.Suite{
		Name:    "cni-capture",
		Subject: "aether-cni mark-and-divert capture in the pod netns (038 Phase 1 as shipped)",
		Cases: []redgreen.Case{
			{
				Name: "redirect-udp", Role: redgreen.Control,
				Description: "captureMode=redirect: nat output redirect to the same port",
				Expect:      "delivered, ipi_addr = 127.0.0.1 (the rewritten address), not the ClusterIP",
				Run: func(context.Context) (redgreen.Observation, error) {
					return r.withMode(constants.CaptureRedirect, func() (redgreen.Observation, error) {
						m, err := r.udpToVIP("redirect", vip)
						return udpObservation(m), err
					})
				},
				Check: func(o redgreen.Observation) error {
					if o.Facts["ipi_addr"] != "127.0.0.1" {
						return fmt.Errorf("ipi_addr is %v, want the rewritten 127.0.0.1", o.Facts["ipi_addr"])
					}
					return nil
				},
			},
			{
				Name: "tproxy-udp", Role: redgreen.Subject,
				Description: "captureMode=tproxy: a datagram from the pod to 10.96.0.10:18082",
				Expect:      "delivered to the pod's transparent listener, ipi_addr = 10.96.0.10",
				Run: func(context.Context) (redgreen.Observation, error) {
					return r.withMode(constants.CaptureTProxy, func() (redgreen.Observation, error) {
						m, err := r.udpToVIP("tproxy", vip)
						return udpObservation(m), err
					})
				},
				Check: func(o redgreen.Observation) error {
					if o.Facts["ipi_addr"] != clusterIP.String() || o.Facts["orig_dst"] != vip.String() {
						return fmt.Errorf("ipi_addr=%v orig_dst=%v, want %s and %s", o.Facts["ipi_addr"], o.Facts["orig_dst"], clusterIP, vip)
					}
					return nil
				},
			},
			{
				Name: "tproxy-udp6", Role: redgreen.Subject,
				Description: "captureMode=tproxy: a datagram from the pod to [fd00:96::a]:18082 (the ip6 table and the ip -6 rule/route pair)",
				Expect:      "delivered to the pod's transparent IPv6 listener, ipi6_addr = fd00:96::a",
				Run: func(context.Context) (redgreen.Observation, error) {
					return r.withMode(constants.CaptureTProxy, func() (redgreen.Observation, error) {
						m, err := r.udpToVIP("tproxy6", vip6)
						return udpObservation(m), err
					})
				},
				Check: func(o redgreen.Observation) error {
					if o.Facts["ipi_addr"] != clusterIP6.String() {
						return fmt.Errorf("ipi6_addr=%v, want %s", o.Facts["ipi_addr"], clusterIP6)
					}
					return nil
				},
			},
			{
				Name: "tproxy-tcp", Role: redgreen.Subject,
				Description: "captureMode=tproxy: a TCP connect from the pod to 10.96.0.10:18082",
				Expect:      "accepted by the pod's transparent listener with local address 10.96.0.10:18082",
				Run: func(ctx context.Context) (redgreen.Observation, error) {
					return r.withMode(constants.CaptureTProxy, func() (redgreen.Observation, error) { return r.tcpToVIP(ctx) })
				},
				Check: func(o redgreen.Observation) error {
					if o.Facts["local"] != vip.String() {
						return fmt.Errorf("accepted connection's local address is %v, want %s", o.Facts["local"], vip)
					}
					return nil
				},
			},
			{
				Name: "tproxy-passthrough", Role: redgreen.Subject,
				Description: "captureMode=tproxy: the proxy's own egress, SO_MARK 0xae7e, to 10.96.0.10:18082",
				Expect:      "not captured (the pod listener gets nothing) and delivered to the node; an unmarked datagram right after is captured",
				Run: func(context.Context) (redgreen.Observation, error) {
					return r.withMode(constants.CaptureTProxy, r.passthrough)
				},
				Check: func(o redgreen.Observation) error {
					if o.Facts["pod_got_marked"] != false || o.Facts["node_got_marked"] != true || o.Facts["pod_got_unmarked"] != true {
						return fmt.Errorf("pod got marked=%v, node got marked=%v, pod got unmarked=%v; want false, true, true",
							o.Facts["pod_got_marked"], o.Facts["node_got_marked"], o.Facts["pod_got_unmarked"])
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
		Summary: fmt.Sprintf("accepted, local %s, peer %s", local, c.RemoteAddr()),
		Witness: "the accepted socket's local address (getsockname on the listener side)",
		Facts:   map[string]any{"local": local.String(), "peer": c.RemoteAddr().String()},
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
	facts := map[string]any{}
	buf := make([]byte, 64)
	_ = nodeLn.SetReadDeadline(time.Now().Add(2 * time.Second))
	n, m, err := nodeLn.ReadDatagram(buf)
	facts["node_got_marked"] = err == nil && string(buf[:n]) == "marked"
	facts["node_saw_src"] = m.Src.String()

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
	facts["pod_got_marked"], facts["pod_got_unmarked"] = false, false
	_ = podLn.SetReadDeadline(time.Now().Add(2 * time.Second))
	for {
		n, _, err := podLn.ReadDatagram(buf)
		if err != nil {
			break
		}
		switch string(buf[:n]) {
		case "marked":
			facts["pod_got_marked"] = true
		case "plain":
			facts["pod_got_unmarked"] = true
			_ = podLn.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		}
	}
	return redgreen.Observation{
		Summary: fmt.Sprintf("node got marked=%v (from %v), pod got marked=%v, pod got unmarked=%v",
			facts["node_got_marked"], facts["node_saw_src"], facts["pod_got_marked"], facts["pod_got_unmarked"]),
		Witness: "the node's listener on the ClusterIP and the pod's capture listener",
		Facts:   facts,
	}, nil
}

var _ = Describe("traffic through the installed rules, red then green", func() {
	It("captures with the header intact in tproxy mode, and the redirect control loses it", func() {
		privileged.Require(GinkgoT())
		p, err := newPod("traffic", true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.close)
		// The node answers on the ClusterIP, so uncaptured traffic arrives
		// somewhere observable.
		Expect(netns.AddAddr(p.node, "lo", netip.PrefixFrom(clusterIP, 32))).To(Succeed())

		rig := &trafficRig{p: p}
		res := redgreen.Run(context.Background(), rig.suite())
		fmt.Fprint(GinkgoWriter, res.Table())
		Expect(res.Write("")).To(Succeed())
		Expect(res.Err()).NotTo(HaveOccurred(), res.Table())
		nothingOurs(p.pod.Path)
	})
})
