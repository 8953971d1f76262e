package constants

import (
	"fmt"
	"sort"
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

// ForeignCollisions evaluates each aether mark against each foreign masked
// mark the way the kernel does and returns the pairs that match, sorted.
func ForeignCollisions(marks map[string]uint32, foreign []Mark) []string {
	var out []string
	for name, m := range marks {
		for _, f := range foreign {
			if f.Matches(m) {
				out = append(out, fmt.Sprintf("%s (%#x) matches %s (%#x/%#x)", name, m, f.Name, f.Value, f.Mask))
			}
		}
	}
	sort.Strings(out)
	return out
}
