// Command aether-soak grades recorded soaks.
//
//	aether-soak grade [-out DIR] MANIFEST   grade one soak, write its report, exit 0 only on PASS
//	aether-soak grade-all [-out DIR] DIR    grade every DIR/*/manifest.yaml and print the verdicts
//
// grade writes report.html, grade.json and junit.xml into -out (default
// reports/latest/soaks/<soak>), where aether-gate finds them; suite results
// under -suites join the page as red-then-green tables. grade-all
// exits non-zero only when a soak could not be graded, unless -strict:
// a recorded FAIL is a fact about that soak, not an error of the grader.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/reports/results"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: aether-soak grade [-out DIR] MANIFEST | aether-soak grade-all [-out DIR] [-strict] DIR")
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "grade":
		fs := flag.NewFlagSet("grade", flag.ContinueOnError)
		fs.SetOutput(stderr)
		out := fs.String("out", "", "report directory (default reports/latest/soaks/<soak>)")
		suitesDir := fs.String("suites", "reports/latest/suites", "suite results to add to the page (skipped when absent)")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
			usage(stderr)
			return 2
		}
		suites, err := render.LoadSuites(*suitesDir)
		if err != nil {
			fmt.Fprintf(stderr, "aether-soak: %v\n", err)
			return 2
		}
		g, err := gradeOne(fs.Arg(0), *out, suites, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "aether-soak: %v\n", err)
			return 2
		}
		if g.Verdict != grade.Pass {
			return 1
		}
		return 0
	case "grade-all":
		fs := flag.NewFlagSet("grade-all", flag.ContinueOnError)
		fs.SetOutput(stderr)
		out := fs.String("out", "reports/runs", "directory to write one report folder per soak into")
		strict := fs.Bool("strict", false, "exit 1 when any soak did not pass")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
			usage(stderr)
			return 2
		}
		manifests, err := filepath.Glob(filepath.Join(fs.Arg(0), "*", "manifest.yaml"))
		if err != nil || len(manifests) == 0 {
			fmt.Fprintf(stderr, "aether-soak: no */manifest.yaml under %s\n", fs.Arg(0))
			return 2
		}
		var grades []*grade.Grade
		code := 0
		for _, m := range manifests {
			g, err := gradeOne(m, filepath.Join(*out, filepath.Base(filepath.Dir(m))), nil, io.Discard)
			if err != nil {
				fmt.Fprintf(stderr, "aether-soak: %v\n", err)
				code = 2
				continue
			}
			grades = append(grades, g)
			if *strict && g.Verdict != grade.Pass && code == 0 {
				code = 1
			}
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "soak\tverdict\treason")
		for _, g := range grades {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", g.Soak, g.Verdict, g.Reason)
		}
		tw.Flush()
		return code
	default:
		usage(stderr)
		return 2
	}
}

func gradeOne(path, out string, suites []results.Result, stdout io.Writer) (*grade.Grade, error) {
	m, err := manifest.Load(path)
	if err != nil {
		return nil, err
	}
	g, err := grade.Run(m)
	if err != nil {
		return nil, err
	}
	// The release gate takes a grade only from the build it gates.
	g.Build = results.Stamp()
	if out == "" {
		out = filepath.Join("reports", "latest", "soaks", m.Name)
	}
	if err := render.WriteSoak(out, g, suites); err != nil {
		return nil, err
	}
	fmt.Fprint(stdout, render.Text(g))
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(out, "report.html"))
	return g, nil
}
