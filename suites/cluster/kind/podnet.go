package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
)

// podNetConflist is the conflist name the pod network writes; the mesh's
// installer chains aether-cni into it.
const podNetConflist = "/etc/cni/net.d/10-aether-podnet.conflist"

// A nodeNet is one node's place in the pod network.
type nodeNet struct {
	name    string
	ip      netip.Addr
	podCIDR netip.Prefix
}

// podNetwork does what kind's kindnetd would (it cannot be had offline):
// each node gets a ptp + host-local conflist for the pod CIDR the
// controller manager allocated it, and a route to every other node's pod
// CIDR through that node's address.
func podNetwork(ctx context.Context, cs kubernetes.Interface, kindNodes map[string]nodes.Node) error {
	nets, err := nodeNets(ctx, cs, len(kindNodes))
	if err != nil {
		return err
	}
	for _, n := range nets {
		kn, ok := kindNodes[n.name]
		if !ok {
			return fmt.Errorf("pod network: the API server lists node %s, which kind does not", n.name)
		}
		conf, err := conflist(n.podCIDR)
		if err != nil {
			return err
		}
		var script strings.Builder
		fmt.Fprintf(&script, "set -e; mkdir -p /etc/cni/net.d; cat > %s.tmp; mv %s.tmp %s\n", podNetConflist, podNetConflist, podNetConflist)
		for _, o := range nets {
			if o.name != n.name {
				fmt.Fprintf(&script, "ip route replace %s via %s\n", o.podCIDR, o.ip)
			}
		}
		var out bytes.Buffer
		cmd := kn.CommandContext(ctx, "sh", "-c", script.String()).SetStdin(bytes.NewReader(conf)).SetStdout(&out).SetStderr(&out)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("pod network on node %s: %w\n%s", n.name, err, out.String())
		}
	}
	return nil
}

// nodeNets waits until every node has its pod CIDR and address.
func nodeNets(ctx context.Context, cs kubernetes.Interface, want int) ([]nodeNet, error) {
	var nets []nodeNet
	err := poll(ctx, 2*time.Minute, fmt.Sprintf("%d nodes with a pod CIDR", want), func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		nets = nets[:0]
		for _, node := range list.Items {
			n, ok, err := netOf(node)
			if err != nil {
				return false, err
			}
			if ok {
				nets = append(nets, n)
			}
		}
		return len(nets) == want, nil
	})
	return nets, err
}

func netOf(node corev1.Node) (nodeNet, bool, error) {
	n := nodeNet{name: node.Name}
	if node.Spec.PodCIDR == "" {
		return n, false, nil
	}
	var err error
	if n.podCIDR, err = netip.ParsePrefix(node.Spec.PodCIDR); err != nil {
		return n, false, fmt.Errorf("node %s: pod CIDR %q: %w", node.Name, node.Spec.PodCIDR, err)
	}
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil && ip.Is4() {
				n.ip = ip
				return n, true, nil
			}
		}
	}
	return n, false, nil
}

// conflist is ptp with host-local on the node's pod CIDR: each pod a
// veth to the node and a /32 route, as the embedded cluster's pods have.
func conflist(podCIDR netip.Prefix) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"cniVersion": "1.0.0",
		"name":       "aether-podnet",
		"plugins": []any{
			map[string]any{
				"type":   "ptp",
				"ipMasq": false,
				"ipam": map[string]any{
					"type":   "host-local",
					"ranges": [][]map[string]string{{{"subnet": podCIDR.String()}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}, "", "  ")
}

// waitNodesReady waits until want nodes report Ready.
func waitNodesReady(ctx context.Context, cs kubernetes.Interface, want int) error {
	return poll(ctx, 3*time.Minute, fmt.Sprintf("%d nodes Ready", want), func(ctx context.Context) (bool, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, n := range list.Items {
			for _, c := range n.Status.Conditions {
				if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready == want, nil
	})
}
