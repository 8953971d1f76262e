// Command aether-gate reads the latest suite results and soak grades and
// says whether a build may ship: it prints every suite's red-then-green
// table and every soak gate with its figure and reason, and exits 0 only
// when each suite and each graded soak passed for the build being gated.
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
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
}

func main() {
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
	return c, nil
}

// gate accumulates what the run found.
type gate struct {
	config
	out io.Writer
	// rev is the revision judged; dirty is set once a dirty result of it
	// was accepted.
	rev          string
	dirty        bool
	failedSuites int
	failedSoaks  int
}

func (g *gate) failf(format string, a ...any) {
	fmt.Fprintf(g.out, "aether-gate: FAIL: "+format+"\n", a...)
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
	if len(files) == 0 {
		fmt.Fprintf(stderr, "aether-gate: FAIL: no suite results under %s/suites: nothing was proven\n", c.dir)
		return 1
	}
	g := &gate{config: c, out: stdout, rev: gatedRevision(c, files)}
	nSuites := g.suites(files)
	g.soaks(grades)
	if len(grades) == 0 && c.requireSoak {
		g.failf("no soak grade under %s/soaks and -require-soak is set", c.dir)
		return 1
	}
	build := g.buildLine()
	if g.failedSuites > 0 || g.failedSoaks > 0 {
		g.failf("%d of %d suite(s) and %d of %d soak(s) did not pass, for %s",
			g.failedSuites, nSuites, g.failedSoaks, len(grades), build)
		return 1
	}
	fmt.Fprintf(stdout, "aether-gate: PASS: %d suite(s) and %d soak(s) passed, for %s\n", len(files), len(grades), build)
	return 0
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
		fmt.Fprintln(g.out, r.Table())
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
		if regraded != nil {
			fmt.Fprintln(g.out, render.Text(regraded))
		} else {
			fmt.Fprintf(g.out, "%s(as %s declares it: not re-graded)\n\n", render.Text(full), f)
		}
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
