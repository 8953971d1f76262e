package cni

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/mdlayher/netlink"
	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/rigs/netns"
)

// podNet is a pod netns joined to a node netns by a ptp-style veth: pod
// eth0 holds 10.244.<id>.2/24 (and fd00:244:<id>::2/64 when dual), the node
// end the .1 addresses, and the pod's default routes point at the node end,
// because mark-and-divert needs the normal route lookup to succeed first.
type podNet struct {
	pod, node *netns.NS
	addrs     []netip.Prefix
	gw4       netip.Addr
}

var nextPodID = 1

func newPod(tag string, dual bool) (*podNet, error) {
	id := nextPodID
	nextPodID++
	p := &podNet{}
	var err error
	if p.node, err = netns.Create(fmt.Sprintf("node-%s-%d", tag, id)); err != nil {
		return nil, err
	}
	if p.pod, err = netns.Create(fmt.Sprintf("pod-%s-%d", tag, id)); err != nil {
		_ = p.node.Delete()
		return nil, err
	}
	if err := p.wire(id, dual); err != nil {
		p.close()
		return nil, err
	}
	return p, nil
}

// wire is the ptp-style setup for pod id: veth, addresses, default routes.
// The benchmark times exactly this as its reference.
func (p *podNet) wire(id int, dual bool) error {
	hostIf := fmt.Sprintf("vp%d", id)
	if err := netns.Veth(p.node, hostIf, p.pod, "eth0"); err != nil {
		return err
	}
	p.gw4 = netip.MustParseAddr(fmt.Sprintf("10.244.%d.1", id))
	p.addrs = []netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("10.244.%d.2/24", id))}
	if err := netns.AddAddr(p.node, hostIf, netip.MustParsePrefix(fmt.Sprintf("10.244.%d.1/24", id))); err != nil {
		return err
	}
	if err := netns.AddAddr(p.pod, "eth0", p.addrs[0]); err != nil {
		return err
	}
	if err := netns.AddRoute(p.pod, netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: p.gw4, Dev: "eth0"}); err != nil {
		return err
	}
	if dual {
		v6 := netip.MustParsePrefix(fmt.Sprintf("fd00:244:%d::2/64", id))
		p.addrs = append(p.addrs, v6)
		if err := netns.AddAddr(p.node, hostIf, netip.MustParsePrefix(fmt.Sprintf("fd00:244:%d::1/64", id))); err != nil {
			return err
		}
		if err := netns.AddAddr(p.pod, "eth0", v6); err != nil {
			return err
		}
		if err := netns.AddRoute(p.pod, netns.Route{Dst: netip.MustParsePrefix("::/0"), Gw: netip.MustParseAddr(fmt.Sprintf("fd00:244:%d::1", id)), Dev: "eth0"}); err != nil {
			return err
		}
	}
	return nil
}

func (p *podNet) close() {
	if p.pod != nil {
		_ = p.pod.Delete()
	}
	if p.node != nil {
		_ = p.node.Delete()
	}
}

// prevResult is what a ptp plugin before us would have returned.
func prevResult(netnsPath string, addrs []netip.Prefix) *current.Result {
	r := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{Name: "eth0", Sandbox: netnsPath}},
	}
	idx := 0
	for _, a := range addrs {
		gw := a.Masked().Addr().Next()
		r.IPs = append(r.IPs, &current.IPConfig{
			Address:   net.IPNet{IP: a.Addr().AsSlice(), Mask: net.CIDRMask(a.Bits(), a.Addr().BitLen())},
			Gateway:   gw.AsSlice(),
			Interface: &idx,
		})
	}
	return r
}

// testAgentSocket keeps the specs' handoff records out of the machine's
// /run/aether: the suite points every configuration at a socket of its own.
var testAgentSocket string

// netConf renders a chained plugin configuration; extra fields override or
// add keys (a nil value deletes one).
func netConf(cniVersion string, prev *current.Result, extra map[string]any) []byte {
	m := map[string]any{
		"cniVersion": cniVersion,
		"name":       "aether-test",
		"type":       "aether-cni",
	}
	if prev != nil {
		m["prevResult"] = prev
	}
	if testAgentSocket != "" {
		m["agentSocket"] = testAgentSocket
	}
	for k, v := range extra {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return b
}

func cmdArgs(netnsPath string, conf []byte) *skel.CmdArgs {
	return &skel.CmdArgs{
		ContainerID: "aether-test-container",
		Netns:       netnsPath,
		IfName:      "eth0",
		StdinData:   conf,
	}
}

// nftGeneration reads the nftables ruleset generation of a namespace. The
// kernel bumps it once per committed transaction, so the difference across
// an ADD counts its transactions independently of the installer's own count.
func nftGeneration(n *netns.NS) (uint32, error) {
	h, err := vnetns.GetFromPath(n.Path)
	if err != nil {
		return 0, fmt.Errorf("failed to open netns %q: %w", n.Path, err)
	}
	defer h.Close()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(h)})
	if err != nil {
		return 0, fmt.Errorf("failed to dial nfnetlink in netns %q: %w", n.Name, err)
	}
	defer c.Close()
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("failed to read the nftables generation in netns %q: %w", n.Name, err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, err
		}
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return uint32(ad.Bytes()[0])<<24 | uint32(ad.Bytes()[1])<<16 | uint32(ad.Bytes()[2])<<8 | uint32(ad.Bytes()[3]), nil
			}
		}
	}
	return 0, fmt.Errorf("nftables generation reply in netns %q carried no NFTA_GEN_ID", n.Name)
}

// goldenDir holds the rendered rule sets, one per case.
var goldenDir = filepath.Join("..", "..", "fixtures", "cni")

// checkGolden compares text with the golden file for name, or rewrites it
// under REFRESH_GOLDEN=true.
func checkGolden(name, text string) error {
	return golden.Check(filepath.Join(goldenDir, name+".golden"), "rendered", []byte(text))
}

// compareGolden compares without ever rewriting: the kernel's listing must
// match the golden the builder wrote.
func compareGolden(name, text string) error {
	return golden.Compare(filepath.Join(goldenDir, name+".golden"), "listed back", []byte(text))
}
