package cni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/privileged"
)

var _ = Describe("a re-ADD that fails half-way", func() {
	var p *podNet
	BeforeEach(func() {
		privileged.Require(GinkgoT())
		var err error
		p, err = newPod("readd", true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.close)
	})

	build := func(mode constants.CaptureMode, addrs []netip.Prefix, opts Options) RuleSet {
		GinkgoHelper()
		rs, err := Build(mode, Pod{Addrs: addrs}, opts)
		Expect(err).NotTo(HaveOccurred())
		return rs
	}

	It("leaves the previous working tables when the new set's route conflicts", func() {
		args := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"captureMode": "redirect"}))
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())

		// A neighbour takes the capture table's default route after the
		// redirect pod came up; the re-ADD in tproxy mode replaces the
		// tables, adds the ip rules, then fails on that route.
		h, err := p.pod.Handle()
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		eth0, err := h.LinkByName("eth0")
		Expect(err).NotTo(HaveOccurred())
		Expect(h.RouteAdd(&netlink.Route{
			Table: constants.CaptureRouteTable, LinkIndex: eth0.Attrs().Index,
			Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: p.gw4.AsSlice(),
		})).To(Succeed())

		readd := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil))
		_, _, err = testutils.CmdAddWithArgs(readd, func() error { return Add(readd) })
		cniError(err, types.ErrInternal, "conflicting route")

		want := build(constants.CaptureRedirect, p.addrs, Options{})
		want.Routes = append(want.Routes, Route{Family: IPv4, Type: "unicast", Dev: "eth0", Table: constants.CaptureRouteTable})
		Expect(Render(mustState(p.pod.Path))).To(Equal(Render(want)), "listed back from the kernel: the redirect set and the neighbour's route")
	})

	// Each case installs a working set, then installs another that fails
	// after each of its steps in turn; every time, the namespace must list
	// back the working set.
	type change struct {
		name     string
		from, to func(p *podNet) RuleSet
	}
	dual := func(mode constants.CaptureMode, opts Options) func(*podNet) RuleSet {
		return func(p *podNet) RuleSet { return build(mode, p.addrs, opts) }
	}
	changes := []change{
		{"redirect to tproxy", dual(constants.CaptureRedirect, Options{}), dual(constants.CaptureTProxy, Options{})},
		{"tproxy to redirect", dual(constants.CaptureTProxy, Options{}), dual(constants.CaptureRedirect, Options{})},
		{"dual with counters to IPv4 only", dual(constants.CaptureTProxy, Options{Counters: true}),
			func(p *podNet) RuleSet { return build(constants.CaptureTProxy, p.addrs[:1], Options{}) }},
		{"nothing to tproxy", func(*podNet) RuleSet { return RuleSet{} }, dual(constants.CaptureTProxy, Options{})},
	}
	for _, c := range changes {
		It("puts back the previous set after a failure at each step: "+c.name, func() {
			in := &Installer{NetnsPath: p.pod.Path}
			from, to := c.from(p), c.to(p)
			install := func(rs RuleSet) {
				GinkgoHelper()
				Expect(in.Remove()).To(Succeed())
				if !rs.Empty() {
					Expect(in.Install(rs)).To(Succeed())
				}
				Expect(Render(mustState(p.pod.Path))).To(Equal(Render(from)))
			}

			var steps []string
			DeferCleanup(func(h func(string) error) { testHookInstallStep = h }, testHookInstallStep)
			testHookInstallStep = func(s string) error { steps = append(steps, s); return nil }
			install(from)
			steps = nil
			Expect(in.Install(to)).To(Succeed())
			Expect(steps).NotTo(BeEmpty())
			fmt.Fprintf(GinkgoWriter, "steps of %s: %q\n", c.name, steps)

			injected := errors.New("injected failure")
			for _, at := range steps {
				testHookInstallStep = func(string) error { return nil }
				install(from)
				testHookInstallStep = func(s string) error {
					if s == at {
						return injected
					}
					return nil
				}
				err := in.Install(to)
				Expect(err).To(MatchError(injected), "step %s", at)
				Expect(err.Error()).NotTo(ContainSubstring("rolling back failed"))
				Expect(Render(mustState(p.pod.Path))).To(Equal(Render(from)), "after a failure at step %q", at)
			}
		})
	}
})
