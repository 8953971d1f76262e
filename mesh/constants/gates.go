package constants

import (
	"fmt"
	"strings"
)

// CheckPortRoles is the R3 gate: every role has exactly one number, the
// numbers are distinct, and each role serves both TCP and UDP on it. It takes
// the table as an argument so a test can feed it a wrong one.
func CheckPortRoles(roles []PortRole) error {
	seenPort := map[uint16]string{}
	seenName := map[string]bool{}
	for _, r := range roles {
		if seenName[r.Name] {
			return fmt.Errorf("port role %q has a second number %d: R3 allows one number per role", r.Name, r.Port)
		}
		seenName[r.Name] = true
		if other, ok := seenPort[r.Port]; ok {
			return fmt.Errorf("port %d is given to two roles, %q and %q", r.Port, other, r.Name)
		}
		seenPort[r.Port] = r.Name
	}
	for _, r := range roles {
		has := map[Transport]bool{}
		for _, t := range r.Transports {
			has[t] = true
		}
		for _, t := range []Transport{TCP, UDP} {
			if !has[t] {
				return fmt.Errorf("port role %q (%d) does not serve %s on its number: R3 requires both transports", r.Name, r.Port, t)
			}
		}
	}
	return nil
}

// CheckMarks is the D2 gate: the two aether marks differ and neither is a
// bitmask superset of the other, so "meta mark & X == X" for one never
// matches the other.
func CheckMarks(divert, passthrough uint32) error {
	if divert == passthrough {
		return fmt.Errorf("divert mark and passthrough mark are both %#x", divert)
	}
	if divert&passthrough == passthrough {
		return fmt.Errorf("divert mark %#x is a bitmask superset of passthrough mark %#x", divert, passthrough)
	}
	if divert&passthrough == divert {
		return fmt.Errorf("passthrough mark %#x is a bitmask superset of divert mark %#x", passthrough, divert)
	}
	return nil
}

// CheckMarkUses is the D2 gate as the kernel evaluates it: every mark aether
// sets must be disjoint from every foreign mark programmed in the same
// netns, where disjoint means the mark does not change what that rule
// decides (Mark.Collides). A mark set in a netns whose rules would drop it,
// or read it as their own, is red; the same value in a netns those rules
// never see is not. The error names every collision.
func CheckMarkUses(uses []MarkUse, foreign []ForeignMark) error {
	var out []string
	for _, u := range uses {
		for _, f := range foreign {
			if f.Netns == u.Netns && f.Collides(u.Mark) {
				out = append(out, fmt.Sprintf("%s mark %#x in the %s netns collides with %s %s (%#x/%#x, %s)",
					u.Name, u.Mark, u.Netns, f.Owner, f.Use, f.Value, f.Mask, f.Source))
			}
		}
	}
	if len(out) > 0 {
		return fmt.Errorf("aether marks are not disjoint from the marks their netns carries: %s", strings.Join(out, "; "))
	}
	return nil
}
