package node

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
)

func TestRestartEpochArguments(t *testing.T) {
	argv := []string{"aether-proxy", "--node", "n", "--restart-epoch", "1", "--drain-time", "5s", "--xds", "x"}
	if got := restartEpoch(argv); got != 1 {
		t.Errorf("restartEpoch = %d, want 1", got)
	}
	if got := restartEpoch(argv[:3]); got != 0 {
		t.Errorf("restartEpoch without the flag = %d, want 0", got)
	}
	want := []string{"aether-proxy", "--node", "n", "--xds", "x", "--restart-epoch", "2", "--drain-time", "1s", "--parent-shutdown-time", "2s"}
	if got := withRestartEpoch(argv, 2); !slices.Equal(got, want) {
		t.Errorf("withRestartEpoch = %v, want %v", got, want)
	}
}

// A node's proxy hot restarts twice (epochs 0 → 1 → 2), the second time
// while the node's agent restarts (#1085: the new epoch starts with no
// agent to configure it), as the client pod sends a steady stream of
// datagrams through it: every one is answered, each epoch's process
// replaces the last (its pid is n.ProxyPID, the old one is gone), and each
// writes its own log in the run.
func TestHotRestartProxy(t *testing.T) {
	c := meshUp(t)
	n, client := c.Node("node-a"), c.Pod("default", "client")
	probeUntil(t, c, client, "before", true)
	vip, err := c.ServiceVIP("default", "echo")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := transparent.DialUDP(client.NS.Path, netip.AddrPort{}, netip.AddrPortFrom(vip, constants.ProxyL4OutboundPort), transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var sent, answered int
	var firstErr error
	wg.Go(func() {
		buf := make([]byte, 256)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			sent++
			if _, err := conn.Write(fmt.Appendf(nil, "hr-%d", i)); err == nil {
				_ = conn.SetReadDeadline(time.Now().Add(2 * time.Second))
				_, err = conn.Read(buf)
				if err == nil {
					answered++
					continue
				}
				if firstErr == nil {
					firstErr = err
				}
			}
		}
	})
	for epoch := 1; epoch <= 2; epoch++ {
		old := n.ProxyPID()
		var err error
		if epoch == 1 {
			err = c.HotRestartProxy(context.Background(), n)
		} else {
			err = hotRestartDuringAgentRestart(c, n)
		}
		if err != nil {
			close(stop)
			wg.Wait()
			t.Fatalf("hot restart to epoch %d: %v", epoch, err)
		}
		if n.ProxyPID() == old {
			t.Errorf("epoch %d: ProxyPID is still the old process %d", epoch, old)
		}
		if err := syscall.Kill(old, 0); err == nil {
			t.Errorf("epoch %d: the old proxy %d still runs", epoch, old)
		}
		log := filepath.Join(c.RunDir, "logs", fmt.Sprintf("proxy~node-a~epoch-%d.log", epoch))
		if b, err := os.ReadFile(log); err != nil || !strings.Contains(string(b), "hot restart: parent exited") {
			t.Errorf("epoch %d's log %s does not show the parent exiting (err %v)", epoch, log, err)
		}
	}
	// Pacing: the senders keep going a little past the last restart.
	time.Sleep(200 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%d datagrams sent across two hot restarts, %d answered", sent, answered)
	if answered != sent || sent == 0 {
		t.Errorf("%d of %d datagrams answered across the hot restarts (first failure: %v), want all", answered, sent, firstErr)
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
}

// hotRestartDuringAgentRestart stops n's agent, starts the proxy's hot
// restart, and brings the agent back while the new epoch waits for its
// configuration (the old one serves meanwhile).
func hotRestartDuringAgentRestart(c *Cluster, n *Node) error {
	if err := c.StopAgent(n); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- c.HotRestartProxy(context.Background(), n) }()
	time.Sleep(500 * time.Millisecond)
	if err := c.StartAgent(context.Background(), n); err != nil {
		return err
	}
	return <-done
}
