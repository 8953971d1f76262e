package results

import (
	"fmt"
	"strings"
)

// CheckSuite recomputes a suite result's verdict from its rows and returns
// every way the result disagrees with it, each naming the file and the
// row: a declared verdict is a claim, the rows are the evidence.
func CheckSuite(path string, r Result) []string {
	var out []string
	for _, c := range r.Cases {
		if c.Role != Control && c.Role != Subject {
			out = append(out, fmt.Sprintf("%s: row %s has role %q, neither %s nor %s", path, c.Name, c.Role, Control, Subject))
		}
		if why := c.Evidenced(); c.Matched && why != "" {
			out = append(out, fmt.Sprintf("%s: row %s (%s) declares matched with %s: a signature nobody witnessed cannot match", path, c.Name, c.Role, why))
		}
	}
	if v, why := Decide(r); v != r.Verdict {
		out = append(out, fmt.Sprintf("%s: declares %s but its rows decide %s: %s", path, r.Verdict, v, why))
	}
	return out
}

// Judges says why a result stamped with b cannot speak for build rev, or
// "" when it can. A dirty result speaks for rev only when allowDirty: its
// revision does not name all the code that ran.
func (b Build) Judges(rev string, allowDirty bool) string {
	switch {
	case b.Revision == "":
		return "records no build (" + b.Unknown + ")"
	case rev == "":
		return "judged build " + b.Revision + ", but no build is being gated"
	case b.Revision != rev:
		return fmt.Sprintf("judged build %s, not %s", b.Revision, rev)
	case b.Dirty && !allowDirty:
		return fmt.Sprintf("judged %s with uncommitted changes (dirty), and dirty builds are refused without -allow-dirty", rev)
	}
	return ""
}

// SoakCovers reports whether one of a soak manifest's builds is rev: the
// same string, or a git hash of at least 7 hex digits that rev starts with,
// alone or after a version ("1.0.13-84fb413").
func SoakCovers(builds []string, rev string) bool {
	for _, b := range builds {
		if b == rev {
			return true
		}
		h := b[strings.LastIndex(b, "-")+1:]
		if len(h) >= 7 && isHex(h) && strings.HasPrefix(rev, strings.ToLower(h)) {
			return true
		}
	}
	return false
}

func isHex(s string) bool {
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
