package main

import (
	"context"
	"net/netip"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// TestHandoffThroughTheBinary runs ADD and DEL as a runtime does, through
// libcni and the real binary's dispatch, against a handoff server on a
// socket of the test's own: the pod arrives with the identity of CNI_ARGS,
// the netns path and the addresses of prevResult, and leaves on DEL.
func TestHandoffThroughTheBinary(t *testing.T) {
	privileged.Require(t)
	pod, err := netns.Create("cnibin-pod")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pod.Delete(); err != nil {
			t.Error(err)
		}
	})
	socket := filepath.Join(t.TempDir(), "cni.sock")
	agent, err := handoff.Listen(socket, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- agent.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	conf, err := libcni.ConfFromBytes([]byte(`{"cniVersion":"1.1.0","name":"aether-pod-network","type":"aether-cni",
		"agentSocket":"` + socket + `","requireAgent":true,
		"prevResult":{"cniVersion":"1.1.0","interfaces":[{"name":"eth0","sandbox":"` + pod.Path + `"}],
		"ips":[{"address":"10.244.7.2/24","gateway":"10.244.7.1","interface":0},{"address":"fd00:244:7::2/64","interface":0}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	rt := &libcni.RuntimeConf{ContainerID: "binary-1", NetNS: pod.Path, IfName: "eth0", Args: [][2]string{
		{"IgnoreUnknown", "true"}, {"K8S_POD_NAMESPACE", "demo"}, {"K8S_POD_NAME", "web-0"},
		{"K8S_POD_INFRA_CONTAINER_ID", "binary-1"}, {"K8S_POD_UID", "7c0e-uid"},
	}}
	cni := runtime(t)
	if _, err := cni.AddNetwork(context.Background(), conf, rt); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	ino, err := pod.Inode()
	if err != nil {
		t.Fatal(err)
	}
	want := handoff.Pod{
		Ref: handoff.Ref{ContainerID: "binary-1", IfName: "eth0"}, Network: "aether-pod-network",
		Namespace: "demo", Name: "web-0", UID: "7c0e-uid", Netns: pod.Path, NetnsInode: ino,
		IPs: []netip.Addr{netip.MustParseAddr("10.244.7.2"), netip.MustParseAddr("fd00:244:7::2")},
	}
	pods, changed := agent.Pods()
	if len(pods) != 1 || !reflect.DeepEqual(pods[0], want) {
		t.Fatalf("after ADD the agent holds %+v, want exactly %+v", pods, want)
	}

	if err := cni.DelNetwork(context.Background(), conf, rt); err != nil {
		t.Fatalf("DEL: %v", err)
	}
	select {
	case <-changed:
	case <-time.After(5 * time.Second):
		t.Fatal("DEL notified the agent of no change")
	}
	if pods, _ := agent.Pods(); len(pods) != 0 {
		t.Fatalf("after DEL the agent holds %+v", pods)
	}
	if recs, _, err := handoff.StateDir(socket).Read(); err != nil || len(recs) != 0 {
		t.Fatalf("after DEL the records are %+v (%v)", recs, err)
	}
}
