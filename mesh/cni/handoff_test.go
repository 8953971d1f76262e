package cni

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/testutils"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// podCNIArgs are the CNI_ARGS containerd passes for pod demo/web-0.
const podCNIArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=web-0;K8S_POD_UID=3f1c-uid;K8S_POD_INFRA_CONTAINER_ID=aether-test-container"

// serveAgent runs a handoff server on socket until the spec ends or stop.
func serveAgent(socket string) (s *handoff.Server, stop func()) {
	GinkgoHelper()
	s, err := handoff.Listen(socket, nil)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); Expect(<-done).To(Succeed()) }) }
	DeferCleanup(stop)
	return s, stop
}

// witness is an agent of the test's own: it answers every call with code
// after delay, and records each call with the capture state it found in the
// pod netns at that moment, an independent view of what ADD had done when
// it called.
type witness struct {
	mu    sync.Mutex
	calls []string
	rules []bool // the pod netns held rules of ours at the call
}

func serveWitness(socket, podPath string, code int, delay time.Duration) *witness {
	GinkgoHelper()
	w := &witness{}
	ln, err := net.Listen("unix", socket)
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		st, err := (&Installer{NetnsPath: podPath}).State()
		w.mu.Lock()
		w.calls = append(w.calls, r.Method+" "+r.URL.Path)
		w.rules = append(w.rules, err == nil && !st.Empty())
		w.mu.Unlock()
		// A slow agent on purpose, a delay and not a wait: it answers late.
		time.Sleep(delay)
		rw.WriteHeader(code)
	})}
	go func() { _ = srv.Serve(ln) }()
	DeferCleanup(srv.Close)
	return w
}

func (w *witness) seen() ([]string, []bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...), append([]bool(nil), w.rules...)
}

var _ = Describe("the pod handoff to the node agent", func() {
	var (
		p      *podNet
		socket string
	)
	BeforeEach(func() {
		privileged.Require(GinkgoT())
		var err error
		p, err = newPod("hand", true)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(p.close)
		socket = filepath.Join(GinkgoT().TempDir(), "cni.sock")
	})
	podArgs := func(extra map[string]any) *skel.CmdArgs {
		m := map[string]any{"agentSocket": socket}
		for k, v := range extra {
			m[k] = v
		}
		a := cmdArgs(p.pod.Path, netConf("1.1.0", prevResult(p.pod.Path, p.addrs), m))
		a.Args = podCNIArgs
		return a
	}
	records := func() []handoff.Pod {
		GinkgoHelper()
		recs, bad, err := handoff.StateDir(socket).Read()
		Expect(err).NotTo(HaveOccurred())
		Expect(bad).To(BeEmpty())
		return recs
	}
	wantPod := func() handoff.Pod {
		GinkgoHelper()
		ino, err := p.pod.Inode()
		Expect(err).NotTo(HaveOccurred())
		hp := handoff.Pod{
			Ref: handoff.Ref{ContainerID: "aether-test-container", IfName: "eth0"}, Network: "aether-test",
			Namespace: "demo", Name: "web-0", UID: "3f1c-uid", Netns: p.pod.Path, NetnsInode: ino,
		}
		for _, a := range p.addrs {
			hp.IPs = append(hp.IPs, a.Addr())
		}
		return hp
	}

	It("hands the pod over once its rules are in, and takes it back on DEL", func() {
		agent, _ := serveAgent(socket)
		args := podArgs(nil)
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		pods, changed := agent.Pods()
		Expect(pods).To(Equal([]handoff.Pod{wantPod()}))
		Expect(records()).To(Equal(pods))
		Expect(mustState(p.pod.Path).Empty()).To(BeFalse())

		Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
		Eventually(changed).Should(BeClosed())
		pods, _ = agent.Pods()
		Expect(pods).To(BeEmpty())
		Expect(records()).To(BeEmpty())
		nothingOurs(p.pod.Path)
		// DEL again, and DEL once the netns is gone.
		Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
		Expect(p.pod.Delete()).To(Succeed())
		Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
	})

	It("calls the agent only after the capture rules are installed", func() {
		w := serveWitness(socket, p.pod.Path, http.StatusNoContent, 0)
		args := podArgs(nil)
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
		calls, rules := w.seen()
		Expect(calls).To(Equal([]string{"POST /v1/pods", "DELETE /v1/pods/aether-test-container/eth0"}))
		Expect(rules).To(Equal([]bool{true, true}), "the pod netns held the capture rules at each call (DEL tells the agent first)")
	})

	It("takes the pod back on DEL after its namespace was excluded", func() {
		agent, _ := serveAgent(socket)
		args := podArgs(nil)
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		excluded := podArgs(map[string]any{"excludeNamespaces": []string{"demo"}})
		Expect(testutils.CmdDelWithArgs(excluded, func() error { return Del(excluded) })).To(Succeed())
		pods, _ := agent.Pods()
		Expect(pods).To(BeEmpty())
		Expect(records()).To(BeEmpty())
	})

	It("hands over no pod the runtime names no Kubernetes pod for", func() {
		agent, _ := serveAgent(socket)
		args := podArgs(nil)
		args.Args = ""
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(mustState(p.pod.Path).Empty()).To(BeFalse())
		pods, _ := agent.Pods()
		Expect(pods).To(BeEmpty())
		Expect(records()).To(BeEmpty())
	})

	It("starts the pod when the agent is away, and the agent learns it when it comes back", func() {
		args := podArgs(nil)
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(mustState(p.pod.Path).Empty()).To(BeFalse())
		Expect(records()).To(Equal([]handoff.Pod{wantPod()}))

		agent, stop := serveAgent(socket)
		pods, _ := agent.Pods()
		Expect(pods).To(Equal([]handoff.Pod{wantPod()}))

		// The agent goes again; DEL still succeeds, and the next agent
		// does not learn a pod that is gone.
		stop()
		Expect(testutils.CmdDelWithArgs(args, func() error { return Del(args) })).To(Succeed())
		nothingOurs(p.pod.Path)
		Expect(records()).To(BeEmpty())
		agent, _ = serveAgent(socket)
		pods, _ = agent.Pods()
		Expect(pods).To(BeEmpty())
	})

	It("a restarted agent re-learns the pods that exist and drops one whose netns went without a DEL", func() {
		agent, stop := serveAgent(socket)
		args := podArgs(nil)
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		other, err := newPod("hand-other", false)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(other.close)
		otherArgs := cmdArgs(other.pod.Path, netConf("1.1.0", prevResult(other.pod.Path, other.addrs), map[string]any{"agentSocket": socket}))
		otherArgs.ContainerID = "other-container"
		otherArgs.Args = "IgnoreUnknown=1;K8S_POD_NAMESPACE=demo;K8S_POD_NAME=other-0"
		_, _, err = testutils.CmdAddWithArgs(otherArgs, func() error { return Add(otherArgs) })
		Expect(err).NotTo(HaveOccurred())
		pods, _ := agent.Pods()
		Expect(pods).To(HaveLen(2))

		stop()
		agent, stop = serveAgent(socket)
		again, _ := agent.Pods()
		Expect(again).To(Equal(pods), "the same pods, field for field, after a restart")

		// The other pod's netns goes while the agent is away, and no DEL
		// ever comes (a runtime that crashed).
		stop()
		Expect(other.pod.Delete()).To(Succeed())
		agent, _ = serveAgent(socket)
		pods, _ = agent.Pods()
		Expect(pods).To(Equal([]handoff.Pod{wantPod()}))
		Expect(records()).To(Equal([]handoff.Pod{wantPod()}), "the stale record is gone too")
	})

	It("with requireAgent, fails ADD when the agent is away and leaves nothing", func() {
		args := podArgs(map[string]any{"requireAgent": true})
		gen, err := nftGeneration(p.pod)
		Expect(err).NotTo(HaveOccurred())
		_, _, err = testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		cniError(err, types.ErrTryAgainLater, `requireAgent: failed to hand pod aether-test-container over to the node agent on "`+socket+`"`)
		cniError(err, types.ErrTryAgainLater, "connect: no such file or directory")
		gen2, err := nftGeneration(p.pod)
		Expect(err).NotTo(HaveOccurred())
		Expect(gen2-gen).To(Equal(uint32(2)), "the install and its removal, one transaction each")
		nothingOurs(p.pod.Path)
		Expect(records()).To(BeEmpty())
		agent, _ := serveAgent(socket)
		pods, _ := agent.Pods()
		Expect(pods).To(BeEmpty())

		// Control: the same ADD with the agent there succeeds.
		_, _, err = testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		pods, _ = agent.Pods()
		Expect(pods).To(Equal([]handoff.Pod{wantPod()}))
	})

	It("with requireAgent, takes the pod back from an agent that answered too late", func() {
		w := serveWitness(socket, p.pod.Path, http.StatusNoContent, handoff.ClientTimeout+500*time.Millisecond)
		args := podArgs(map[string]any{"requireAgent": true})
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		cniError(err, types.ErrTryAgainLater, "Client.Timeout exceeded")
		nothingOurs(p.pod.Path)
		Expect(records()).To(BeEmpty())
		Eventually(func() []string { c, _ := w.seen(); return c }).WithTimeout(5 * time.Second).Should(
			Equal([]string{"POST /v1/pods", "DELETE /v1/pods/aether-test-container/eth0"}))
	})

	It("without requireAgent, starts the pod when the agent refuses it", func() {
		w := serveWitness(socket, p.pod.Path, http.StatusInternalServerError, 0)
		args := podArgs(nil)
		_, _, err := testutils.CmdAddWithArgs(args, func() error { return Add(args) })
		Expect(err).NotTo(HaveOccurred())
		Expect(mustState(p.pod.Path).Empty()).To(BeFalse())
		Expect(records()).To(HaveLen(1))
		calls, _ := w.seen()
		Expect(calls).To(Equal([]string{"POST /v1/pods"}))
	})

	It("GC forgets the records of its network's attachments the runtime no longer lists", func() {
		dir := handoff.StateDir(socket)
		mk := func(id, network string) handoff.Pod {
			hp := wantPod()
			hp.ContainerID, hp.Network, hp.Name = id, network, id
			Expect(dir.Write(hp)).To(Succeed())
			return hp
		}
		kept, gone, other := mk("kept", "aether-test"), mk("gone", "aether-test"), mk("other-net", "another-network")
		agent, _ := serveAgent(socket)
		pods, changed := agent.Pods()
		Expect(pods).To(HaveLen(3))

		// Without the list at all, nothing is collected.
		Expect(GC(cmdArgs("", netConf("1.1.0", nil, map[string]any{"agentSocket": socket})))).To(Succeed())
		Expect(records()).To(HaveLen(3))

		gc := cmdArgs("", netConf("1.1.0", nil, map[string]any{"agentSocket": socket,
			"cni.dev/valid-attachments": []map[string]string{{"containerID": "kept", "ifname": "eth0"}}}))
		Expect(GC(gc)).To(Succeed())
		Eventually(changed).Should(BeClosed())
		pods, _ = agent.Pods()
		Expect(pods).To(ConsistOf(kept, other))
		Expect(records()).To(ConsistOf(kept, other))
		_, err := os.Stat(filepath.Join(string(dir), gone.ContainerID+":eth0.json"))
		Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue())
	})
})
