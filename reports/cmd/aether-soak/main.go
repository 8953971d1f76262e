// Command aether-soak runs local soaks and grades soaks.
//
//	aether-soak run [-duration D] [-agent-flag F]...  run a soak on the embedded netns cluster, grade it, update the index
//	aether-soak grade [-out DIR] MANIFEST      grade one soak, write its report, exit 0 only on PASS
//	aether-soak grade-all [-out DIR] SOAKS     grade every SOAKS/*/manifest.{yaml,json} and print the verdicts
//
// Both write report.html, grade.json and junit.xml into DIR/<folder>, where
// <folder> is the name of the folder holding the soak's manifest: this
// command alone names report folders, so `make gate` passes only DIR.
// grade's DIR defaults to reports/latest/soaks, where aether-gate finds it;
// suite results under -suites join the page as red-then-green tables.
// grade-all's DIR defaults to reports/runs. grade-all exits non-zero only
// when a soak could not be graded, unless -strict: a recorded FAIL is a
// fact about that soak, not an error of the grader.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: aether-soak run [flags] | aether-soak grade [-out DIR] [-suites DIR] MANIFEST | aether-soak grade-all [-out DIR] [-strict] SOAKS")
}

// misuse names what was wrong with the command line, then the usage.
func misuse(w io.Writer, format string, a ...any) int {
	fmt.Fprintf(w, "aether-soak: "+format+"\n", a...)
	usage(w)
	return 2
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return misuse(stderr, "no command given")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		fmt.Fprintln(stdout, "each command's flags: aether-soak COMMAND -h")
		return 0
	case "run":
		return runCmd(args[1:], stdout, stderr)
	case "grade":
		fs := flag.NewFlagSet("grade", flag.ContinueOnError)
		fs.SetOutput(stderr)
		out := fs.String("out", filepath.Join("reports", "latest", "soaks"), "directory to write the soak's report folder into")
		suitesDir := fs.String("suites", "reports/latest/suites", "suite results to add to the page (skipped when absent)")
		if err := fs.Parse(args[1:]); err != nil {
			usage(stderr)
			return 2
		}
		if fs.NArg() != 1 {
			return misuse(stderr, "grade takes one MANIFEST, got %d argument(s)", fs.NArg())
		}
		suites, err := render.LoadSuites(*suitesDir)
		if err != nil {
			fmt.Fprintf(stderr, "aether-soak: %v\n", err)
			return 2
		}
		g, _, err := gradeOne(fs.Arg(0), *out, suites, nil, stdout)
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
		if err := fs.Parse(args[1:]); err != nil {
			usage(stderr)
			return 2
		}
		if fs.NArg() != 1 {
			return misuse(stderr, "grade-all takes one SOAKS folder, got %d argument(s)", fs.NArg())
		}
		manifests, err := manifest.Find(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "aether-soak: %v\n", err)
			return 2
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		// The reason goes last: it can be long, and the report path stays in
		// its column.
		fmt.Fprintln(tw, "soak\tverdict\treport\treason")
		code := 0
		for _, m := range manifests {
			g, report, err := gradeOne(m, *out, nil, nil, io.Discard)
			if err != nil {
				fmt.Fprintf(stderr, "aether-soak: %v\n", err)
				code = 2
				continue
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", g.Soak, g.Verdict, report, rowReason(g))
			if *strict && g.Verdict != grade.Pass && code == 0 {
				code = 1
			}
		}
		tw.Flush()
		return code
	default:
		return misuse(stderr, "unknown command %q (want run, grade or grade-all)", args[0])
	}
}

// rowReason is a soak's reason with, for a soak that did not pass, each
// deciding gate's own reason: "refused: <gate>" alone does not say why,
// and the table is all grade-all prints.
func rowReason(g *grade.Grade) string {
	if g.Verdict == grade.Pass {
		return g.Reason
	}
	var why []string
	for _, gt := range g.Gates {
		if gt.Verdict == g.Verdict {
			why = append(why, fmt.Sprintf("%s (%s)", gt.Name, gt.Reason))
		}
	}
	if len(why) == 0 {
		return g.Reason
	}
	return strings.ToLower(string(g.Verdict)) + ": " + strings.Join(why, "; ")
}

// gradeOne grades the soak at path, writes its report into root/<folder>
// (manifest.Folder) and returns the grade and the report page's path.
// binaries are the hashes of the mesh binaries the soak ran, when this
// process ran it (nil for a recorded soak).
func gradeOne(path, root string, suites []results.Result, binaries map[string]string, stdout io.Writer) (*grade.Grade, string, error) {
	m, err := manifest.Load(path)
	if err != nil {
		return nil, "", err
	}
	g, err := grade.Run(m)
	if err != nil {
		return nil, "", err
	}
	// The release gate takes a grade only from the build it gates.
	g.Build = results.Stamp(binaries)
	folder, err := m.Folder()
	if err != nil {
		return nil, "", err
	}
	out := filepath.Join(root, folder)
	if err := render.WriteSoak(out, g, suites); err != nil {
		return nil, "", err
	}
	report := filepath.Join(out, "report.html")
	fmt.Fprint(stdout, render.Text(g))
	fmt.Fprintf(stdout, "report: %s\n", report)
	return g, report, nil
}
