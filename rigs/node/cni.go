package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
)

// NetworkName is the CNI network the rig attaches pods to.
const NetworkName = "aether-rig"

// podIfName is the pod's interface, CNI_IFNAME.
const podIfName = "eth0"

// cniRunner drives libcni as a container runtime would: one conflist per
// pod, executed from the pod's node namespace (the plugins treat the
// namespace they run in as the host).
type cniRunner struct {
	c    *Cluster
	conf *libcni.CNIConfig
	log  *os.File
}

func newCNIRunner(c *Cluster) (*cniRunner, error) {
	// The plugins' stderr (their logs) goes to the run dir, not the test's
	// output.
	logPath := filepath.Join(c.RunDir, "logs", "cni.log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open CNI log %q: %w", logPath, err)
	}
	exec := &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: lf}, PluginDecoder: version.PluginDecoder{}}
	return &cniRunner{c: c, log: lf, conf: libcni.NewCNIConfigWithCacheDir([]string{c.cfg.Bin.Dir}, filepath.Join(c.RunDir, "cni-cache"), exec)}, nil
}

// confList is the chain for one pod: ptp + static IPAM for the pod's
// scenario address, then aether-cni with the cluster's capture mode.
func (r *cniRunner) confList(p *Pod) (*libcni.NetworkConfigList, error) {
	plugins := []map[string]any{{
		"type":   "ptp",
		"ipMasq": false,
		"ipam": map[string]any{
			"type":      "static",
			"addresses": []map[string]any{{"address": netip.PrefixFrom(p.IP, 24).String(), "gateway": gatewayFor(p.IP).String()}},
			"routes":    []map[string]any{{"dst": "0.0.0.0/0"}},
		},
	}}
	if r.c.Mode != NoMesh {
		// Each node's agent has its own socket in the run dir, so a rig
		// never hands its pods to the machine's agent (/run/aether).
		plugins = append(plugins, map[string]any{
			"type":        "aether-cni",
			"captureMode": string(r.c.Mode),
			"logLevel":    "debug",
			"agentSocket": r.c.Node(p.Node).HandoffSocket,
		})
	}
	b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": NetworkName, "plugins": plugins})
	if err != nil {
		return nil, fmt.Errorf("failed to encode the CNI config for pod %s: %w", p.Key(), err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		return nil, fmt.Errorf("CNI config for pod %s: %w", p.Key(), err)
	}
	return list, nil
}

func (r *cniRunner) runtimeConf(p *Pod) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: p.cniID,
		NetNS:       p.NS.Path,
		IfName:      podIfName,
		Args: [][2]string{
			{"IgnoreUnknown", "true"},
			{"K8S_POD_NAMESPACE", p.Namespace},
			{"K8S_POD_NAME", p.Name},
			{"K8S_POD_INFRA_CONTAINER_ID", p.cniID},
		},
	}
}

func (r *cniRunner) add(ctx context.Context, p *Pod) error {
	list, err := r.confList(p)
	if err != nil {
		return err
	}
	p.adds++
	p.cniID = fmt.Sprintf("aeth-%d-c%d-%s-%s-%d", os.Getpid(), r.c.id, p.Namespace, p.Name, p.adds)
	node := r.c.Node(p.Node)
	err = node.NS.Do(func() error {
		_, err := r.conf.AddNetworkList(ctx, list, r.runtimeConf(p))
		return err
	})
	if err != nil {
		// ADD failed part way: let the plugins undo what they did before the
		// namespace goes.
		_ = r.del(ctx, p)
		return fmt.Errorf("CNI ADD for pod %s on node %s: %w", p.Key(), p.Node, err)
	}
	return nil
}

func (r *cniRunner) del(ctx context.Context, p *Pod) error {
	list, err := r.confList(p)
	if err != nil {
		return err
	}
	node := r.c.Node(p.Node)
	err = node.NS.Do(func() error { return r.conf.DelNetworkList(ctx, list, r.runtimeConf(p)) })
	p.cniID = ""
	if err != nil {
		return fmt.Errorf("CNI DEL for pod %s on node %s: %w", p.Key(), p.Node, err)
	}
	return nil
}

// DelPod runs CNI DEL for pod p, as a runtime does when the pod's sandbox
// goes: its interface and capture rules go, and its node's agent is told.
// The namespace and the backend in it stay, for AddPod.
func (c *Cluster) DelPod(ctx context.Context, p *Pod) error {
	if p.cniID == "" {
		return fmt.Errorf("pod %s has no attachment to delete", p.Key())
	}
	return c.cni.del(ctx, p)
}

// AddPod runs CNI ADD for pod p under a new container ID, as a runtime does
// for a pod's new sandbox; it fails when p is attached already.
func (c *Cluster) AddPod(ctx context.Context, p *Pod) error {
	if p.cniID != "" {
		return fmt.Errorf("pod %s is attached already (%s)", p.Key(), p.cniID)
	}
	return c.cni.add(ctx, p)
}

// HandoffRecord reads the record of pod p's current attachment from its
// node's handoff directory, what the node's agent re-learns on a restart.
// found is false when p has no attachment or the attachment no record.
func (c *Cluster) HandoffRecord(p *Pod) (rec handoff.Pod, found bool, err error) {
	if p.cniID == "" {
		return handoff.Pod{}, false, nil
	}
	pods, bad, err := handoff.StateDir(c.Node(p.Node).HandoffSocket).Read()
	if err = errors.Join(append(bad, err)...); err != nil {
		return handoff.Pod{}, false, fmt.Errorf("node %s's handoff records: %w", p.Node, err)
	}
	ref := handoff.Ref{ContainerID: p.cniID, IfName: podIfName}
	for _, r := range pods {
		if r.Ref == ref {
			return r, true, nil
		}
	}
	return handoff.Pod{}, false, nil
}
