// Command aether-report grades the recorded soaks and renders the reports:
// one folder per soak under <out>/runs/ (report.html, grade.json,
// junit.xml) and the nightly index <out>/index.html listing every run with
// its verdict and the trend of the h3/h2 ratio, including runs graded
// earlier that are still under <out>/runs/. Suite results under
// -suites, when present, join each page as red-then-green tables.
//
// A soak's FAIL is part of the report, not an error: the command exits
// non-zero only when something could not be graded or rendered.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func main() {
	out := flag.String("out", "reports", "directory for runs/ and index.html")
	soaks := flag.String("soaks", "fixtures/soaks", "directory holding one folder per soak, each with manifest.yaml or manifest.json")
	suites := flag.String("suites", "reports/latest/suites", "suite results to include (skipped when absent)")
	flag.Parse()
	os.Exit(run(*out, *soaks, *suites, os.Stdout, os.Stderr))
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
	page, err := render.Index(runs, suites)
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
