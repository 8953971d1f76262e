package node

import (
	"fmt"
	"slices"
)

// SetAgentArgs replaces the extra flags every aether-agent started from now
// on gets (Config.AgentArgs): a soak restarts the agents with another
// --mesh-transport while the proxies keep running. Agents already running
// keep theirs until restarted.
func (c *Cluster) SetAgentArgs(args []string) {
	c.cfg.AgentArgs = slices.Clone(args)
}

// ProxyMetricsURL is the proxy's /metrics as its node's agent reaches it,
// on the node's own loopback (aether-agent --proxy-metrics-url): the same
// on every node.
func ProxyMetricsURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d/metrics", proxyMetricsPort)
}
