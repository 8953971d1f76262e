package constants

// Netns says which network namespace a mark is set in and read in. A mark
// does not cross from one to the other: a veth moving a packet into another
// netns clears skb->mark (the Phase 0 rig's MARK-POD case shows it on the
// wire), so a mark only ever meets the rules of the netns it was set in.
type Netns string

const (
	// PodNetns is a pod's netns, where aether's capture chain runs and
	// where the proxy's capture listeners live.
	PodNetns Netns = "pod"
	// NodeNetns is the node's netns, where the proxy's upstream sockets
	// live (it runs hostNetwork) and where kube-proxy and the node's CNI
	// program their rules. No aether chain reads a mark there.
	NodeNetns Netns = "node"
)

// PassthroughMark is the SO_MARK the proxy gives a socket it makes in netns
// n. In a pod netns it is CapturePassthroughFwMark, which the capture chain
// reads to let the proxy's own egress pass (038 D2). In the node netns it is
// none: nothing of aether's reads it there, and the node's own rules would
// (kube-proxy's KUBE-FIREWALL drops 0xae7e, which carries bit 0x8000).
func PassthroughMark(n Netns) uint32 {
	if n == PodNetns {
		return CapturePassthroughFwMark
	}
	return 0
}

// MarkUse is one mark aether sets, and the netns it sets it in.
type MarkUse struct {
	Name  string
	Mark  uint32
	Netns Netns
}

// MarkUses lists every mark aether sets and where: the divert mark in the
// pod netns (the capture chain sets it) and the passthrough mark wherever
// PassthroughMark gives one.
func MarkUses() []MarkUse {
	uses := []MarkUse{{Name: "divert", Mark: CaptureDivertFwMark, Netns: PodNetns}}
	for _, n := range []Netns{PodNetns, NodeNetns} {
		if m := PassthroughMark(n); m != 0 {
			uses = append(uses, MarkUse{Name: "passthrough", Mark: m, Netns: n})
		}
	}
	return uses
}

// Mark is a netfilter mark match as the kernel evaluates it: a packet whose
// mark m satisfies m&Mask == Value matches.
type Mark struct {
	Value uint32
	Mask  uint32
}

// Matches reports whether a packet carrying mark m matches this mark rule.
func (k Mark) Matches(m uint32) bool { return m&k.Mask == k.Value }

// Collides reports whether carrying mark m changes what this rule decides,
// compared with an unmarked packet. For a rule testing set bits
// (Value != 0) that is "m matches"; for one testing clear bits (Value 0,
// as Calico's "--mark 0/bit" does) it is "m has a bit of the mask".
func (k Mark) Collides(m uint32) bool { return k.Matches(m) != k.Matches(0) }

// ForeignMark is a masked mark another component's rules test, in the netns
// they run in, with the file in that component's repository that sets it.
type ForeignMark struct {
	Mark
	Owner  string
	Use    string
	Netns  Netns
	Source string
}

// ForeignMarks is the table of marks real nodes and pods carry, each read
// from its owner's source. The D2 gate (CheckMarkUses) evaluates every
// MarkUse against the entries of its own netns.
func ForeignMarks() []ForeignMark {
	return []ForeignMark{
		// kubelet's syncNetworkUtil: KUBE-MARK-DROP sets bit
		// iptablesDropBit (default 15), KUBE-FIREWALL in filter INPUT and
		// OUTPUT drops "-m mark --mark 0x8000/0x8000"; KUBE-MARK-MASQ sets
		// iptablesMasqueradeBit (default 14) and KUBE-POSTROUTING returns
		// unless "--mark 0x4000/0x4000". kube-proxy's iptables, ipvs and
		// nftables modes use the same masquerade bit.
		{Mark: Mark{Value: 0x8000, Mask: 0x8000}, Owner: "kube-proxy", Use: "KUBE-FIREWALL drop", Netns: NodeNetns,
			Source: "kubernetes/kubernetes pkg/kubelet/kubelet_network_linux.go; defaults in pkg/kubelet/apis/config/v1beta1/defaults.go"},
		{Mark: Mark{Value: 0x4000, Mask: 0x4000}, Owner: "kube-proxy", Use: "KUBE-POSTROUTING masquerade", Netns: NodeNetns,
			Source: "kubernetes/kubernetes pkg/kubelet/kubelet_network_linux.go; pkg/proxy/nftables/proxier.go"},
		// Felix takes every mark bit it uses from IptablesMarkMask
		// (default 0xffff0000) and tests each set or clear.
		{Mark: Mark{Value: 0, Mask: 0xffff0000}, Owner: "Calico", Use: "Felix mark bits (IptablesMarkMask)", Netns: NodeNetns,
			Source: "projectcalico/calico felix/config/config_params.go"},
		// Cilium's magic marks live under MagicMarkHostMask 0x0f00; the
		// host datapath hands "mark & 0xf00 == 0xe00" to IPsec encryption.
		{Mark: Mark{Value: 0x0200, Mask: 0x0f00}, Owner: "Cilium", Use: "MARK_MAGIC_TO_PROXY", Netns: NodeNetns,
			Source: "cilium/cilium pkg/datapath/linux/linux_defaults/mark.go; bpf/lib/common.h"},
		{Mark: Mark{Value: 0x0a00, Mask: 0x0e00}, Owner: "Cilium", Use: "MagicMarkIsProxy", Netns: NodeNetns,
			Source: "cilium/cilium pkg/datapath/linux/linux_defaults/mark.go"},
		{Mark: Mark{Value: 0x0c00, Mask: 0x0f00}, Owner: "Cilium", Use: "MARK_MAGIC_HOST", Netns: NodeNetns,
			Source: "cilium/cilium pkg/datapath/linux/linux_defaults/mark.go; bpf/lib/common.h"},
		{Mark: Mark{Value: 0x0d00, Mask: 0x0f00}, Owner: "Cilium", Use: "MARK_MAGIC_DECRYPT", Netns: NodeNetns,
			Source: "cilium/cilium pkg/datapath/linux/linux_defaults/mark.go; bpf/lib/common.h"},
		{Mark: Mark{Value: 0x0e00, Mask: 0x0f00}, Owner: "Cilium", Use: "MARK_MAGIC_ENCRYPT (IPsec)", Netns: NodeNetns,
			Source: "cilium/cilium pkg/datapath/linux/linux_defaults/mark.go; bpf/lib/common.h; bpf/bpf_host.c"},
		{Mark: Mark{Value: 0x0f00, Mask: 0x0f00}, Owner: "Cilium", Use: "MARK_MAGIC_IDENTITY", Netns: NodeNetns,
			Source: "cilium/cilium pkg/datapath/linux/linux_defaults/mark.go; bpf/lib/common.h"},
		// The VPC CNI's connmark for NodePort traffic, default 0x80.
		{Mark: Mark{Value: 0x80, Mask: 0x80}, Owner: "AWS VPC CNI", Use: "AWS_VPC_K8S_CNI_CONNMARK", Netns: NodeNetns,
			Source: "aws/amazon-vpc-cni-k8s pkg/networkutils/network.go"},
		// Istio's in-pod (ambient) rules run in the pod netns beside ours:
		// ztunnel's own traffic carries 1337 (0x539) under 0xfff and its
		// tproxied connections the connmark 0x111/0xfff.
		{Mark: Mark{Value: 0x539, Mask: 0xfff}, Owner: "Istio ztunnel", Use: "InpodMark (1337)", Netns: PodNetns,
			Source: "istio/istio cni/pkg/iptables/iptables.go"},
		{Mark: Mark{Value: 0x111, Mask: 0xfff}, Owner: "Istio ztunnel", Use: "InpodTProxyMark", Netns: PodNetns,
			Source: "istio/istio cni/pkg/iptables/iptables.go"},
	}
}
