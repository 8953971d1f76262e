package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/transparent"
)

// A pod removed from its node loses its sandbox, its handoff record and
// its registry entry; returned on a new address, it is listed and handed over at that address, the other
// node routes the address to it, and its datagrams through the mesh are
// delivered again. A bad entry is refused and changes nothing.
func TestPodRemovedAndReturnedOnANewIP(t *testing.T) {
	c := meshUp(t)
	ctx := context.Background()
	client, echoB := c.Pod("default", "client"), c.Pod("default", "echo-b")
	probeUntil(t, c, client, "before", true)
	oldIP := client.IP

	entry, err := c.RemovePod(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, err := c.HandoffRecord(client); err != nil || found {
		t.Fatalf("pod %s kept a handoff record after its removal (found %v, err %v)", client.Key(), found, err)
	}
	if listed(t, c, "name: client") {
		t.Fatalf("the registry file still lists pod %s after its removal", client.Key())
	}
	if _, err := c.RemovePod(ctx, client); err == nil || !strings.Contains(err.Error(), "removed already") {
		t.Fatalf("a second removal: %v, want a refusal saying it was removed already", err)
	}

	bad := entry
	bad.IP = "10.245.1.20"
	if err := c.ReturnPod(ctx, client, bad); err == nil || !strings.Contains(err.Error(), "outside the rig's pod range") {
		t.Fatalf("a return outside the pod range: %v, want a refusal naming the range", err)
	}
	if listed(t, c, "name: client") || client.IP != oldIP || client.cniID != "" {
		t.Fatalf("a refused return changed something: listed %v, ip %s, attachment %q", listed(t, c, "name: client"), client.IP, client.cniID)
	}

	entry.IP = "10.244.1.20"
	if err := c.ReturnPod(ctx, client, entry); err != nil {
		t.Fatal(err)
	}
	rec, found, err := c.HandoffRecord(client)
	if err != nil || !found || len(rec.IPs) != 1 || rec.IPs[0] != netip.MustParseAddr(entry.IP) {
		t.Fatalf("the returned pod's handoff record is %+v (found %v, err %v), want IP %s", rec, found, err, entry.IP)
	}
	if !listed(t, c, entry.IP) {
		t.Fatalf("the registry file does not list pod %s at %s", client.Key(), entry.IP)
	}
	if err := c.WaitProxyReady(ctx, c.Node(client.Node), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	probeUntil(t, c, client, "returned", true)
	// Straight from the other node's pod to the new address, on a port no
	// capture rule names: only the moved route and the new sandbox carry it.
	sendDirect(t, echoB, netip.AddrPortFrom(client.IP, 7001), "direct-to-new-ip")
	if err := poll(ctx, 5*time.Second, func() (bool, error) { return recorded(t, c, "client", "direct-to-new-ip"), nil }); err != nil {
		t.Fatalf("a datagram from %s to the returned pod's new address %s never reached its backend: %v", echoB.Key(), client.IP, err)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// listed says whether the registry file the agents read contains s.
func listed(t *testing.T, c *Cluster, s string) bool {
	t.Helper()
	b, err := os.ReadFile(c.RegistryFile)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(b), s)
}

func sendDirect(t *testing.T, from *Pod, dst netip.AddrPort, payload string) {
	t.Helper()
	conn, err := transparent.DialUDP(from.NS.Path, netip.AddrPort{}, dst, transparent.Options{})
	if err != nil {
		t.Fatalf("pod %s: %v", from.Key(), err)
	}
	defer conn.Close()
	if _, err := fmt.Fprint(conn, payload); err != nil {
		t.Fatalf("pod %s: send to %s: %v", from.Key(), dst, err)
	}
}

func recorded(t *testing.T, c *Cluster, pod, payload string) bool {
	t.Helper()
	recs, err := c.Records("default", pod)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Event == "udp" && r.Payload == payload {
			return true
		}
	}
	return false
}
