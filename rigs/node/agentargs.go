package node

import "slices"

// SetAgentArgs replaces the extra flags every aether-agent started from now
// on gets (Config.AgentArgs): a soak restarts the agents with another
// --mesh-transport while the proxies keep running. Agents already running
// keep theirs until restarted.
func (c *Cluster) SetAgentArgs(args []string) {
	c.cfg.AgentArgs = slices.Clone(args)
}
