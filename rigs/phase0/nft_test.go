package phase0

import (
	"testing"

	"github.com/google/nftables"

	"github.com/aether-mesh/aether/rigs/netns"
)

func deleteRule(t *testing.T, n *netns.NS, chain string, index int) {
	t.Helper()
	err := withNft(n, func(c *nftables.Conn) error {
		tb := &nftables.Table{Name: rigTable, Family: nftables.TableFamilyIPv4}
		ch := &nftables.Chain{Name: chain, Table: tb}
		rules, err := c.GetRules(tb, ch)
		if err != nil {
			return err
		}
		if index >= len(rules) {
			t.Fatalf("chain %q has %d rules, no rule %d", chain, len(rules), index)
		}
		if err := c.DelRule(&nftables.Rule{Table: tb, Chain: ch, Handle: rules[index].Handle}); err != nil {
			return err
		}
		return c.Flush()
	})
	if err != nil {
		t.Fatalf("failed to delete rule %d of chain %q: %v", index, chain, err)
	}
}
