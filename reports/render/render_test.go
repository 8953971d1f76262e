package render

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/fixtures/golden"
	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func fixtureGrades(t *testing.T) map[string]*grade.Grade {
	t.Helper()
	files, _ := filepath.Glob("../../fixtures/soaks/*/manifest.yaml")
	if len(files) == 0 {
		t.Fatal("no fixture soaks")
	}
	out := map[string]*grade.Grade{}
	for _, f := range files {
		m, err := manifest.Load(f)
		if err != nil {
			t.Fatal(err)
		}
		g, err := grade.Run(m)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(filepath.Dir(f))] = g
	}
	return out
}

func suites() []results.Result {
	at := time.Date(2026, 11, 1, 3, 0, 0, 0, time.UTC)
	return []results.Result{
		{Suite: "udproute-selection", Subject: "per-VIP UDP selection under TPROXY", Verdict: results.Pass, Reason: "1 control(s) red, 1 subject(s) green", Started: at,
			Cases: []results.CaseResult{
				{Name: "redirect-control", Role: results.Control, Expected: "svc-b's datagrams reach svc-a's backend", Observed: "ipi_addr 127.0.0.1 for both VIPs", Witness: "the receiver's IP_PKTINFO", Matched: true},
				{Name: "tproxy", Role: results.Subject, Expected: "each VIP reaches its own backend", Observed: "10.96.0.10→a, 10.96.0.11→b", Witness: "the backends' own records", Matched: true},
			}},
		{Suite: "quic-resumption", Subject: "R4", Verdict: results.BrokenRig, Reason: "control resumption-on did not show its signature", Started: at,
			Cases: []results.CaseResult{
				{Name: "resumption-on", Role: results.Control, Expected: "revoked SVID accepted on resumption", Observed: "handshake refused", Matched: false, Reason: "no resumption happened"},
			}},
	}
}

// The page must open offline: no script, stylesheet, image or font is
// fetched, and the only URLs are the SVG namespaces.
func TestHTMLIsSelfContained(t *testing.T) {
	ns := regexp.MustCompile(`https?://[^"'\s)<>]*`)
	for name, g := range fixtureGrades(t) {
		page, err := HTML(g, suites())
		if err != nil {
			t.Fatal(err)
		}
		s := string(page)
		for _, bad := range []string{"<script", "<link", "<img", "<iframe", " src=", "@import", "url("} {
			if strings.Contains(s, bad) {
				t.Errorf("%s: page contains %q", name, bad)
			}
		}
		for _, u := range ns.FindAllString(s, -1) {
			if u != "http://www.w3.org/2000/svg" && u != "http://www.w3.org/1999/xlink" {
				t.Errorf("%s: page references %s", name, u)
			}
		}
		// Every chart is well-formed XML.
		svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(s, -1)
		for i, svg := range svgs {
			d := xml.NewDecoder(strings.NewReader(svg))
			for {
				if _, err := d.Token(); err != nil {
					if !errors.Is(err, io.EOF) {
						t.Errorf("%s: chart %d is not well-formed: %v", name, i, err)
					}
					break
				}
			}
		}
		want := 0
		if g.CPU != nil && len(g.CPU.Windows) > 0 {
			want += 2
		}
		if g.Liveness != nil {
			want++
		}
		if len(g.Counts) > 0 {
			want++
		}
		for _, c := range g.Counts {
			if c.Count > 0 && len(c.Timeline) > 0 {
				want++
			}
		}
		if len(svgs) != want {
			t.Errorf("%s: %d charts, want %d", name, len(svgs), want)
		}
		for _, gt := range g.Gates {
			if !strings.Contains(s, ">"+gt.Name+"<") || !strings.Contains(s, ">"+string(gt.Verdict)+"<") {
				t.Errorf("%s: gate %s / %s missing from the page", name, gt.Name, gt.Verdict)
			}
		}
		for _, want := range []string{"Suites, red then green", "redirect-control", "the receiver&#39;s IP_PKTINFO", "BROKEN_RIG", "no resumption happened"} {
			if !strings.Contains(s, want) {
				t.Errorf("%s: suite table lacks %q", name, want)
			}
		}
	}
}

func TestHTMLShowsWhyTheResoakFailed(t *testing.T) {
	g := fixtureGrades(t)["2026-09-30-resoak-1.0.13-84fb413"]
	page, err := HTML(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{
		"9 / 719,984 failed, SLO 99.999% allows 7",
		"excluded: TRIPLE", // the shaded span's legend in the liveness chart
		"w11-h3", "achieved 285.",
		"141 outside the soak", "6 in excluded TRIPLE",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(s, "Suites, red then green") {
		t.Error("no suites were given, yet the page has a suite section")
	}
}

func TestJUnit(t *testing.T) {
	gs := fixtureGrades(t)
	var all []*grade.Grade
	wantFail := 0
	for _, g := range gs {
		all = append(all, g)
		for _, gt := range g.Gates {
			if gt.Verdict != grade.Pass {
				wantFail++
			}
		}
	}
	b, err := JUnit(all, suites())
	if err != nil {
		t.Fatal(err)
	}
	var doc junitSuites
	if err := xml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("JUnit does not parse back: %v", err)
	}
	// One soak gate failure each for FAIL/REFUSED/INCONCLUSIVE gates, plus
	// the broken rig's unmatched control.
	if doc.Failures != wantFail+1 {
		t.Errorf("failures = %d, want %d", doc.Failures, wantFail+1)
	}
	types := map[string]int{}
	for _, s := range doc.Suites {
		for _, c := range s.Cases {
			if c.Failure != nil {
				types[c.Failure.Type]++
			}
		}
	}
	if types["REFUSED"] != 1 || types["BROKEN_RIG"] != 1 || types["FAIL"] != wantFail-1 {
		t.Errorf("failure types %v", types)
	}
}

func TestIndex(t *testing.T) {
	var runs []Run
	for name, g := range fixtureGrades(t) {
		runs = append(runs, Run{Grade: g, Link: "runs/" + name + "/report.html"})
	}
	page, err := Index(runs, suites())
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	if n := strings.Count(s, "<svg"); n != 1 {
		t.Errorf("index has %d charts, want the one trend", n)
	}
	// Oldest first; the refused pairing contributes no point to the trend.
	order := []string{"rev242-vs-rev239", "rev242-proving", "rev247-same-build-ab", "resoak-2026-09-30"}
	last := -1
	for _, o := range order {
		i := strings.Index(s, ">"+o)
		if i < last {
			t.Errorf("%s is out of order", o)
		}
		last = i
	}
	if strings.Count(s, "1.18×") != 2 {
		t.Errorf("want the two same-build ratios (1.18×) in the table, got %d", strings.Count(s, "1.18×"))
	}
}

// The gate tables of the fixture soaks, as aether-soak prints them.
func TestGateTablesGolden(t *testing.T) {
	gs := fixtureGrades(t)
	names := make([]string, 0, len(gs))
	for n := range gs {
		names = append(names, n)
	}
	var b bytes.Buffer
	sort.Strings(names)
	for _, n := range names {
		b.WriteString(Text(gs[n]))
		b.WriteString("\n")
	}
	if err := golden.Check("testdata/fixture-gates.golden", "graded now", b.Bytes()); err != nil {
		t.Error(err)
	}
}

func TestWriteSoakAndLoadGrade(t *testing.T) {
	g := fixtureGrades(t)["2026-09-28-rev247-same-build-ab"]
	dir := t.TempDir()
	if err := WriteSoak(dir, g, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{GradeFile, HTMLFile, JUnitFile} {
		if st, err := os.Stat(filepath.Join(dir, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	back, err := LoadGrade(filepath.Join(dir, GradeFile))
	if err != nil {
		t.Fatal(err)
	}
	if back.Verdict != grade.Pass || len(back.Gates) != len(g.Gates) || back.CPU.Ratio != g.CPU.Ratio {
		t.Errorf("round trip lost data: %+v", back)
	}
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"soak":"x","verdict":"MAYBE"}`), 0o644)
	if _, err := LoadGrade(bad); err == nil || !strings.Contains(err.Error(), `unknown verdict "MAYBE"`) {
		t.Errorf("got %v", err)
	}
}

// A local soak lasts minutes and its switches seconds: its page gives each
// excluded span and window to the second, and its timelines count minutes
// (a minute-resolution page showed a 3 s warm-up as 16:26 .. 16:26, and
// the axis ran 0 to 0.025 hours).
func TestHTMLOfAShortSoakShowsSeconds(t *testing.T) {
	g := fixtureGrades(t)["2026-09-30-resoak-1.0.13-84fb413"]
	start := time.Date(2026, 11, 30, 16, 26, 12, 0, time.UTC)
	g.Start, g.End = start, start.Add(2*time.Minute)
	g.Excluded = []manifest.Excluded{{Name: "s01-warm-up-h2", Start: start, End: start.Add(3 * time.Second), Reason: "warm-up"}}
	page, err := HTML(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{
		"<td>s01-warm-up-h2</td><td>2026-11-30 16:26:12</td><td>2026-11-30 16:26:15</td>",
		"minutes since soak start 2026-11-30 16:26:12 UTC",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(s, "hours since soak start") {
		t.Error("a 2-minute soak's timeline counts hours")
	}
	if !regexp.MustCompile(`<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d–\d\d:\d\d:\d\d</td>`).MatchString(s) {
		t.Error("the windows' spans are not given to the second")
	}
}

// The counts table says what each gate counts, as its manifest words it.
func TestHTMLSaysWhatEachCountGateCounts(t *testing.T) {
	g := fixtureGrades(t)["2026-09-27-rev242-proving"]
	g.Counts[0].About = "requests answered 503 with flag NC"
	page, err := HTML(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "<th>what it counts</th>") || !strings.Contains(string(page), "<td>requests answered 503 with flag NC</td>") {
		t.Error("the counts table does not say what a gate counts")
	}
}

// A soak with leak gates shows each process's fit: its growth in the
// gauge's unit, its verdict, and why a process not decided was not.
func TestHTMLShowsEachProcessesGrowth(t *testing.T) {
	g := fixtureGrades(t)["2026-09-28-rev247-same-build-ab"]
	grew := 40.5 * (1 << 20)
	g.Leaks = []grade.Leak{{Name: "leak: resident memory", Unit: "bytes", MaxPerHour: 32 << 20, Settle: "30s", MinSamples: 12, MinSpan: "5m0s",
		Processes: []grade.LeakProcess{
			{Name: "node-a/proxy", Lives: 2, Samples: 700, SpanSeconds: 3500, Min: 30 << 20, Max: 60 << 20, PerHour: &grew, Verdict: grade.Fail, Reason: "grows +40.50 MiB/h > 32.00 MiB/h"},
			{Name: "node-c/agent", Verdict: grade.Inconclusive, Reason: "not measured: no sample of it in the soak's evidence"},
		}}}
	page, err := HTML(g, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>Resource growth</h2>", "<td>node-a/proxy</td>", "30.0 MiB – 60.0 MiB", "40.50 MiB/h", "not measured: no sample of it"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	g.Leaks = nil
	if page, _ := HTML(g, nil); strings.Contains(string(page), "Resource growth") {
		t.Error("a soak without leak gates shows a resource growth section")
	}
}
