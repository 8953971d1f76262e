package decisions

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// root is the repository root, found from this file's own location.
func root(t *testing.T) string {
	t.Helper()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller information: cannot find the repository")
	}
	r := filepath.Join(filepath.Dir(self), "..", "..")
	if _, err := os.Stat(filepath.Join(r, "go.mod")); err != nil {
		t.Fatalf("no go.mod two levels above %s: %v", self, err)
	}
	return r
}

// skipped are trees that are generated or not the repository's text:
// reports of runs, built binaries, fuzz corpora, test data, and the
// upstream code carried under third_party (its numbers are its own).
var skipped = []string{".git", "bin", "testdata", "third_party", filepath.Join("reports", "latest"), filepath.Join("reports", "runs")}

// scanned says whether a file's citations count: Go code (tests
// included), Makefiles, Markdown, and the fixtures' YAML, whose comments
// cite the soaks they record.
func scanned(rel string) bool {
	base := filepath.Base(rel)
	switch {
	case strings.HasSuffix(base, ".go"), strings.HasSuffix(base, ".md"), base == "Makefile":
		return true
	case strings.HasPrefix(rel, "fixtures"+string(filepath.Separator)) && strings.HasSuffix(base, ".yaml"):
		return true
	}
	return false
}

// tree calls fn on every scanned file of the repository.
func tree(t *testing.T, fn func(rel string, src []byte)) {
	t.Helper()
	r := root(t)
	err := filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(r, p)
		if d.IsDir() {
			if slices.Contains(skipped, rel) || d.Name() == "testdata" || (strings.HasPrefix(d.Name(), ".") && rel != ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !scanned(rel) {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fn(rel, src)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// record reads docs/decisions and fails on an entry without its parts or
// a tag defined twice.
func record(t *testing.T) map[string]Entry {
	t.Helper()
	dir := filepath.Join(root(t), "docs", "decisions")
	files, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no decision record in %s (%v)", dir, err)
	}
	entries := map[string]Entry{}
	for _, f := range files {
		md, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root(t), f)
		for _, e := range Entries(rel, md) {
			if prev, ok := entries[e.Tag]; ok {
				t.Errorf("%s:%d: %s is defined again (first at %s:%d)", e.File, e.Line, e.Tag, prev.File, prev.Line)
			}
			if m := e.Missing(); len(m) > 0 {
				t.Errorf("%s:%d: entry %s lacks %s", e.File, e.Line, e.Tag, strings.Join(m, ", "))
			}
			entries[e.Tag] = e
		}
	}
	return entries
}

// TestEveryCitedTagHasAnEntry is the record's gate: every incident number
// and proposal tag a file cites has an entry in docs/decisions.
func TestEveryCitedTagHasAnEntry(t *testing.T) {
	entries := record(t)
	cited := map[string]bool{}
	tree(t, func(rel string, src []byte) {
		for _, c := range Cites(rel, src) {
			cited[c.Tag] = true
			if _, ok := entries[c.Tag]; !ok {
				t.Errorf("%s: cited, but docs/decisions has no entry for it", c)
			}
		}
	})
	// The tags the work relies on are cited somewhere: a scanner that
	// stopped finding them would pass on nothing.
	for _, tag := range []string{"#831", "#1008", "#1073", "R3", "R4", "Q2a", "Q5", "D2", "Phase 2a", "Phase 4c", `"Why #873's fix cannot work"`, "proposal 038"} {
		if !cited[tag] {
			t.Errorf("%s is cited nowhere: the scanner no longer reads the tree", tag)
		}
	}
}

// TestEveryCitedSectionExists: a comment or document that sends the reader
// to a quoted section of ARCHITECTURE.md or of a README finds that heading
// in that file.
func TestEveryCitedSectionExists(t *testing.T) {
	r := root(t)
	headings := map[string][]string{}
	n := 0
	tree(t, func(rel string, src []byte) {
		for _, c := range SectionRefs(rel, src) {
			n++
			h, ok := headings[c.Doc]
			if !ok {
				md, err := os.ReadFile(filepath.Join(r, filepath.FromSlash(c.Doc)))
				if err != nil {
					t.Errorf("%s:%d: cites %s, which the repository does not hold (%v)", c.File, c.Line, c.Doc, err)
				}
				h = Headings(md)
				headings[c.Doc] = h
			}
			if !HasSection(h, c.Section) {
				t.Errorf("%s:%d: cites %s section %q, which %s has no heading for", c.File, c.Line, c.Doc, c.Section, c.Doc)
			}
		}
	})
	if n == 0 {
		t.Error("no document section is cited anywhere: the scanner no longer reads the tree")
	}
}

var (
	testNameRe = regexp.MustCompile("`((?:Test|Benchmark)[A-Za-z0-9_]+)`")
	caseNameRe = regexp.MustCompile("`([a-z0-9]+(?:-[a-z0-9]+)+)`")
	funcRe     = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)[A-Za-z0-9_]+)\(`)
)

// TestEntriesNameRealTests: every Go test and suite case an entry names
// exists, so "pinned by" cannot drift into names nothing runs.
func TestEntriesNameRealTests(t *testing.T) {
	entries := record(t)
	funcs := map[string]bool{}
	var code strings.Builder
	tree(t, func(rel string, src []byte) {
		if !strings.HasSuffix(rel, ".go") {
			return
		}
		for _, m := range funcRe.FindAllSubmatch(src, -1) {
			funcs[string(m[1])] = true
		}
		code.Write(src)
	})
	all := code.String()
	for _, e := range entries {
		for _, m := range testNameRe.FindAllStringSubmatch(e.Body, -1) {
			if !funcs[m[1]] {
				t.Errorf("%s:%d: entry %s names %s, which no _test.go defines", e.File, e.Line, e.Tag, m[1])
			}
		}
		for _, m := range caseNameRe.FindAllStringSubmatch(e.Body, -1) {
			if !strings.Contains(all, `"`+m[1]+`"`) {
				t.Errorf("%s:%d: entry %s names case %s, which no Go file spells as a string", e.File, e.Line, e.Tag, m[1])
			}
		}
	}
}

// The scanner's rules, on text made to contain each kind of reference
// (testdata/cites.txt) and the citations it holds (testdata/cites.want).
func TestCites(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "cites.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range Cites("cites.txt", src) {
		got = append(got, c.String())
	}
	wantText, err := os.ReadFile(filepath.Join("testdata", "cites.want"))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Split(strings.TrimSpace(string(wantText)), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("Cites =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSectionRefs(t *testing.T) {
	src := []byte("// see (ARCHITECTURE.md, \"The mTLS\n\t// HTTP/2 path\") and\n// rigs/README.md \"Nowhere\".\n")
	got := SectionRefs("x.go", src)
	want := []SectionRef{{"x.go", 1, "ARCHITECTURE.md", "The mTLS HTTP/2 path"}, {"x.go", 3, "rigs/README.md", "Nowhere"}}
	if !slices.Equal(got, want) {
		t.Fatalf("SectionRefs = %v, want %v", got, want)
	}
	h := Headings([]byte("# A\n### The mTLS HTTP/2 path\n#### Pair lifecycle (038 Phase 4b: x)\n"))
	for _, c := range []struct {
		name string
		want bool
	}{{"The mTLS HTTP/2 path", true}, {"Pair lifecycle", true}, {"Pair", false}, {"Nowhere", false}} {
		if got := HasSection(h, c.name); got != c.want {
			t.Errorf("HasSection(%q) = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestEntriesNeedTheirParts(t *testing.T) {
	md := []byte("### R1 — one\n**What**: a\n**Control**: b\n**Pinned by**: c\n### R2 — two\n**What**: a\n")
	es := Entries("r.md", md)
	if len(es) != 2 || es[0].Tag != "R1" || len(es[0].Missing()) != 0 {
		t.Fatalf("Entries = %+v, want R1 complete first", es)
	}
	if m := es[1].Missing(); !slices.Equal(m, []string{"**Control**:", "**Pinned by**:"}) || es[1].Line != 5 {
		t.Errorf("R2 at line %d missing %v, want line 5 missing Control and Pinned by", es[1].Line, m)
	}
}
