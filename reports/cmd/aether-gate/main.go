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
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/soak/grade"
)

func main() {
	dir := flag.String("dir", "reports/latest", "report directory written by `make gate` and `aether-soak grade`")
	requireSoak := flag.Bool("require-soak", false, "fail when no soak grade is present")
	flag.Parse()
	os.Exit(run(*dir, *requireSoak, os.Stdout, os.Stderr))
}

func run(dir string, requireSoak bool, stdout, stderr io.Writer) int {
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
	for _, f := range files {
		r, err := redgreen.Load(f)
		if err != nil {
			fmt.Fprintf(stderr, "aether-gate: %v\n", err)
			failedSuites++
			continue
		}
		fmt.Fprintln(stdout, r.Table())
		if r.Verdict != redgreen.Pass {
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
			failedSuites, len(files), failedSoaks, len(grades))
		return 1
	}
	fmt.Fprintf(stdout, "aether-gate: PASS: %d suite(s) and %d soak(s) passed\n", len(files), len(grades))
	return 0
}
