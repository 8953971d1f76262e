package cni

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables/expr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// goldenCase is one cell of mode × family × options.
type goldenCase struct {
	mode   constants.CaptureMode
	family string // "ipv4", "ipv6", "dual"
	opts   Options
}

func (c goldenCase) name() string {
	o := "plain"
	if c.opts.Counters {
		o = "counters"
	}
	return fmt.Sprintf("%s-%s-%s", c.mode, c.family, o)
}

func (c goldenCase) pod() Pod {
	v4, v6 := netip.MustParsePrefix("10.244.1.2/24"), netip.MustParsePrefix("fd00:244:1::2/64")
	switch c.family {
	case "ipv4":
		return Pod{Addrs: []netip.Prefix{v4}}
	case "ipv6":
		return Pod{Addrs: []netip.Prefix{v6}}
	}
	return Pod{Addrs: []netip.Prefix{v4, v6}}
}

func goldenCases() []goldenCase {
	var out []goldenCase
	for _, m := range []constants.CaptureMode{constants.CaptureTProxy, constants.CaptureRedirect} {
		for _, f := range []string{"ipv4", "ipv6", "dual"} {
			for _, o := range []Options{{}, {Counters: true}} {
				out = append(out, goldenCase{m, f, o})
			}
		}
	}
	return out
}

func goldenEntries() []TableEntry {
	var out []TableEntry
	for _, c := range goldenCases() {
		out = append(out, Entry(c.name(), c))
	}
	return out
}

var _ = Describe("Build", func() {
	DescribeTable("renders each case as its golden file", func(c goldenCase) {
		rs, err := Build(c.mode, c.pod(), c.opts)
		Expect(err).NotTo(HaveOccurred())
		Expect(checkGolden(c.name(), Render(rs))).To(Succeed())
	}, goldenEntries())

	It("diverts exactly the pinned ports, after the passthrough return, in tproxy mode", func() {
		rs, err := Build(constants.CaptureTProxy, goldenCase{family: "dual"}.pod(), Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rs.Tables).To(HaveLen(2))
		for _, t := range rs.Tables {
			c := t.Chains[0]
			Expect(c.Type).To(Equal("route"))
			Expect(c.Hook).To(Equal("output"))
			Expect(c.Rules[0]).To(Equal(Rule{Mark: constants.CapturePassthroughFwMark, Action: ActionAccept}))
			got := map[constants.Transport][]uint16{}
			for _, r := range c.Rules[1:] {
				Expect(r.Action).To(Equal(ActionSetMark))
				Expect(r.Arg).To(Equal(constants.CaptureDivertFwMark))
				got[map[uint8]constants.Transport{6: constants.TCP, 17: constants.UDP}[r.L4Proto]] = append(got[map[uint8]constants.Transport{6: constants.TCP, 17: constants.UDP}[r.L4Proto]], r.DPort)
			}
			Expect(got).To(Equal(constants.CapturedPorts()))
		}
		Expect(rs.IPRules).To(ConsistOf(ownedRule(IPv4), ownedRule(IPv6)))
		Expect(rs.Routes).To(ConsistOf(ownedRoute(IPv4), ownedRoute(IPv6)))
	})

	It("redirects to the dialled port and installs no divert pair in redirect mode", func() {
		rs, err := Build(constants.CaptureRedirect, goldenCase{family: "ipv4"}.pod(), Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rs.IPRules).To(BeEmpty())
		Expect(rs.Routes).To(BeEmpty())
		c := rs.Tables[0].Chains[0]
		Expect(c.Type).To(Equal("nat"))
		for _, r := range c.Rules[1:] {
			Expect(r.Action).To(Equal(ActionRedirect))
			Expect(r.Arg).To(Equal(uint32(r.DPort)))
		}
	})

	It("builds rules only for the families the pod has", func() {
		rs, err := Build(constants.CaptureTProxy, goldenCase{family: "ipv6"}.pod(), Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(rs.Tables).To(HaveLen(1))
		Expect(rs.Tables[0].Family).To(Equal(IPv6))
		Expect(rs.IPRules).To(ConsistOf(ownedRule(IPv6)))
	})

	It("rejects an unknown mode and a pod without addresses", func() {
		_, err := Build("ebpf", goldenCase{family: "ipv4"}.pod(), Options{})
		Expect(err).To(MatchError(ContainSubstring(`unknown capture mode "ebpf"`)))
		_, err = Build(constants.CaptureTProxy, Pod{}, Options{})
		Expect(err).To(MatchError(ContainSubstring("no IPv4 or IPv6 address")))
	})

	It("decodes every rule it compiles back to the same rule", func() {
		for _, c := range goldenCases() {
			rs, err := Build(c.mode, c.pod(), c.opts)
			Expect(err).NotTo(HaveOccurred())
			for _, t := range rs.Tables {
				for _, r := range t.Chains[0].Rules {
					es, err := Exprs(r)
					Expect(err).NotTo(HaveOccurred())
					Expect(RuleOf(es)).To(Equal(r), "case %s rule %s", c.name(), ruleLine(r))
				}
			}
		}
	})

	It("keeps expressions outside its vocabulary as a foreign rule", func() {
		r := RuleOf([]expr.Any{&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{6}}, &expr.Verdict{Kind: expr.VerdictDrop}})
		Expect(r.Foreign).To(ContainSubstring("verdict"))
		Expect(ruleLine(r)).To(HavePrefix("# not written by aether"))
		// A rule whose verdict is not last is not ours either.
		r = RuleOf([]expr.Any{&expr.Verdict{Kind: expr.VerdictAccept}, &expr.Counter{}})
		Expect(r.Foreign).NotTo(BeEmpty())
	})

	It("names missing, unexpected and reordered objects", func() {
		want, err := Build(constants.CaptureTProxy, goldenCase{family: "ipv4"}.pod(), Options{})
		Expect(err).NotTo(HaveOccurred())
		Expect(Compare(want, want).None()).To(BeTrue())

		got, _ := Build(constants.CaptureTProxy, goldenCase{family: "ipv4"}.pod(), Options{})
		got.IPRules = nil
		d := Compare(want, got)
		Expect(d.Missing).To(ConsistOf("ip rule 100: from all fwmark 0xae71 lookup 2791"))
		Expect(d.Unexpected).To(BeEmpty())
		Expect(d.Diff).To(ContainSubstring("-ip rule 100"))

		got, _ = Build(constants.CaptureTProxy, goldenCase{family: "ipv4"}.pod(), Options{})
		rules := got.Tables[0].Chains[0].Rules
		rules[0], rules[1] = rules[1], rules[0]
		d = Compare(want, got)
		Expect(d.None()).To(BeFalse(), "a passthrough rule moved after a capture rule must count as drift")
		named := strings.Join(append(d.Missing, d.Unexpected...), "\n")
		Expect(named).To(Or(ContainSubstring("meta mark 0x0000ae7e accept"), ContainSubstring("th dport 18081")))
	})
})

var _ = Describe("Installer in a fresh netns", func() {
	var n *netns.NS
	BeforeEach(func() {
		privileged.Require(GinkgoT())
		var err error
		n, err = netns.Create("inst")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { Expect(n.Delete()).To(Succeed()) })
	})

	DescribeTable("installs, lists back the golden, and installs again without change", func(c goldenCase) {
		rs, err := Build(c.mode, c.pod(), c.opts)
		Expect(err).NotTo(HaveOccurred())
		in := &Installer{NetnsPath: n.Path}
		Expect(in.Install(rs)).To(Succeed())

		got, err := in.State()
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Empty()).To(BeFalse(), "an empty dump is inconclusive, not a match")
		// The kernel half never refreshes: the golden is the build's.
		Expect(compareGolden(c.name(), Render(got))).To(Succeed())

		gen, err := nftGeneration(n)
		Expect(err).NotTo(HaveOccurred())
		stats := &Stats{}
		Expect((&Installer{NetnsPath: n.Path, Stats: stats}).Install(rs)).To(Succeed())
		again, err := in.State()
		Expect(err).NotTo(HaveOccurred())
		Expect(Render(again)).To(Equal(Render(got)))
		gen2, err := nftGeneration(n)
		Expect(err).NotTo(HaveOccurred())
		Expect(gen2-gen).To(Equal(uint32(1)), "one install is one nftables transaction")
		Expect(stats.NFTTransactions).To(Equal(1))

		Expect(in.Remove()).To(Succeed())
		left, err := in.State()
		Expect(err).NotTo(HaveOccurred())
		Expect(Render(left)).To(BeEmpty())
	}, goldenEntries())

	It("removes only what it owns", func() {
		rs, err := Build(constants.CaptureTProxy, goldenCase{family: "dual"}.pod(), Options{})
		Expect(err).NotTo(HaveOccurred())
		in := &Installer{NetnsPath: n.Path}
		Expect(in.Install(rs)).To(Succeed())
		// A neighbour's rule at another priority, same table: not ours.
		h, err := n.Handle()
		Expect(err).NotTo(HaveOccurred())
		defer h.Close()
		foreign := nlRule(IPRule{Family: IPv4, Priority: 200, Mark: 0x1, Mask: 0xffffffff, Table: constants.CaptureRouteTable})
		Expect(h.RuleAdd(foreign)).To(Succeed())

		Expect(in.Remove()).To(Succeed())
		left, err := in.State()
		Expect(err).NotTo(HaveOccurred())
		Expect(Items(left)).To(Equal([]string{"ip rule 200: from all fwmark 0x1 lookup 2791"}))
	})

	It("switches modes cleanly on reinstall", func() {
		pod := goldenCase{family: "dual"}.pod()
		tp, _ := Build(constants.CaptureTProxy, pod, Options{})
		rd, _ := Build(constants.CaptureRedirect, pod, Options{})
		in := &Installer{NetnsPath: n.Path}
		Expect(in.Install(tp)).To(Succeed())
		Expect(in.Install(rd)).To(Succeed())
		d, err := in.Verify(rd)
		Expect(err).NotTo(HaveOccurred())
		Expect(d.None()).To(BeTrue(), "%s\n%s", d, d.Diff)
	})
})
