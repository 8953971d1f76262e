package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/privileged"
)

// meshUp brings the two-node scenario up under TPROXY capture and tears it
// down with the test.
func meshUp(t *testing.T) *Cluster {
	t.Helper()
	privileged.Require(t)
	c, err := Up(context.Background(), Config{Scenario: "testdata/two-nodes.yaml", Mode: constants.CaptureTProxy, RunDir: t.TempDir(), Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// probe sends one datagram from pod from to the echo service's VIP on the
// mesh port and says whether an echo backend recorded it: the backend's
// record is the witness, not the reply.
func probe(t *testing.T, c *Cluster, from *Pod, payload string) bool {
	t.Helper()
	vip, err := c.ServiceVIP("default", "echo")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := transparent.DialUDP(from.NS.Path, netip.AddrPort{}, netip.AddrPortFrom(vip, constants.ProxyL4OutboundPort), transparent.Options{})
	if err != nil {
		t.Fatalf("pod %s: %v", from.Key(), err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(payload)); err != nil {
		t.Fatalf("pod %s: send: %v", from.Key(), err)
	}
	// A reply means the backend has its record; without one, a second
	// passes before the records are read, far beyond a datagram's trip.
	_ = conn.SetReadDeadline(time.Now().Add(time.Second))
	_, _ = conn.Read(make([]byte, 256))
	for _, name := range []string{"echo-a", "echo-b"} {
		recs, err := c.Records("default", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if r.Event == "udp" && r.Payload == payload {
				return true
			}
		}
	}
	return false
}

// probeUntil probes from pod from until delivery is want, with a new
// payload each time, and fails the test when that never happens: the proxy
// applies the agent's configuration a moment after the agent publishes it.
// It returns the payload that matched.
func probeUntil(t *testing.T, c *Cluster, from *Pod, tag string, want bool) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		payload := fmt.Sprintf("%s-%s-%d", tag, from.Name, i)
		if probe(t, c, from, payload) == want {
			t.Logf("%s: pod %s: delivered=%v on probe %d", tag, from.Key(), want, i+1)
			return payload
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: datagrams from pod %s to the echo service: delivered=%v on every probe for 20s, want %v", tag, from.Key(), !want, want)
		}
	}
}

// neverDelivered checks, a while after they were sent, that no echo
// backend recorded the payloads probes found undelivered: a datagram that
// was only slow is not taken for one the mesh did not carry.
func neverDelivered(t *testing.T, c *Cluster, payloads []string) {
	t.Helper()
	time.Sleep(2 * time.Second)
	for _, name := range []string{"echo-a", "echo-b"} {
		recs, err := c.Records("default", name)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if slices.Contains(payloads, r.Payload) {
				t.Fatalf("%s recorded %q late: the datagram was carried after all", name, r.Payload)
			}
		}
	}
}

// agentMetric reads one unlabelled metric of node n's agent.
func agentMetric(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	body, err := n.Get(context.Background(), n.AgentMetrics, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	v, ok := Metric(body, name, nil)
	if !ok {
		t.Fatalf("node %s's agent has no metric %s", n.Name, name)
	}
	return v
}

// waitAgentBuilt waits until node n's agent has published a snapshot built
// from the registry (not only the state dir's last-good one) that leaves
// exactly withoutNetns local pods without a netns path.
func waitAgentBuilt(t *testing.T, n *Node, withoutNetns int) {
	t.Helper()
	err := poll(context.Background(), 20*time.Second, func() (bool, error) {
		return agentMetric(t, n, "aether_agent_snapshot_published_total") >= 1 &&
			agentMetric(t, n, "aether_agent_pods_without_netns") == float64(withoutNetns), nil
	})
	if err != nil {
		t.Fatalf("node %s's agent never published a snapshot with %d pod(s) without netns: %v", n.Name, withoutNetns, err)
	}
}

// listenerAcks is how many listener responses node n's proxy has applied.
func listenerAcks(t *testing.T, n *Node) float64 {
	t.Helper()
	body, err := n.Get(context.Background(), n.ProxyMetrics, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Metric(body, "aether_proxy_xds_updates_total", map[string]string{"type": "type.googleapis.com/envoy.config.listener.v3.Listener", "result": "ack"})
	return v
}

func podsOn(c *Cluster, node string) []*Pod {
	var out []*Pod
	for _, p := range c.Pods() {
		if p.Node == node {
			out = append(out, p)
		}
	}
	return out
}

// Each node's pods are handed to that node's agent through a socket in the
// run dir, never through the machine's /run/aether; the records name the
// pod, its netns and its IP; and the registry file the agents read carries
// no netns path, so the handoff is the only source of one.
func TestPodsAreHandedToTheirNodesAgent(t *testing.T) {
	c := meshUp(t)
	machine := handoff.StateDir(handoff.DefaultSocket)
	for _, p := range c.Pods() {
		rec, found, err := c.HandoffRecord(p)
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			t.Fatalf("pod %s has no handoff record in node %s's directory", p.Key(), p.Node)
		}
		if rec.Namespace != p.Namespace || rec.Name != p.Name || rec.Netns != p.NS.Path || len(rec.IPs) != 1 || rec.IPs[0] != p.IP {
			t.Fatalf("pod %s's record is %+v, want its namespace, name, netns %s and IP %s", p.Key(), rec, p.NS.Path, p.IP)
		}
		if _, err := os.Stat(filepath.Join(string(machine), rec.ContainerID+":"+rec.IfName+".json")); err == nil {
			t.Fatalf("pod %s was recorded in the machine's %s", p.Key(), machine)
		}
	}
	b, err := os.ReadFile(c.RegistryFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "netns") {
		t.Fatalf("the registry file %s gives netns paths:\n%s", c.RegistryFile, b)
	}
	for _, n := range c.Nodes() {
		if v := agentMetric(t, n, "aether_agent_pods_without_netns"); v != 0 {
			t.Errorf("node %s's agent has %v pod(s) without netns after every ADD", n.Name, v)
		}
	}
}

// A restarted agent binds every pod's listeners again from the handoff
// records. The control is the same restart with the records moved away, an
// agent whose handoff does not survive it: its pods go without listeners
// and datagrams sent after the restart reach no backend. The subject
// restores the records and restarts again: a datagram from every pod sent
// after that restart is in an echo backend's record.
func TestAgentRestartRelearnsPods(t *testing.T) {
	c := meshUp(t)
	for _, p := range c.Pods() {
		probeUntil(t, c, p, "before", true)
	}
	restart := func(n *Node, between func()) {
		t.Helper()
		if err := c.StopAgent(n); err != nil {
			t.Fatal(err)
		}
		between()
		if err := c.StartAgent(context.Background(), n); err != nil {
			t.Fatal(err)
		}
	}

	t.Log("control: each agent restarts without its handoff records")
	for _, n := range c.Nodes() {
		dir := string(handoff.StateDir(n.HandoffSocket))
		restart(n, func() {
			if err := os.Rename(dir, dir+".aside"); err != nil {
				t.Fatal(err)
			}
		})
		waitAgentBuilt(t, n, len(podsOn(c, n.Name)))
	}
	var lost []string
	for _, p := range c.Pods() {
		lost = append(lost, probeUntil(t, c, p, "control", false))
	}
	neverDelivered(t, c, lost)

	t.Log("subject: each agent restarts with its handoff records")
	for _, n := range c.Nodes() {
		dir := string(handoff.StateDir(n.HandoffSocket))
		restart(n, func() {
			if err := os.Rename(dir+".aside", dir); err != nil {
				t.Fatal(err)
			}
		})
		waitAgentBuilt(t, n, 0)
	}
	for _, p := range c.Pods() {
		probeUntil(t, c, p, "after-restart", true)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// An ADD made while the node's agent is away succeeds, and the pod gets its
// listener when the agent is back. The pod's sandbox goes (DEL, heard by
// the agent, which drops its listener) and a new one is added while the
// agent is stopped: until the agent returns the pod's datagrams reach no
// backend, then they do.
func TestAgentDownDuringADD(t *testing.T) {
	c := meshUp(t)
	client := c.Pod("default", "client")
	node := c.Node(client.Node)
	probeUntil(t, c, client, "before", true)

	acks := listenerAcks(t, node)
	if err := c.DelPod(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	waitAgentBuilt(t, node, 1)
	// The proxy has dropped the pod's listener before the agent goes, or
	// it would keep it through the agent's absence.
	if err := poll(context.Background(), 20*time.Second, func() (bool, error) { return listenerAcks(t, node) > acks, nil }); err != nil {
		t.Fatalf("node %s's proxy applied no listener update after the DEL: %v", node.Name, err)
	}

	if err := c.StopAgent(node); err != nil {
		t.Fatal(err)
	}
	if err := c.AddPod(context.Background(), client); err != nil {
		t.Fatalf("ADD failed while the agent was away (requireAgent is off): %v", err)
	}
	if _, found, err := c.HandoffRecord(client); err != nil || !found {
		t.Fatalf("the ADD left no handoff record for the agent to find (err %v)", err)
	}
	neverDelivered(t, c, []string{probeUntil(t, c, client, "agent-away", false)})

	if err := c.StartAgent(context.Background(), node); err != nil {
		t.Fatal(err)
	}
	waitAgentBuilt(t, node, 0)
	probeUntil(t, c, client, "agent-back", true)
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}
