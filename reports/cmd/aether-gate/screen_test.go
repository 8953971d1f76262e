package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/aether-mesh/aether/rigs/results"
)

// fixtureDirs are the report directories of suite results the tests hold:
// forged and vacuous ones, and the seven results of a real make gate,
// whose rows run to hundreds of columns.
var fixtureDirs = []string{"testdata/forged", "testdata/vacuous", "testdata/gate-run"}

// ansi matches the escapes a status line is drawn with.
var ansi = regexp.MustCompile("\r|\x1b\\[K")

// screenLines splits what the gate printed into the lines a terminal
// shows: a status line's escapes are not columns.
func screenLines(out string) []string {
	return strings.Split(ansi.ReplaceAllString(strings.TrimRight(out, "\n"), ""), "\n")
}

func wantNarrow(t *testing.T, what string, lines []string) {
	t.Helper()
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("%s: a line of %d columns (bound %d): %q", what, n, width, l)
		}
	}
}

// Every line the gate prints for the fixtures, judged or streamed as each
// case finishes, fits the width; the log still holds every table whole.
func TestScreenFitsTheWidth(t *testing.T) {
	for _, dir := range fixtureDirs {
		t.Run(dir, func(t *testing.T) {
			_, screen, log := runGateApart(t, config{dir: dir, build: rev, required: []string{"phase0", "udproute"}})
			wantNarrow(t, "judged", screenLines(screen))
			files, err := filepath.Glob(filepath.Join(dir, "suites", "*.json"))
			if err != nil || len(files) == 0 {
				t.Fatalf("no fixtures under %s: %v", dir, err)
			}
			var streamed []string
			for _, f := range files {
				r, err := results.Load(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range r.Cases {
					streamed = append(streamed, caseLine("12:34", r.Suite, c))
					// The table's row is in the log, observation and all.
					if !strings.Contains(log, c.Observed) {
						t.Errorf("%s: the log lacks case %s's observation %q", f, c.Name, c.Observed)
					}
				}
				streamed = append(streamed, suiteLine("1:02:03", r))
			}
			wantNarrow(t, "streamed", streamed)
		})
	}
	// The real run's rows are wider than the screen: the bound is met by
	// cutting them, not because they were short.
	_, _, log := runGateApart(t, config{dir: "testdata/gate-run"})
	widest := 0
	for _, l := range strings.Split(log, "\n") {
		widest = max(widest, utf8.RuneCountInString(l))
	}
	if widest <= 2*width {
		t.Errorf("test is stale: the widest table line of the real run is %d columns", widest)
	}
}

// A soak that failed, with its gates' figures, fits too.
func TestScreenFitsTheWidthWithASoak(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, true)))
	soak(t, dir, "2026-09-30-resoak-1.0.13-84fb413", rev, built(rev, true))
	soak(t, dir, "2026-09-27-rev242-vs-rev239", rev, built(rev, true))
	code, screen, _ := runGateApart(t, config{dir: dir, build: rev, allowDirty: true, requireSoak: true})
	if code != 1 {
		t.Errorf("exit %d, want 1:\n%s", code, screen)
	}
	wantNarrow(t, "soaks", screenLines(screen))
	wantAll(t, "soaks", screen, "liveness SLO", "(dirty: uncommitted")
}

// The report page holds every suite's table, every row of it, and the
// soak's gates: parsed as HTML, not searched as text.
func TestReportHoldsTheTables(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "suites"), os.DirFS("testdata/gate-run/suites")); err != nil {
		t.Fatal(err)
	}
	soak(t, dir, "2026-09-30-resoak-1.0.13-84fb413", "4a50ffa1af43e1c8c09e4c56addfa34f9c33ef79", built("4a50ffa1af43e1c8c09e4c56addfa34f9c33ef79", false))
	out := t.TempDir()
	c := config{dir: dir, html: filepath.Join(out, "gate.html"), log: filepath.Join(out, "gate.log")}
	var stdout, stderr strings.Builder
	if code := run(c, &stdout, &stderr); code != 1 {
		t.Fatalf("exit %d, want 1 (the soak fails):\n%s%s", code, stdout.String(), stderr.String())
	}
	wantAll(t, "screen", stdout.String(), "report: "+c.html, "log:    "+c.log)
	f, err := os.Open(c.html)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := html.Parse(f)
	if err != nil {
		t.Fatalf("the report is not HTML: %v", err)
	}
	tables := map[string][][]string{} // by the heading before the table
	var heading string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "h2", "h3":
				heading = strings.TrimSpace(text(n))
			case "table":
				tables[heading] = rows(n)
				return
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)

	files, _ := filepath.Glob(filepath.Join(dir, "suites", "*.json"))
	if len(files) != 7 {
		t.Fatalf("test is stale: %d suite results", len(files))
	}
	summary := tables["Suites, red then green"]
	if len(summary) != 1+len(files) {
		t.Errorf("the suites' summary has %d rows, want a header and %d: %q", len(summary), len(files), summary)
	}
	for _, p := range files {
		r, err := results.Load(p)
		if err != nil {
			t.Fatal(err)
		}
		tab, ok := tables[r.Suite+" PASS"]
		if !ok {
			t.Errorf("no table under heading %q; headings: %v", r.Suite+" PASS", keys(tables))
			continue
		}
		if got, want := strings.Join(tab[0], "|"), "case|role|expected|observed|witness|took|verdict"; got != want {
			t.Errorf("%s: header %q, want %q", r.Suite, got, want)
		}
		if len(tab) != 1+len(r.Cases) {
			t.Errorf("%s: %d rows, want %d", r.Suite, len(tab)-1, len(r.Cases))
			continue
		}
		for i, c := range r.Cases {
			got := tab[1+i]
			if got[0] != c.Name || got[1] != string(c.Role) || got[2] != c.Expected || got[3] != c.Observed || got[6] != "as expected" {
				t.Errorf("%s row %d: %q, want case %s as expected", r.Suite, i, got, c.Name)
			}
		}
	}
	gates := tables["soak resoak-2026-09-30-1.0.13-84fb413 FAIL"]
	if len(gates) < 2 || strings.Join(gates[0], "|") != "gate|verdict|figure|reason" {
		t.Fatalf("no soak gates table: %q; headings: %v", gates, keys(tables))
	}
	found := false
	for _, g := range gates[1:] {
		if g[0] == "liveness SLO" {
			found = true
			if g[1] != "FAIL" || g[2] != "9 / 719,984 failed, SLO 99.999% allows 7" {
				t.Errorf("liveness row %q", g)
			}
		}
	}
	if !found {
		t.Errorf("the gates table lacks the liveness SLO: %q", gates)
	}
}

func text(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(text(c))
	}
	return b.String()
}

func rows(table *html.Node) [][]string {
	var out [][]string
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "tr" {
			var cells []string
			for c := n.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
					cells = append(cells, strings.TrimSpace(text(c)))
				}
			}
			out = append(out, cells)
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(table)
	return out
}

func keys(m map[string][][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
