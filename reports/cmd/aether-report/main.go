// Command aether-report grades the recorded soaks and renders the reports:
// one folder per soak under <out>/runs/ (report.html, grade.json,
// junit.xml) and the nightly index <out>/index.html listing every run with
// its verdict and the trend of the h3/h2 ratio, including runs graded
// earlier that are still under <out>/runs/, and the benchmark's history
// (<out>/bench/history.jsonl, written by make bench) with its trend. Suite results under
// -suites, when present, join each page as red-then-green tables.
//
// A soak's FAIL is part of the report, not an error: the command exits
// non-zero only when something could not be graded or rendered.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/soak/bench"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func main() {
	os.Exit(runArgs(os.Args[1:], os.Stdout, os.Stderr))
}

// runArgs reads the flags and runs. The command takes no arguments: a
// directory given without its flag would otherwise be ignored and the
// default rendered in its place.
func runArgs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aether-report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "reports", "directory for runs/ and index.html")
	soaks := fs.String("soaks", "fixtures/soaks", "directory holding one folder per soak, each with manifest.yaml or manifest.json")
	suites := fs.String("suites", "reports/latest/suites", "suite results to include (skipped when absent)")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aether-report: unexpected argument %q: directories are given with -out, -soaks and -suites\n", fs.Arg(0))
		return 2
	}
	return run(*out, *soaks, *suites, stdout, stderr)
}

func run(out, soaks, suitesDir string, stdout, stderr io.Writer) int {
	suites, err := render.LoadSuites(suitesDir)
	if err != nil {
		fmt.Fprintf(stderr, "aether-report: %v\n", err)
		return 2
	}
	manifests, err := manifest.Find(soaks)
	if err != nil {
		fmt.Fprintf(stderr, "aether-report: %v\n", err)
		return 2
	}
	var runs []render.Run
	for _, p := range manifests {
		m, err := manifest.Load(p)
		if err != nil {
			fmt.Fprintf(stderr, "aether-report: %v\n", err)
			return 2
		}
		g, err := grade.Run(m)
		if err != nil {
			fmt.Fprintf(stderr, "aether-report: %v\n", err)
			return 2
		}
		name := filepath.Base(filepath.Dir(p))
		dir := filepath.Join(out, "runs", name)
		if err := render.WriteSoak(dir, g, suites); err != nil {
			fmt.Fprintf(stderr, "aether-report: %v\n", err)
			return 2
		}
		runs = append(runs, render.Run{Grade: g, Link: "runs/" + name + "/" + render.HTMLFile})
		fmt.Fprintf(stdout, "%-34s %-12s %s\n", g.Soak, g.Verdict, filepath.Join(dir, render.HTMLFile))
	}
	// Runs graded on earlier nights stay listed: the index is the history
	// the trend is drawn from.
	graded := map[string]bool{}
	for _, r := range runs {
		graded[r.Link] = true
	}
	earlier, _ := filepath.Glob(filepath.Join(out, "runs", "*", render.GradeFile))
	for _, p := range earlier {
		link := "runs/" + filepath.Base(filepath.Dir(p)) + "/" + render.HTMLFile
		if graded[link] {
			continue
		}
		g, err := render.LoadGrade(p)
		if err != nil {
			fmt.Fprintf(stderr, "aether-report: %v\n", err)
			return 2
		}
		runs = append(runs, render.Run{Grade: g, Link: link})
	}
	// The benchmark's history (make bench) joins the index when present.
	hist, err := bench.ReadHistory(filepath.Join(out, render.BenchDir, bench.HistoryFile))
	if err != nil {
		fmt.Fprintf(stderr, "aether-report: %v\n", err)
		return 2
	}
	page, err := render.IndexWithBench(runs, suites, hist)
	if err != nil {
		fmt.Fprintf(stderr, "aether-report: %v\n", err)
		return 2
	}
	idx := filepath.Join(out, render.IndexFile)
	if err := os.WriteFile(idx, page, 0o644); err != nil {
		fmt.Fprintf(stderr, "aether-report: failed to write %s: %v\n", idx, err)
		return 2
	}
	fmt.Fprintf(stdout, "index: %s\n", idx)
	return 0
}
