// Command aether-gate reads the latest suite results and soak grades and
// says whether a build may ship: it prints every suite's red-then-green
// table and every soak gate with its figure and reason, and exits 0 only
// when each suite and each graded soak passed.
//
// Suites come from <dir>/suites/*.json (written by rigs/redgreen under
// `make gate`); soak grades from <dir>/soaks/*/grade.json (written by
// `aether-soak grade`). Without suite results nothing was proven and the
// gate fails; without soak grades it passes on the suites alone unless
// -require-soak is set, as a release pipeline that ran a soak should.
// -require names suites that must have written a result: a suite that
// never got to write one (its bring-up failed) is a failure, not an
// absence.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/soak/grade"
)

func main() {
	dir := flag.String("dir", "reports/latest", "the report directory that make gate and aether-soak grade write")
	requireSoak := flag.Bool("require-soak", false, "fail when no soak grade is present")
	require := flag.String("require", "", "comma-separated suite names that must each have a result")
	flag.Parse()
	var names []string
	for _, n := range strings.Split(*require, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	os.Exit(run(*dir, *requireSoak, names, os.Stdout, os.Stderr))
}

func run(dir string, requireSoak bool, required []string, stdout, stderr io.Writer) int {
	files, err := filepath.Glob(filepath.Join(dir, "suites", "*.json"))
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		return 2
	}
	sort.Strings(files)
	if len(files) == 0 {
		fmt.Fprintf(stderr, "aether-gate: FAIL: no suite results under %s/suites: nothing was proven\n", dir)
		return 1
	}
	failedSuites := 0
	seen := map[string]bool{}
	for _, f := range files {
		r, err := redgreen.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "aether-gate: %v\n", err)
			failedSuites++
			continue
		}
		seen[r.Suite] = true
		fmt.Fprintln(stdout, r.Table())
		if r.Verdict != redgreen.Pass {
			failedSuites++
		}
	}
	nSuites := len(files)
	for _, name := range required {
		if !seen[name] {
			nSuites++
			fmt.Fprintf(stdout, "aether-gate: suite %s wrote no result under %s/suites: it did not run to the end\n", name, dir)
			failedSuites++
		}
	}

	grades, err := filepath.Glob(filepath.Join(dir, "soaks", "*", render.GradeFile))
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		return 2
	}
	sort.Strings(grades)
	failedSoaks := 0
	for _, f := range grades {
		g, err := render.LoadGrade(f)
		if err != nil {
			fmt.Fprintf(stderr, "aether-gate: %v\n", err)
			failedSoaks++
			continue
		}
		fmt.Fprintln(stdout, render.Text(g))
		// The soak verdict is re-derived from its gates so that a grade
		// file whose verdict was edited to PASS does not pass.
		if v, _ := grade.Decide(g.Gates); v != grade.Pass || g.Verdict != grade.Pass {
			failedSoaks++
		}
	}
	if len(grades) == 0 && requireSoak {
		fmt.Fprintf(stdout, "aether-gate: FAIL: no soak grade under %s/soaks and -require-soak is set\n", dir)
		return 1
	}
	if failedSuites > 0 || failedSoaks > 0 {
		fmt.Fprintf(stdout, "aether-gate: FAIL: %d of %d suite(s) and %d of %d soak(s) did not pass\n",
			failedSuites, nSuites, failedSoaks, len(grades))
		return 1
	}
	fmt.Fprintf(stdout, "aether-gate: PASS: %d suite(s) and %d soak(s) passed\n", len(files), len(grades))
	return 0
}
