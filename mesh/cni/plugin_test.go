package cni

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// cniError asserts err is a CNI error with code whose message contains msg.
func cniError(err error, code uint, msg string) {
	GinkgoHelper()
	var e *types.Error
	Expect(errors.As(err, &e)).To(BeTrue(), "want a *types.Error, got %T: %v", err, err)
	Expect(e.Code).To(Equal(code), "error: %v", e)
	Expect(e.Msg + " " + e.Details).To(ContainSubstring(msg))
}

// nothingOurs asserts the namespace holds no object of the plugin's.
func nothingOurs(path string) {
	GinkgoHelper()
	st, err := (&Installer{NetnsPath: path}).State()
	Expect(err).NotTo(HaveOccurred())
	Expect(Render(st)).To(BeEmpty())
}

var _ = Describe("the chained plugin", func() {
	var p *podNet
	BeforeEach(func() {
		privileged.Require(GinkgoT())
		var err error
		p, err = newPod("plug", true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.close)
	})

	for _, ver := range []string{"1.0.0", "1.1.0"} {
		It("runs the lifecycle ADD, CHECK, DEL, DEL at spec "+ver, func() {
			conf := netConf(ver, prevResult(p.pod.Path, p.addrs), nil)
			args := cmdArgs(p.pod.Path, conf)

			r, out, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
			Expect(err).NotTo(HaveOccurred())
			// prevResult comes back unchanged, at the configured version.
			Expect(r.Version()).To(Equal(ver))
			res, err := current.NewResultFromResult(r)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.IPs).To(HaveLen(2))
			Expect(res.IPs[0].Address.String()).To(Equal(p.addrs[0].String()))
			Expect(res.Interfaces[0].Sandbox).To(Equal(p.pod.Path))
			Expect(out).NotTo(BeEmpty())

			want, err := Build(constants.CaptureTProxy, Pod{Addrs: p.addrs}, Options{})
			Expect(err).NotTo(HaveOccurred())
			got, err := (&Installer{NetnsPath: p.pod.Path}).State()
			Expect(err).NotTo(HaveOccurred())
			Expect(Render(got)).To(Equal(Render(want)))
			Expect(got.IPRules).To(HaveLen(2))
			Expect(got.Routes).To(HaveLen(2))

			Expect(testutils.CmdCheckWithArgs(args, func() error { return Check(args) })).To(Succeed())
			Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
			nothingOurs(p.pod.Path)
			Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
			nothingOurs(p.pod.Path)

			// DEL of a namespace that is gone is not an error either.
			Expect(p.pod.Delete()).To(Succeed())
			Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
		})
	}

	It("answers GC without touching a pod, since everything it owns lives in the pod netns", func() {
		args := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil))
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		before := Render(mustState(p.pod.Path))
		Expect(before).NotTo(BeEmpty())
		gen, err := nftGeneration(p.pod)
		Expect(err).NotTo(HaveOccurred())

		// The pod's attachment is not in the list. GC gets no CNI_NETNS,
		// and the rules live inside the netns, so the pod keeps them until
		// DEL or until its netns goes (its handoff record is another
		// matter: see the handoff specs).
		gc := cmdArgs("", netConf("1.1.0", nil, map[string]any{
			"cni.dev/valid-attachments": []map[string]string{{"containerID": "another-pod", "ifname": "eth0"}},
		}))
		Expect(GC(gc)).To(Succeed())
		Expect(Render(mustState(p.pod.Path))).To(Equal(before))
		gen2, err := nftGeneration(p.pod)
		Expect(err).NotTo(HaveOccurred())
		Expect(gen2).To(Equal(gen), "GC committed an nftables transaction in the pod netns")
	})

	It("lets DEL through a key it does not know, and removes the rules", func() {
		args := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil))
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(mustState(p.pod.Path).Empty()).To(BeFalse())

		// A configuration an older plugin accepted, cached by the runtime.
		old := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"retiredKey": true}))
		_, _, err = testutils.CmdAddWithArgs(old, func() error { return Add(old) })
		cniError(err, types.ErrInvalidNetworkConfig, `unknown configuration key "retiredKey"`)
		Expect(testutils.CmdDelWithArgs(old, func() error { return Del(old) })).To(Succeed())
		nothingOurs(p.pod.Path)
	})

	It("installs the redirect control when captureMode says so", func() {
		args := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs[:1]), map[string]any{"captureMode": "redirect"}))
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(compareGolden("redirect-ipv4-plain", Render(mustState(p.pod.Path)))).To(Succeed())
		Expect(testutils.CmdCheckWithArgs(args, func() error { return Check(args) })).To(Succeed())
		Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
		nothingOurs(p.pod.Path)
	})

	It("installs nothing for an excluded namespace and still passes prevResult through", func() {
		args := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"excludeNamespaces": []string{"kube-system"}}))
		args.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=kube-system;K8S_POD_NAME=coredns-0"
		r, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		res, err := current.NewResultFromResult(r)
		Expect(err).NotTo(HaveOccurred())
		Expect(res.IPs).To(HaveLen(2))
		nothingOurs(p.pod.Path)
		Expect(testutils.CmdCheckWithArgs(args, func() error { return Check(args) })).To(Succeed())

		// The same pod in another namespace is captured.
		args.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-0"
		_, _, err = testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(mustState(p.pod.Path).Tables).To(HaveLen(2))
	})

	Describe("CHECK after tampering", func() {
		addTProxy := func() []byte {
			conf := netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil)
			a := cmdArgs(p.pod.Path, conf)
			_, _, err := testutils.CmdAddWithArgs(a, func() error { return Add(a) })
			Expect(err).NotTo(HaveOccurred())
			Expect(testutils.CmdCheckWithArgs(a, func() error { return Check(a) })).To(Succeed())
			return conf
		}

		It("fails on a foreign rule in the aether table and names it", func() {
			conf := addTProxy()
			h, err := vnetns.GetFromPath(p.pod.Path)
			Expect(err).NotTo(HaveOccurred())
			defer h.Close()
			c, err := nftables.New(nftables.WithNetNSFd(int(h)))
			Expect(err).NotTo(HaveOccurred())
			t := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: TableName}
			c.AddRule(&nftables.Rule{Table: t, Chain: &nftables.Chain{Name: ChainName, Table: t}, Exprs: []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{17}},
				&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0x00, 0x35}},
				&expr.Verdict{Kind: expr.VerdictDrop},
			}})
			Expect(c.Flush()).To(Succeed())

			a := cmdArgs(p.pod.Path, conf)
			err = testutils.CmdCheckWithArgs(a, func() error { return Check(a) })
			cniError(err, ErrCaptureDrift, "unexpected")
			cniError(err, ErrCaptureDrift, "rule ip aether capture: # not written by aether")
			cniError(err, ErrCaptureDrift, "+\t\t# not written by aether") // the unified diff in details

			// DEL owns the whole table, the foreign rule included.
			Expect(testutils.CmdDelWithArgs(a, func() error { return Del(a) })).To(Succeed())
			nothingOurs(p.pod.Path)
		})

		It("fails when the ip rule is deleted and names it", func() {
			conf := addTProxy()
			h, err := p.pod.Handle()
			Expect(err).NotTo(HaveOccurred())
			defer h.Close()
			Expect(h.RuleDel(nlRule(ownedRule(IPv4)))).To(Succeed())

			a := cmdArgs(p.pod.Path, conf)
			err = testutils.CmdCheckWithArgs(a, func() error { return Check(a) })
			cniError(err, ErrCaptureDrift, `missing ["ip rule 100: from all fwmark 0xae71 lookup 2791"]`)
			Expect(testutils.CmdDelWithArgs(a, func() error { return Del(a) })).To(Succeed())
			nothingOurs(p.pod.Path)
		})

		It("fails when the mode on disk is not the configured one", func() {
			addTProxy()
			a := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"captureMode": "redirect"}))
			err := testutils.CmdCheckWithArgs(a, func() error { return Check(a) })
			cniError(err, ErrCaptureDrift, "redirect to :18082")
		})
	})

	Describe("bad input", func() {
		notNetns := func() string {
			f := filepath.Join(GinkgoT().TempDir(), "not-a-netns")
			Expect(os.WriteFile(f, []byte("x"), 0o644)).To(Succeed())
			return f
		}
		DescribeTable("answers a CNI error naming the field and leaves nothing behind",
			func(mk func() ([]byte, string), code uint, msg string) {
				conf, path := mk()
				if path == "" {
					path = p.pod.Path
				}
				a := cmdArgs(path, conf)
				_, _, err := testutils.CmdAddWithArgs(a, func() error { return Add(a) })
				cniError(err, code, msg)
				nothingOurs(p.pod.Path)
			},
			Entry("malformed JSON", func() ([]byte, string) { return []byte(`{"cniVersion":"1.1.0","name":`), "" },
				types.ErrDecodingFailure, "failed to parse network configuration"),
			Entry("unknown capture mode", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"captureMode": "ebpf"}), ""
			}, types.ErrInvalidNetworkConfig, `"captureMode": unknown capture mode "ebpf"`),
			Entry("misspelt captureMode", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"captureMod": "redirect"}), ""
			}, types.ErrInvalidNetworkConfig, `unknown configuration key "captureMod" (did you mean "captureMode"?)`),
			Entry("wrong type for excludeNamespaces", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"excludeNamespaces": "kube-system"}), ""
			}, types.ErrDecodingFailure, "excludeNamespaces"),
			Entry("unknown logLevel", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"logLevel": "loud"}), ""
			}, types.ErrInvalidNetworkConfig, `"logLevel"`),
			Entry("relative agentSocket", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"agentSocket": "cni.sock"}), ""
			}, types.ErrInvalidNetworkConfig, `invalid network configuration field "agentSocket": "cni.sock" is not an absolute path`),
			Entry("agentSocket longer than a unix socket path", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"agentSocket": "/run/" + strings.Repeat("a", 120)}), ""
			}, types.ErrInvalidNetworkConfig, `"agentSocket": "/run/aaaa`),
			Entry("wrong type for requireAgent", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), map[string]any{"requireAgent": "yes"}), ""
			}, types.ErrDecodingFailure, "requireAgent"),
			Entry("missing prevResult", func() ([]byte, string) { return netConf("1.1.0", nil, nil), "" },
				types.ErrInvalidNetworkConfig, `missing network configuration field "prevResult"`),
			Entry("prevResult without addresses", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, nil), nil), ""
			}, types.ErrInvalidNetworkConfig, `"prevResult.ips"`),
			Entry("CNI_NETNS that is not a netns", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil), notNetns()
			}, types.ErrInvalidNetNS, "not a network namespace"),
			Entry("CNI_NETNS that does not exist", func() ([]byte, string) {
				return netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil), "/run/netns/aeth-0-missing"
			}, types.ErrInvalidNetNS, "does not exist"),
		)

		It("rolls back an ADD that fails half-way", func() {
			// A neighbour already holds the default route of the capture
			// table: the nftables transaction and the ip rule succeed, the
			// local route conflicts, and everything of ours must go again.
			h, err := p.pod.Handle()
			Expect(err).NotTo(HaveOccurred())
			defer h.Close()
			eth0, err := h.LinkByName("eth0")
			Expect(err).NotTo(HaveOccurred())
			Expect(h.RouteAdd(&netlink.Route{
				Table: constants.CaptureRouteTable, LinkIndex: eth0.Attrs().Index,
				Dst: &net.IPNet{IP: net.IPv4zero, Mask: net.CIDRMask(0, 32)}, Gw: p.gw4.AsSlice(),
			})).To(Succeed())

			a := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil))
			gen, err := nftGeneration(p.pod)
			Expect(err).NotTo(HaveOccurred())
			_, _, err = testutils.CmdAddWithArgs(a, func() error { return Add(a) })
			cniError(err, types.ErrInternal, "conflicting route")
			gen2, err := nftGeneration(p.pod)
			Expect(err).NotTo(HaveOccurred())
			Expect(gen2-gen).To(Equal(uint32(2)), "the install and its rollback, one transaction each")

			st := mustState(p.pod.Path)
			Expect(st.Tables).To(BeEmpty())
			Expect(st.IPRules).To(BeEmpty())
			Expect(Items(st)).To(Equal([]string{"ip route unicast default dev eth0 table 2791"}), "only the neighbour's route is left")
		})

		It("rejects CHECK without prevResult and a missing netns on CHECK", func() {
			a := cmdArgs(p.pod.Path, netConf("1.1.0", nil, nil))
			cniError(testutils.CmdCheckWithArgs(a, func() error { return Check(a) }), types.ErrInvalidNetworkConfig, "prevResult")
			a = cmdArgs("/run/netns/aeth-0-missing", netConf("1.1.0", prevResult(p.pod.Path, p.addrs), nil))
			cniError(testutils.CmdCheckWithArgs(a, func() error { return Check(a) }), types.ErrInvalidNetNS, "does not exist")
		})
	})

	It("answers STATUS, and names a bad config", func() {
		ok := cmdArgs("", netConf("1.1.0", nil, nil))
		bad := cmdArgs("", netConf("1.1.0", nil, map[string]any{"captureMode": "ebpf"}))
		// STATUS runs in the runtime's namespace; here that is the node's.
		Expect(p.node.Do(func() error { return testutils.CmdStatus(func() error { return Status(ok) }) })).To(Succeed())
		err := p.node.Do(func() error { return testutils.CmdStatus(func() error { return Status(bad) }) })
		cniError(err, types.ErrInvalidNetworkConfig, "captureMode")
	})
})

func mustState(path string) RuleSet {
	GinkgoHelper()
	st, err := (&Installer{NetnsPath: path}).State()
	Expect(err).NotTo(HaveOccurred())
	return st
}
