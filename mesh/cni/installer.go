package cni

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
)

// ErrNetnsMissing and ErrNotNetns classify a bad netns path, so the plugin
// can answer DEL with success and ADD with the right CNI error code.
var (
	ErrNetnsMissing = errors.New("network namespace does not exist")
	ErrNotNetns     = errors.New("path is not a network namespace")
)

// Stats counts the kernel round trips an installer makes: one per
// nftables batch or dump, one per rtnetlink request or dump. A caller that
// wants the count passes a Stats; the benchmark reports it per ADD.
type Stats struct {
	NFTTransactions int // committed batches (Conn.Flush)
	NFTDumps        int // list requests
	Netlink         int // rtnetlink requests and dumps
}

// RoundTrips is the total.
func (s *Stats) RoundTrips() int { return s.NFTTransactions + s.NFTDumps + s.Netlink }

// Installer applies, lists back and removes the capture rule set in one
// network namespace, named by path (a CNI_NETNS value). It never moves the
// calling thread: nftables and rtnetlink sockets are opened in the target
// namespace.
type Installer struct {
	NetnsPath string
	Stats     *Stats
}

type session struct {
	path  string
	nft   *nftables.Conn
	nl    *netlink.Handle
	stats *Stats
	links map[string]int // name -> index, looked up once per session
}

// with runs fn on an OS thread inside the namespace, with an nftables and
// an rtnetlink socket created there. Sockets made on the thread are cheaper
// than ones dialled into the namespace by fd: closing a google/nftables
// connection opened WithNetNSFd costs 6-18 ms on this kernel, more than a
// whole ADD otherwise.
func (in *Installer) with(fn func(s *session) error) error {
	h, err := ns.GetNS(in.NetnsPath)
	if err != nil {
		var missing ns.NSPathNotExistErr
		var notNS ns.NSPathNotNSErr
		switch {
		case errors.As(err, &missing):
			return fmt.Errorf("failed to open netns %q: %w: %v", in.NetnsPath, ErrNetnsMissing, err)
		case errors.As(err, &notNS):
			return fmt.Errorf("failed to open netns %q: %w: %v", in.NetnsPath, ErrNotNetns, err)
		}
		return fmt.Errorf("failed to open netns %q: %w", in.NetnsPath, err)
	}
	defer h.Close()
	return h.Do(func(ns.NetNS) error {
		s := &session{path: in.NetnsPath, stats: in.Stats}
		if s.stats == nil {
			s.stats = &Stats{}
		}
		var err error
		s.nft, err = nftables.New(nftables.AsLasting())
		if err != nil {
			return fmt.Errorf("failed to open an nftables socket in netns %q: %w", in.NetnsPath, err)
		}
		defer func() { _ = s.nft.CloseLasting() }()
		s.nl, err = netlink.NewHandle(unix.NETLINK_ROUTE)
		if err != nil {
			return fmt.Errorf("failed to open an rtnetlink socket in netns %q: %w", in.NetnsPath, err)
		}
		defer s.nl.Close()
		return fn(s)
	})
}

// Install makes the namespace hold exactly rs: the aether tables are
// replaced in one nftables transaction, then the ip rule / route pairs are
// added and those of families rs does not divert are deleted. Installing the
// same set twice changes nothing. If any step fails, the namespace is put
// back as it was before the call (a re-ADD's failure leaves the previous
// working rules, not none) and the error names the step.
func (in *Installer) Install(rs RuleSet) error {
	return in.with(func(s *session) error { return s.install(rs) })
}

// testHookInstallStep runs after each completed step of an install; a test
// makes it fail to stop the install there.
var testHookInstallStep = func(step string) error { return nil }

// stepFunc records a completed install step: its undo when it changed
// anything (done), then whether the install may go on.
type stepFunc func(name string, done bool, undo func() error) error

func (s *session) install(rs RuleSet) (err error) {
	var undo []func() error
	defer func() {
		if err == nil {
			return
		}
		var rbErrs []error
		for i := len(undo) - 1; i >= 0; i-- {
			if uerr := undo[i](); uerr != nil {
				rbErrs = append(rbErrs, uerr)
			}
		}
		if len(rbErrs) > 0 {
			err = fmt.Errorf("%w (and rolling back failed: %v)", err, errors.Join(rbErrs...))
		}
	}()
	step := func(name string, done bool, undoStep func() error) error {
		if done {
			undo = append(undo, undoStep)
		}
		if err := testHookInstallStep(name); err != nil {
			return fmt.Errorf("install step %q in netns %q: %w", name, s.path, err)
		}
		return nil
	}

	prev, err := s.replaceTables(rs.Tables, true)
	if err != nil {
		return err
	}
	if err := step("tables", true, func() error { return s.restoreTables(rs.Tables, prev) }); err != nil {
		return err
	}
	if err := s.addPairs(rs, step); err != nil {
		return err
	}
	return s.dropStalePairs(rs, step)
}

// addPairs adds the set's ip rules and local routes.
func (s *session) addPairs(rs RuleSet, step stepFunc) error {
	for _, r := range rs.IPRules {
		added, err := s.addRule(r)
		if err != nil {
			return err
		}
		if err := step("rule "+string(r.Family), added, func() error { _, err := s.delRule(r); return err }); err != nil {
			return err
		}
	}
	for _, r := range rs.Routes {
		added, err := s.addRoute(r)
		if err != nil {
			return err
		}
		if err := step("route "+string(r.Family), added, func() error { _, err := s.delRoute(r); return err }); err != nil {
			return err
		}
	}
	return nil
}

// dropStalePairs deletes the divert pair of each family the set does not
// divert (redirect mode, or a family the pod lost), which an earlier
// install may have left.
func (s *session) dropStalePairs(rs RuleSet, step stepFunc) error {
	for _, fam := range []Family{IPv4, IPv6} {
		if !slices.ContainsFunc(rs.IPRules, func(r IPRule) bool { return r.Family == fam }) {
			r := ownedRule(fam)
			deleted, err := s.delRule(r)
			if err != nil {
				return err
			}
			if err := step("stale rule "+string(fam), deleted, func() error { _, err := s.addRule(r); return err }); err != nil {
				return err
			}
		}
		if !slices.ContainsFunc(rs.Routes, func(r Route) bool { return r.Family == fam }) {
			r := ownedRoute(fam)
			deleted, err := s.delRoute(r)
			if err != nil {
				return err
			}
			if err := step("stale route "+string(fam), deleted, func() error { _, err := s.addRoute(r); return err }); err != nil {
				return err
			}
		}
	}
	return nil
}

func nlFamily(f Family) int {
	if f == IPv6 {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

func ownedRule(f Family) IPRule {
	return IPRule{Family: f, Priority: constants.CaptureRulePriority, Mark: constants.CaptureDivertFwMark, Mask: 0xffffffff, Table: constants.CaptureRouteTable}
}

func ownedRoute(f Family) Route {
	return Route{Family: f, Type: "local", Dev: "lo", Table: constants.CaptureRouteTable}
}

func nlRule(r IPRule) *netlink.Rule {
	nr := netlink.NewRule()
	nr.Family = nlFamily(r.Family)
	nr.Priority = r.Priority
	nr.Mark = r.Mark
	mask := r.Mask
	nr.Mask = &mask
	nr.Table = r.Table
	return nr
}

func (s *session) addRule(r IPRule) (bool, error) {
	s.stats.Netlink++
	err := s.nl.RuleAdd(nlRule(r))
	if errors.Is(err, unix.EEXIST) {
		// RuleAdd asks for NLM_F_EXCL: EEXIST means this exact rule is
		// already there, which is the state we want.
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to add %q in netns %q: %w", ipRuleLine(r), s.path, err)
	}
	return true, nil
}

// delRule deletes r and reports whether it was there.
func (s *session) delRule(r IPRule) (bool, error) {
	s.stats.Netlink++
	err := s.nl.RuleDel(nlRule(r))
	if errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to delete %q in netns %q: %w", ipRuleLine(r), s.path, err)
	}
	return true, nil
}

func (s *session) nlRoute(r Route) (*netlink.Route, error) {
	idx, ok := s.links[r.Dev]
	if !ok {
		s.stats.Netlink++
		l, err := s.nl.LinkByName(r.Dev)
		if err != nil {
			return nil, fmt.Errorf("failed to find link %q in netns %q: %w", r.Dev, s.path, err)
		}
		idx = l.Attrs().Index
		if s.links == nil {
			s.links = map[string]int{}
		}
		s.links[r.Dev] = idx
	}
	nr := &netlink.Route{
		Family:    nlFamily(r.Family),
		Table:     r.Table,
		LinkIndex: idx,
		Scope:     netlink.SCOPE_HOST,
	}
	switch r.Type {
	case "local":
		nr.Type = unix.RTN_LOCAL
	default:
		return nil, fmt.Errorf("route %q: the installer writes only local routes", routeLine(r))
	}
	// The default destination is spelled out: RouteDel needs a
	// destination to match on.
	dst := r.Dst
	if !dst.IsValid() {
		dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if r.Family == IPv6 {
			dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
	}
	nr.Dst = prefixNet(dst)
	return nr, nil
}

func (s *session) addRoute(r Route) (bool, error) {
	nr, err := s.nlRoute(r)
	if err != nil {
		return false, err
	}
	s.stats.Netlink++
	err = s.nl.RouteAdd(nr)
	if errors.Is(err, unix.EEXIST) {
		// The kernel says the destination is taken in that table; it is
		// fine only if what holds it is exactly our route.
		held, lerr := s.routes(r.Family)
		if lerr != nil {
			return false, lerr
		}
		for _, h := range held {
			if routeLine(h) == routeLine(r) {
				return false, nil
			}
		}
		var lines []string
		for _, h := range held {
			lines = append(lines, routeLine(h))
		}
		return false, fmt.Errorf("failed to add %q in netns %q: table %d already holds a conflicting route %q", routeLine(r), s.path, r.Table, lines)
	}
	if err != nil {
		return false, fmt.Errorf("failed to add %q in netns %q: %w", routeLine(r), s.path, err)
	}
	return true, nil
}

// delRoute deletes r and reports whether it was there.
func (s *session) delRoute(r Route) (bool, error) {
	nr, err := s.nlRoute(r)
	if err != nil {
		return false, err
	}
	s.stats.Netlink++
	err = s.nl.RouteDel(nr)
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("failed to delete %q in netns %q: %w", routeLine(r), s.path, err)
	}
	return true, nil
}

func prefixNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// Remove deletes everything the plugin owns in the namespace, whatever mode
// installed it: the aether table of each family, and the divert rule and
// local route of each family. Things that are already gone are not an
// error; nothing else in the namespace is touched.
func (in *Installer) Remove() error {
	return in.with(func(s *session) error { return s.remove() })
}

func (s *session) remove() error {
	_, err := s.replaceTables(nil, false)
	errs := []error{err}
	for _, fam := range []Family{IPv4, IPv6} {
		_, rerr := s.delRule(ownedRule(fam))
		_, nerr := s.delRoute(ownedRoute(fam))
		errs = append(errs, rerr, nerr)
	}
	return errors.Join(errs...)
}

// Verify lists the namespace's state back and returns its difference from
// rs.
func (in *Installer) Verify(rs RuleSet) (Drift, error) {
	got, err := in.State()
	if err != nil {
		return Drift{}, err
	}
	return Compare(rs, got), nil
}

// State lists back every object in the namespace that is, or looks like,
// the plugin's: any nftables table named aether (in any family), every ip
// rule that looks up the capture table or matches the divert mark, and
// every route in the capture table.
func (in *Installer) State() (RuleSet, error) {
	var rs RuleSet
	err := in.with(func(s *session) error {
		var err error
		rs, err = s.state()
		return err
	})
	return rs, err
}

func (s *session) state() (RuleSet, error) {
	var rs RuleSet

	s.stats.NFTDumps++
	tables, err := s.nft.ListTables()
	if err != nil {
		return rs, fmt.Errorf("failed to list nftables tables in netns %q: %w", s.path, err)
	}
	for _, t := range tables {
		if t.Name != TableName {
			continue
		}
		bt := Table{Family: familyOf(t.Family), Name: t.Name}
		s.stats.NFTDumps++
		chains, err := s.nft.ListChainsOfTableFamily(t.Family)
		if err != nil {
			return rs, fmt.Errorf("failed to list chains of table %s %s in netns %q: %w", bt.Family, t.Name, s.path, err)
		}
		for _, c := range chains {
			if c.Table.Name != t.Name {
				continue
			}
			bc := chainOf(c)
			s.stats.NFTDumps++
			rules, err := s.nft.GetRules(t, c)
			if err != nil {
				return rs, fmt.Errorf("failed to list rules of chain %s %s %s in netns %q: %w", bt.Family, t.Name, c.Name, s.path, err)
			}
			for _, r := range rules {
				bc.Rules = append(bc.Rules, RuleOf(r.Exprs))
			}
			bt.Chains = append(bt.Chains, bc)
		}
		rs.Tables = append(rs.Tables, bt)
	}

	for _, fam := range []Family{IPv4, IPv6} {
		s.stats.Netlink++
		rules, err := retryDump(func() ([]netlink.Rule, error) { return s.nl.RuleList(nlFamily(fam)) })
		if err != nil {
			return rs, fmt.Errorf("failed to list %s rules in netns %q: %w", ipCmd(fam), s.path, err)
		}
		for _, r := range rules {
			if r.Table != constants.CaptureRouteTable && r.Mark != constants.CaptureDivertFwMark {
				continue
			}
			rs.IPRules = append(rs.IPRules, ipRuleOf(fam, r))
		}
		routes, err := s.routes(fam)
		if err != nil {
			return rs, err
		}
		rs.Routes = append(rs.Routes, routes...)
	}
	return rs, nil
}

// retryDump repeats a netlink dump the kernel interrupted (NLM_F_DUMP_INTR:
// the table changed mid-dump, so the partial answer is inconsistent).
func retryDump[T any](dump func() (T, error)) (T, error) {
	var v T
	var err error
	for range 10 {
		if v, err = dump(); !errors.Is(err, netlink.ErrDumpInterrupted) {
			return v, err
		}
	}
	return v, fmt.Errorf("netlink dump still interrupted after 10 attempts: %w", err)
}

func (s *session) routes(fam Family) ([]Route, error) {
	s.stats.Netlink++
	nrs, err := retryDump(func() ([]netlink.Route, error) {
		return s.nl.RouteListFiltered(nlFamily(fam), &netlink.Route{Table: constants.CaptureRouteTable}, netlink.RT_FILTER_TABLE)
	})
	if err != nil {
		return nil, fmt.Errorf("failed to list %s routes of table %d in netns %q: %w", ipCmd(fam), constants.CaptureRouteTable, s.path, err)
	}
	var out []Route
	for _, nr := range nrs {
		r := Route{Family: fam, Type: routeType(nr.Type), Table: nr.Table, Dev: fmt.Sprintf("if%d", nr.LinkIndex)}
		if nr.Dst != nil {
			if p, ok := netipPrefix(nr.Dst); ok && p.Bits() != 0 {
				r.Dst = p
			}
		}
		s.stats.Netlink++
		if l, err := s.nl.LinkByIndex(nr.LinkIndex); err == nil {
			r.Dev = l.Attrs().Name
		}
		out = append(out, r)
	}
	return out, nil
}

func netipPrefix(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones), true
}

func routeType(t int) string {
	switch t {
	case unix.RTN_LOCAL:
		return "local"
	case unix.RTN_UNICAST:
		return "unicast"
	case unix.RTN_BLACKHOLE:
		return "blackhole"
	case unix.RTN_UNREACHABLE:
		return "unreachable"
	case unix.RTN_PROHIBIT:
		return "prohibit"
	}
	return fmt.Sprintf("type-%d", t)
}

func ipRuleOf(fam Family, r netlink.Rule) IPRule {
	out := IPRule{Family: fam, Priority: r.Priority, Mark: r.Mark, Table: r.Table}
	if r.Mask != nil {
		out.Mask = *r.Mask
	} else if r.Mark != 0 {
		out.Mask = 0xffffffff
	}
	var other []string
	if r.Src != nil {
		other = append(other, "from "+r.Src.String())
	}
	if r.Dst != nil {
		other = append(other, "to "+r.Dst.String())
	}
	if r.IifName != "" {
		other = append(other, "iif "+r.IifName)
	}
	if r.OifName != "" {
		other = append(other, "oif "+r.OifName)
	}
	if r.Invert {
		other = append(other, "not")
	}
	if r.IPProto != 0 {
		other = append(other, fmt.Sprintf("ipproto %d", r.IPProto))
	}
	if r.Dport != nil || r.Sport != nil || r.UIDRange != nil || r.Goto > 0 || r.Tos != 0 {
		other = append(other, "(further selectors)")
	}
	for i, o := range other {
		if i == 0 {
			out.Other = o
		} else {
			out.Other += " " + o
		}
	}
	return out
}
