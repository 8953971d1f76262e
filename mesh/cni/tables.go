package cni

import (
	"fmt"

	"github.com/google/nftables"
)

// savedTable is an aether table as the kernel listed it just before an
// install replaced it: its chains, and their rules as raw expressions, so a
// failed re-ADD puts back exactly what was there, even rules outside the
// builder's vocabulary.
type savedTable struct {
	family nftables.TableFamily
	chains []savedChain
}

type savedChain struct {
	chain *nftables.Chain
	rules []*nftables.Rule
}

// replaceTables makes the aether table of each family hold exactly the given
// tables, in one transaction. A table an earlier install left is deleted and
// re-added inside the same batch, so the swap is atomic. With save, the
// tables it replaced are returned, listed before the swap.
//
// It lists the tables first (one dump) rather than using the add-then-delete
// idiom that needs no list: deleting a table queues kernel destroy work, and
// the next close of an nfnetlink socket waits for it (a synchronize_rcu,
// 10+ ms here). On a fresh pod there is then nothing to delete, nothing to
// save and nothing to wait for.
func (s *session) replaceTables(tables []Table, save bool) ([]savedTable, error) {
	have, err := s.ownTables()
	if err != nil {
		return nil, err
	}
	var saved []savedTable
	if save {
		for _, fam := range []Family{IPv4, IPv6} {
			nf, _ := nftFamily(fam)
			if have[nf] {
				st, err := s.saveTable(nf)
				if err != nil {
					return nil, err
				}
				saved = append(saved, st)
			}
		}
	}
	queued := false
	for _, fam := range []Family{IPv4, IPv6} {
		nf, _ := nftFamily(fam)
		t := &nftables.Table{Family: nf, Name: TableName}
		if have[nf] {
			s.nft.DelTable(t)
			queued = true
		}
		for _, bt := range tables {
			if bt.Family != fam {
				continue
			}
			if err := s.queueTable(t, bt); err != nil {
				return nil, err
			}
			queued = true
		}
	}
	return saved, s.commit(queued, "apply the aether nftables tables")
}

// restoreTables undoes replaceTables: it deletes the tables installed and
// puts the saved ones back, in one transaction.
func (s *session) restoreTables(installed []Table, saved []savedTable) error {
	queued := false
	for _, bt := range installed {
		nf, err := nftFamily(bt.Family)
		if err != nil {
			return err
		}
		s.nft.DelTable(&nftables.Table{Family: nf, Name: TableName})
		queued = true
	}
	for _, st := range saved {
		t := s.nft.AddTable(&nftables.Table{Family: st.family, Name: TableName})
		for _, sc := range st.chains {
			c := s.nft.AddChain(&nftables.Chain{
				Name: sc.chain.Name, Table: t, Type: sc.chain.Type,
				Hooknum: sc.chain.Hooknum, Priority: sc.chain.Priority, Policy: sc.chain.Policy,
			})
			for _, r := range sc.rules {
				s.nft.AddRule(&nftables.Rule{Table: t, Chain: c, Exprs: r.Exprs, UserData: r.UserData})
			}
		}
		queued = true
	}
	return s.commit(queued, "restore the previous aether nftables tables")
}

// ownTables reports which families hold an aether table.
func (s *session) ownTables() (map[nftables.TableFamily]bool, error) {
	s.stats.NFTDumps++
	existing, err := s.nft.ListTables()
	if err != nil {
		return nil, fmt.Errorf("failed to list nftables tables in netns %q: %w", s.path, err)
	}
	have := map[nftables.TableFamily]bool{}
	for _, t := range existing {
		if t.Name == TableName {
			have[t.Family] = true
		}
	}
	return have, nil
}

func (s *session) saveTable(nf nftables.TableFamily) (savedTable, error) {
	st := savedTable{family: nf}
	s.stats.NFTDumps++
	chains, err := s.nft.ListChainsOfTableFamily(nf)
	if err != nil {
		return st, fmt.Errorf("failed to list chains of table %s %s in netns %q: %w", familyOf(nf), TableName, s.path, err)
	}
	for _, c := range chains {
		if c.Table.Name != TableName {
			continue
		}
		s.stats.NFTDumps++
		rules, err := s.nft.GetRules(c.Table, c)
		if err != nil {
			return st, fmt.Errorf("failed to list rules of chain %s %s %s in netns %q: %w", familyOf(nf), TableName, c.Name, s.path, err)
		}
		st.chains = append(st.chains, savedChain{chain: c, rules: rules})
	}
	return st, nil
}

// queueTable adds the built table bt to the pending batch as t.
func (s *session) queueTable(t *nftables.Table, bt Table) error {
	if bt.Name != TableName {
		return fmt.Errorf("refusing to install table %s %s: the plugin owns only %q", bt.Family, bt.Name, TableName)
	}
	s.nft.AddTable(t)
	for _, c := range bt.Chains {
		nc, err := nftChain(t, c)
		if err != nil {
			return fmt.Errorf("failed to build table %s %s: %w", bt.Family, TableName, err)
		}
		s.nft.AddChain(nc)
		for i, r := range c.Rules {
			es, err := Exprs(r)
			if err != nil {
				return fmt.Errorf("failed to build rule %d of chain %s %s %s: %w", i, bt.Family, TableName, c.Name, err)
			}
			s.nft.AddRule(&nftables.Rule{Table: t, Chain: nc, Exprs: es})
		}
	}
	return nil
}

// commit flushes the pending batch, if anything was queued.
func (s *session) commit(queued bool, what string) error {
	if !queued {
		return nil
	}
	s.stats.NFTTransactions++
	if err := s.nft.Flush(); err != nil {
		return fmt.Errorf("failed to %s in netns %q: %w", what, s.path, err)
	}
	return nil
}
