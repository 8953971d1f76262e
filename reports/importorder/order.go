// Package importorder holds the order of imports between the repository's
// top folders (ARCHITECTURE.md, Layout) and the check that a package graph
// keeps it. It sits in the topmost folder so that its test may load every
// package of the module without itself going against the order.
package importorder

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
)

// Rank is each top folder's place in the order: a package may import its own
// folder and any folder of a lower rank, never a higher one or a sibling of
// the same rank (suites and soak share a rank and import neither each
// other). Tests' imports are held to the same order.
var Rank = map[string]int{
	"fixtures": 0, // recorded inputs and the golden-file helper
	"mesh":     1, // the subject
	"rigs":     2, // the real-kernel rigs and the results model
	"suites":   3, // red-then-green suites
	"soak":     3, // the soak runner, importers, statistics, graders
	"reports":  4, // renderers and the binaries that write and judge reports
}

// Kit is the part of rigs/ that mesh's tests may use: namespaces, the
// privilege skips and the red-then-green core. It is the one exception to
// the order, and safe only because no kit package depends on mesh (Check
// verifies it), so a mesh test linking the kit can never close a loop.
var Kit = []string{"rigs/netns", "rigs/privileged", "rigs/redgreen", "rigs/results"}

// TestRigs are rigs packages built for mesh's tests alone (proxytest: pod
// and node namespaces, a fake agent serving xDS). They depend on mesh, so
// only a mesh package's tests may link them, never the package itself:
// a test binary is the end of the chain and closes no loop.
var TestRigs = []string{"rigs/proxytest"}

// Package is what Check reads of a package, as `go list -json` spells it.
type Package struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
	// Deps is every package the non-test build links, transitively.
	Deps []string
}

// Violation is one import against the order.
type Violation struct {
	Importer, Imported string
	// Test is set when only the importer's tests import it.
	Test bool
	Why  string
}

func (v Violation) String() string {
	by := "imports"
	if v.Test {
		by = "imports in its tests"
	}
	return fmt.Sprintf("%s %s %s: %s", v.Importer, by, v.Imported, v.Why)
}

// testRig says whether a mesh package is test code though it holds no
// _test.go file: a package named like httptest (proxytest), which only
// tests may link. Check verifies that no other mesh package does.
func testRig(rel string) bool { return strings.HasSuffix(path.Base(rel), "test") }

// Check returns every import of pkgs, all in module mod, against the order,
// sorted, and an error for a package outside any ranked top folder.
func Check(mod string, pkgs []Package) ([]Violation, error) {
	rel := func(p string) (string, bool) {
		if p == mod {
			return "", true
		}
		r, ok := strings.CutPrefix(p, mod+"/")
		return r, ok
	}
	top := func(r string) string { t, _, _ := strings.Cut(r, "/"); return t }
	var out []Violation
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		fromTop := top(from)
		fromRank, ok := Rank[fromTop]
		if !ok {
			return nil, fmt.Errorf("package %s: top folder %q has no place in the import order (importorder.Rank)", p.ImportPath, fromTop)
		}
		check := func(imp string, test bool) {
			to, ok := rel(imp)
			if !ok {
				return
			}
			toTop := top(to)
			toRank, known := Rank[toTop]
			switch {
			case toTop == fromTop:
				if fromTop == "mesh" && testRig(to) && !test && !testRig(from) {
					out = append(out, Violation{p.ImportPath, imp, test, "a mesh test rig is for tests only; the product must not link it"})
				}
				return
			case !known:
				out = append(out, Violation{p.ImportPath, imp, test, fmt.Sprintf("top folder %q has no place in the order", toTop)})
			case fromTop == "mesh" && (test || testRig(from)) && slices.Contains(Kit, to):
				return // mesh's tests on the kit
			case fromTop == "mesh" && test && slices.Contains(TestRigs, to):
				return // mesh's tests on their rig
			case toRank >= fromRank:
				rel := "above"
				if toRank == fromRank {
					rel = "beside"
				}
				out = append(out, Violation{p.ImportPath, imp, test, fmt.Sprintf("%s/ sits %s %s/ in the order", toTop, rel, fromTop)})
			}
		}
		for _, i := range p.Imports {
			check(i, false)
		}
		seen := map[string]bool{}
		for _, i := range p.Imports {
			seen[i] = true
		}
		for _, i := range slices.Concat(p.TestImports, p.XTestImports) {
			if !seen[i] {
				seen[i] = true
				check(i, true)
			}
		}
		if r, _ := rel(p.ImportPath); slices.Contains(Kit, r) {
			for _, d := range p.Deps {
				if dr, ok := rel(d); ok && top(dr) == "mesh" {
					out = append(out, Violation{p.ImportPath, d, false, "a kit package mesh's tests use must not depend on mesh"})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
