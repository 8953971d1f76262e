// Command aether-gate reads the latest suite results and soak grades and
// says whether a build may ship: it prints a line per suite and soak, one
// per row or gate that did not pass, and every failure, none wider than
// 120 columns; writes every suite's red-then-green table and every soak
// gate with its figure and reason to <dir>/gate.html and <dir>/gate.log;
// and exits 0 only when each suite and each graded soak passed for the
// build being gated. `aether-gate watch` runs one step of make gate and
// prints each case, suite and soak figure as the step records it (see
// watch.go).
//
// Suites come from <dir>/suites/*.json (written by rigs/redgreen under
// `make gate`); soak grades from <dir>/soaks/*/grade.json (written by
// `aether-soak grade`). Without suite results nothing was proven and the
// gate fails; without soak grades it passes on the suites alone unless
// -require-soak is set, as a release pipeline that ran a soak should.
// -require names suites that must have written a result: a suite that
// never got to write one is a failure, not an absence.
//
// No declared verdict is trusted: a suite's verdict is recomputed from its
// rows; a soak's grade is re-graded from the manifest and the evidence
// files it binds by sha256, and each gate's verdict recomputed from its
// inputs. Evidence missing or altered, or a grade that disagrees with its
// re-grade, fails naming the file and the gate. With -require-soak every
// soak must also have graded the local soak's full gate set
// (grade.ReleaseGates), each at a limit no looser than the local soak's.
// Every result must also judge the build being gated: -build names it
// (make passes the checkout's revision); without -build, the first suite
// result's build is the one every other result must match. A dirty build passes only with -allow-dirty, and the
// last line says it is dirty.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
)

// config is what the flags ask for.
type config struct {
	dir         string
	required    []string
	requireSoak bool
	build       string
	allowDirty  bool
	// html and log are where the report page and the full text (every
	// table, every failure in full) go; "" writes none.
	html, log string
	// started is when the gate began (make gate's first step); zero when
	// not known, and no total is printed.
	started time.Time
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "watch" {
		os.Exit(watchCmd(os.Args[2:], os.Stdout, os.Stderr))
	}
	c, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-gate: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(c, os.Stdout, os.Stderr))
}

// parseFlags reads the flags. The gate takes no arguments: a directory
// given without -dir would otherwise be ignored and the default judged.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("aether-gate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.dir, "dir", "reports/latest", "the report directory that make gate and aether-soak grade write")
	fs.BoolVar(&c.requireSoak, "require-soak", false, "a release: fail when no soak grade is present, or one lacks the local soak's full gate set or its limits")
	require := fs.String("require", "", "comma-separated suite names that must each have a result")
	fs.StringVar(&c.build, "build", "", "the full git revision every result must have judged (default: the first suite result's)")
	fs.BoolVar(&c.allowDirty, "allow-dirty", false, "accept results of the build made with uncommitted changes")
	fs.StringVar(&c.html, "html", "", "the report page: every table (default <dir>/"+render.GateFile+")")
	fs.StringVar(&c.log, "log", "", "the full text: every table and failure as a terminal has no room for (default <dir>/"+render.GateLog+")")
	started := fs.String("started", "", "when the gate began, Unix seconds (date +%s): the total time is printed from it")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: aether-gate [flags]    judge the results under -dir")
		fmt.Fprintln(stderr, "       aether-gate watch -name NAME [flags] -- COMMAND    run one step of make gate, printing its progress")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: give the report directory as -dir %s", fs.Arg(0), fs.Arg(0))
	}
	for _, n := range strings.Split(*require, ",") {
		if n = strings.TrimSpace(n); n != "" {
			c.required = append(c.required, n)
		}
	}
	var err error
	if c.started, err = parseStarted(*started); err != nil {
		return c, err
	}
	if c.html == "" {
		c.html = filepath.Join(c.dir, render.GateFile)
	}
	if c.log == "" {
		c.log = filepath.Join(c.dir, render.GateLog)
	}
	return c, nil
}

// gate accumulates what the run found. The screen gets a line per suite
// and soak and every failure cut to its width; full gets the tables and
// the failures whole, and page what the report shows.
type gate struct {
	config
	screen *screen
	full   io.Writer
	page   render.Gate
	// rev is the revision judged; dirty is set once a dirty result of it
	// was accepted.
	rev          string
	dirty        bool
	failedSuites int
	failedSoaks  int
	failedSteps  int
}

func (g *gate) failf(format string, a ...any) {
	msg := fmt.Sprintf(format, a...)
	g.page.Problems = append(g.page.Problems, msg)
	line := "aether-gate: FAIL: " + msg
	fmt.Fprintln(g.full, line)
	g.screen.lines(wrap(line, 3, g.whereInFull()))
}

// whereInFull ends a failure cut short on the screen.
func (g *gate) whereInFull() string {
	if g.log == "" {
		return "(cut)"
	}
	return "(in full: " + g.log + ")"
}

func run(c config, stdout, stderr io.Writer) int {
	files, err := filepath.Glob(filepath.Join(c.dir, "suites", "*.json"))
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		return 2
	}
	grades, err := filepath.Glob(filepath.Join(c.dir, "soaks", "*", render.GradeFile))
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		return 2
	}
	sort.Strings(files)
	sort.Strings(grades)
	steps, err := loadSteps(c.dir)
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		return 2
	}
	var log bytes.Buffer
	g := &gate{config: c, screen: newScreen(stdout), full: &log, rev: gatedRevision(c, files)}
	g.page.Judged = time.Now().UTC()
	for _, st := range steps {
		g.page.Steps = append(g.page.Steps, render.GateStep{Name: st.Name, Command: strings.Join(st.Command, " "),
			Log: st.Log, Exit: st.Exit, Error: st.Error, Took: st.took()})
	}
	code := g.judge(files, grades, steps)
	if err := g.write(log.Bytes()); err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		if code == 0 {
			code = 2
		}
	}
	if line := g.total(steps); line != "" {
		g.screen.line(line)
	}
	return code
}

// judge judges every suite, soak and step, prints the verdict line and
// returns the exit code.
func (g *gate) judge(files, grades []string, steps []step) int {
	if len(files) == 0 {
		return g.verdict(results.Fail, fmt.Sprintf("no suite results under %s/suites: nothing was proven", g.dir))
	}
	g.screen.line(fmt.Sprintf("%5s  judging %d suite result(s) under %s and %d soak grade(s) under %s",
		since(g.started, time.Now()), len(files), filepath.Join(g.dir, "suites"), len(grades), filepath.Join(g.dir, "soaks")))
	nSuites := g.suites(files)
	g.soaks(grades)
	for _, st := range steps {
		if why := st.failed(); why != "" {
			g.failf("%s", why)
			g.failedSteps++
		}
	}
	if len(grades) == 0 && g.requireSoak {
		return g.verdict(results.Fail, fmt.Sprintf("no soak grade under %s/soaks and -require-soak is set", g.dir))
	}
	build := g.buildLine()
	g.page.Build = build
	if g.failedSuites > 0 || g.failedSoaks > 0 || g.failedSteps > 0 {
		steps := ""
		if g.failedSteps > 0 {
			steps = fmt.Sprintf(", and %d step(s) failed", g.failedSteps)
		}
		return g.verdict(results.Fail, fmt.Sprintf("%d of %d suite(s) and %d of %d soak(s) did not pass%s, for %s",
			g.failedSuites, nSuites, g.failedSoaks, len(grades), steps, build))
	}
	return g.verdict(results.Pass, fmt.Sprintf("%d suite(s) and %d soak(s) passed, for %s", len(files), len(grades), build))
}

// verdict prints the verdict line, after where the tables are: whole in
// the log, and on the screen wrapped rather than cut.
func (g *gate) verdict(v results.Verdict, why string) int {
	line := fmt.Sprintf("aether-gate: %s: %s", v, why)
	g.page.Verdict, g.page.Line = v, line
	if v != results.Pass {
		g.page.Problems = append(g.page.Problems, why)
	}
	if g.html != "" {
		g.screen.line(fmt.Sprintf("%5s  report: %s (every table)", "", g.html))
	}
	if g.log != "" {
		g.screen.line(fmt.Sprintf("%5s  log:    %s (the tables as text, every failure whole)", "", g.log))
	}
	fmt.Fprintln(g.full, line)
	g.screen.lines(wrap(line, 3, g.whereInFull()))
	if v == results.Pass {
		return 0
	}
	return 1
}

// write writes the log and the report page.
func (g *gate) write(log []byte) error {
	var errs []error
	if g.log != "" {
		if err := os.WriteFile(g.log, log, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("failed to write the gate's log: %w", err))
		}
	}
	if g.html != "" {
		if !g.started.IsZero() {
			g.page.Total = time.Since(g.started)
		}
		page, err := render.GatePage(g.page)
		if err == nil {
			err = os.WriteFile(g.html, page, 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to write the gate's report %s: %w", g.html, err))
		}
	}
	return errors.Join(errs...)
}

// total is the last line: how long the gate took, and each step.
func (g *gate) total(steps []step) string {
	if g.started.IsZero() {
		return ""
	}
	var each []string
	for _, st := range steps {
		each = append(each, st.Name+" "+span(st.took()))
	}
	line := "total " + span(time.Since(g.started))
	if len(each) > 0 {
		line += " (" + strings.Join(each, ", ") + ")"
	}
	return line
}

// suites judges every suite result and every required suite; it returns
// how many suites were expected.
func (g *gate) suites(files []string) int {
	seen := map[string]bool{}
	for _, f := range files {
		r, err := results.Load(f)
		if err != nil {
			// Results are written as <suite>.json: an unreadable one is
			// that suite's failure, not a second, missing suite.
			seen[strings.TrimSuffix(filepath.Base(f), ".json")] = true
			g.failf("%v", err)
			g.failedSuites++
			continue
		}
		seen[r.Suite] = true
		g.page.Suites = append(g.page.Suites, r)
		fmt.Fprintln(g.full, r.Table())
		g.screen.line(suiteLine("", r))
		for _, row := range r.Cases {
			if ok, _ := row.Counts(); !ok {
				g.screen.line(caseLine("", r.Suite, row))
			}
		}
		problems := results.CheckSuite(f, r)
		if why := g.judges(r.Build); why != "" {
			problems = append(problems, f+": "+why)
		}
		for _, p := range problems {
			g.failf("%s", p)
		}
		v, _ := results.Decide(r)
		if v == results.Interrupted {
			g.failf("%s: suite %s was interrupted, not judged: the run was cut short before its cases were done; run it to the end", f, r.Suite)
		}
		if v == results.Partial {
			g.failf("%s: suite %s is a partial run, not judged (%s): a focused run speaks for the cases it ran, not for the suite; run the suite whole", f, r.Suite, r.Partial)
		}
		if v != results.Pass || len(problems) > 0 {
			g.failedSuites++
		}
	}
	n := len(files)
	for _, name := range g.required {
		if !seen[name] {
			n++
			g.failf("suite %s wrote no result under %s/suites: it did not run to the end", name, g.dir)
			g.failedSuites++
		}
	}
	return n
}

// soaks judges every soak grade: re-graded from the manifest and evidence
// it binds, its gates recomputed, the build that graded it, whether the
// soak ran the build being gated at all and, for a release, whether it
// graded the local soak's full gate set.
func (g *gate) soaks(files []string) {
	for _, f := range files {
		full, err := render.LoadGrade(f)
		if err != nil {
			g.failf("%v", err)
			g.failedSoaks++
			continue
		}
		// The evidence decides: a grade it refutes is refused, and the
		// table shown, the soak's verdict and its builds are the re-grade's.
		regraded, refuted := grade.Regrade(f, full)
		shown := regraded
		if regraded != nil {
			fmt.Fprintln(g.full, render.Text(regraded))
		} else {
			shown = full
			fmt.Fprintf(g.full, "%s(as %s declares it: not re-graded)\n\n", render.Text(full), f)
		}
		g.showSoak(f, shown, regraded != nil)
		s, err := results.LoadSoak(f)
		if err != nil {
			g.failf("%v", err)
			g.failedSoaks++
			continue
		}
		problems := append(results.CheckSoak(f, s), refuted...)
		if g.requireSoak {
			for _, why := range grade.ReleaseRefusals(full) {
				problems = append(problems, f+": "+why)
			}
		}
		if why := g.judges(s.Build); why != "" {
			problems = append(problems, f+": the grade "+why)
		}
		gates, builds := s.Gates, s.Builds
		if regraded != nil {
			gates, builds = regraded.Gates, regraded.Builds
		}
		if g.rev != "" && !results.SoakCovers(builds, g.rev) {
			problems = append(problems, fmt.Sprintf("%s: cannot judge build %s from soak %s: it ran %s",
				f, g.rev, s.Soak, strings.Join(builds, ", ")))
		}
		for _, p := range problems {
			g.failf("%s", p)
		}
		if v, _ := results.DecideSoak(recomputed(gates)); v != results.Pass || regraded == nil || len(problems) > 0 {
			g.failedSoaks++
		}
	}
}

// recomputed replaces each gate's declared verdict with its inputs'.
func recomputed(gates []results.Gate) []results.Gate {
	out := make([]results.Gate, len(gates))
	for i, gt := range gates {
		out[i] = gt
		out[i].Verdict, _ = gt.Inputs.Decide()
	}
	return out
}

// judges says why a result stamped b cannot speak for the gated build.
func (g *gate) judges(b results.Build) string {
	why := b.Judges(g.rev, g.allowDirty)
	if why == "" && b.Dirty {
		g.dirty = true
	}
	return why
}

// gatedRevision is -build, or else the first revision a suite result
// records: every other result must then match it.
func gatedRevision(c config, files []string) string {
	if c.build != "" {
		return c.build
	}
	for _, f := range files {
		if r, err := results.Load(f); err == nil && r.Build.Revision != "" {
			return r.Build.Revision
		}
	}
	return ""
}

// buildLine names the gated build for the verdict line.
func (g *gate) buildLine() string {
	switch {
	case g.rev == "":
		return "no build: no result records one"
	case g.dirty:
		return "build " + g.rev + " (dirty: uncommitted changes, not releasable)"
	}
	return "build " + g.rev + " (clean)"
}

// showSoak prints a soak's line, and one per gate that did not pass, and
// keeps the grade for the page, linked to the soak's own report.
func (g *gate) showSoak(f string, shown *grade.Grade, regraded bool) {
	what := "grade"
	if !regraded {
		what = "declared"
	}
	g.screen.line(fmt.Sprintf(lineFormat, "", "soak", what, shown.Soak, shown.Verdict, shown.Reason))
	for _, gt := range shown.Gates {
		if gt.Verdict != results.Pass {
			g.screen.line(fmt.Sprintf(lineFormat, "", "soak", "gate", gt.Name, gt.Verdict, gt.Figure))
		}
	}
	s := render.GateSoak{Grade: shown, Regraded: regraded}
	page := filepath.Join(filepath.Dir(f), render.HTMLFile)
	if _, err := os.Stat(page); err == nil && g.html != "" {
		if rel, err := filepath.Rel(filepath.Dir(g.html), page); err == nil {
			s.Link = filepath.ToSlash(rel)
		}
	}
	g.page.Soaks = append(g.page.Soaks, s)
}
