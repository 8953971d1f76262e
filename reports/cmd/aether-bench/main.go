// Command aether-bench runs the side-by-side benchmark (soak/bench) on the
// embedded netns cluster as root, writes reports/bench/<run>/ (bench.json,
// report.html with the table and charts), appends the run to
// reports/bench/history.jsonl and re-renders the bench index
// reports/bench/index.html with the trend. It prints the table.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/soak/bench"
)

func main() {
	os.Exit(runArgs(os.Args[1:], os.Stdout, os.Stderr))
}

func runArgs(args []string, stdout, stderr io.Writer) int {
	d := bench.Defaults()
	fs := flag.NewFlagSet("aether-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "reports/bench", "directory of the run folders, the history and the bench index")
	scenario := fs.String("scenario", "fixtures/scenarios/eastwest.yaml", "scenario file (web-0 -> api, dgram)")
	id := fs.String("id", time.Now().UTC().Format("20060102-150405"), "the run's folder name")
	fs.IntVar(&d.Conns, "conns", d.Conns, "h2load connections")
	fs.IntVar(&d.RPS, "rps", d.RPS, "paced rate over all connections")
	fs.DurationVar(&d.Paced, "paced", d.Paced, "length of each visit's paced run")
	fs.DurationVar(&d.Closed, "closed", d.Closed, "length of each visit's closed-loop run")
	fs.DurationVar(&d.Stream, "stream", d.Stream, "length of each iperf3 run")
	fs.BoolVar(&d.SkipInstall, "skip-install", false, "do not apt-get install missing tools; fail instead")
	fs.BoolVar(&d.KeepClusterDir, "keep", false, "keep the cluster's run dir (logs, peers' configurations) under $TMPDIR")
	verbose := fs.Bool("v", false, "narrate the bring-up")
	plan := *d.Scale
	scale := fs.Bool("scale", true, "after the rows, run the scale curves over every HTTP row (-scale=false skips them)")
	point := fs.Duration("scale-point", time.Duration(plan.Seconds)*time.Second, "length of each scale curve point (whole seconds)")
	rates := fs.String("scale-rates", joinInts(plan.Rates), "paced rates of the rate sweep, rising, each a multiple of -scale-rate-conns")
	fs.IntVar(&plan.RateConns, "scale-rate-conns", plan.RateConns, "connections of the rate sweep")
	conns := fs.String("scale-conns", joinInts(plan.Conns), "connection counts of the closed-loop sweep, rising")
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "aether-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	d.Scale = nil
	if *scale {
		var err error
		if plan.Rates, err = parseInts("-scale-rates", *rates); err == nil {
			plan.Conns, err = parseInts("-scale-conns", *conns)
		}
		if err == nil {
			plan.Seconds = point.Seconds()
			err = plan.Validate()
		}
		if err != nil {
			fmt.Fprintf(stderr, "aether-bench: %v\n", err)
			return 2
		}
		d.Scale = &plan
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "aether-bench: needs root (network namespaces, apt-get)")
		return 2
	}
	d.Scenario, d.Run, d.Out = *scenario, *id, filepath.Join(*out, *id)
	d.Logf = func(f string, a ...any) { fmt.Fprintf(stderr, time.Now().Format("15:04:05 ")+f+"\n", a...) }
	d.Verbose = *verbose
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	rep, err := bench.Run(ctx, d)
	if err != nil {
		fmt.Fprintf(stderr, "aether-bench: %v\n", err)
		return 1
	}
	if err := write(*out, d.Out, rep); err != nil {
		fmt.Fprintf(stderr, "aether-bench: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, rep.Table())
	fmt.Fprintf(stdout, "report: %s\n", filepath.Join(d.Out, bench.HTMLFile))
	return 0
}

// parseInts reads a comma-separated list of whole numbers given to flag.
func parseInts(flag, s string) ([]int, error) {
	var out []int
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("%s: item %d, %q, is not a whole number", flag, i+1, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// write writes the run's folder, appends it to the history and renders
// the bench index from the whole history.
func write(out, dir string, rep *bench.Report) error {
	if err := rep.Write(dir); err != nil {
		return err
	}
	page, err := render.BenchHTML(rep)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, bench.HTMLFile), page, 0o644); err != nil {
		return fmt.Errorf("failed to write the bench page: %w", err)
	}
	hist := filepath.Join(out, bench.HistoryFile)
	if err := bench.AppendHistory(hist, rep.Entry()); err != nil {
		return err
	}
	h, err := bench.ReadHistory(hist)
	if err != nil {
		return err
	}
	idx, err := render.BenchIndex(h)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, render.IndexFile), idx, 0o644); err != nil {
		return fmt.Errorf("failed to write the bench index: %w", err)
	}
	return nil
}
