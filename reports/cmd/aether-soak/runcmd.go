package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
	soakrun "github.com/aether-mesh/aether/soak/run"
)

// stringList is a repeatable flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// runCmd is `aether-soak run`: it runs a local soak, grades it into its
// own folder under -out, updates the index beside -out, and with -gate-out
// also files the grade where aether-gate reads soak grades.
func runCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := soakrun.Config{Mesh: soakrun.MeshNames{TrustDomain: "aether.local", MeshDomain: "mesh.local"}}
	var flags stringList
	fs.StringVar(&cfg.Scenario, "scenario", "fixtures/scenarios/soak.yaml", "the cluster's scenario: soak-long.yaml has its own roles (four nodes, a prober and a load source on each), any other soak.yaml's")
	fs.StringVar(&cfg.Out, "out", "reports/runs", "directory of run folders; the nightly index is written beside it")
	fs.StringVar(&cfg.ID, "id", "", "the run folder's name (default local-<UTC time>-<revision>)")
	fs.DurationVar(&cfg.Duration, "duration", 10*time.Minute, "the soak's length, switches and chaos included")
	fs.DurationVar(&cfg.Tick, "tick", time.Second, "sampling grid: every window, exclusion and event boundary is a tick")
	fs.DurationVar(&cfg.Warmup, "warmup", 3*time.Second, "each discarded warm-up window")
	fs.Float64Var(&cfg.Rate, "rate", 150, "open-loop load in requests per second, over all source pods")
	fs.DurationVar(&cfg.ProbeInterval, "probe-every", 100*time.Millisecond, "each liveness prober pod's interval")
	fs.Float64Var(&cfg.ProbeRate, "probe-rate", 0, "liveness probes per second over every prober pod, replacing -probe-every (300 starts 1,080,000 in an hour)")
	fs.DurationVar(&cfg.DirectInterval, "direct-every", 100*time.Millisecond, "the network fault steps' direct probes' interval (the fault bounds are for 100ms)")
	fs.DurationVar(&cfg.PairEvery, "pair-every", time.Minute, "one ABBA pair per this much of the duration (at least six pairs)")
	leaks := fs.Bool("leaks", false, "sample every agent's and proxy's resident memory, open fds, goroutines and recorded pairs, and grade their growth per hour (the leak gates)")
	leakEvery := fs.Duration("leak-every", soakrun.DefaultLeaks().Every, "with -leaks, how often each process is sampled (a whole number of ticks)")
	fs.DurationVar(&cfg.SVIDTTL, "svid-ttl", time.Minute, "the agents' --svid-ttl (SVIDs rotate at half of it)")
	fs.DurationVar(&cfg.PairFetchWindow, "pair-fetch-window", 5*time.Second, "the agents' --east-west-quic-pair-fetch-window: its prunes happen between two agent restarts")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "the chaos schedule's seed")
	fs.IntVar(&cfg.NetworkEvery, "network-every", 3, "a network fault (netem, link flap, partition; netem first) in every Nth gap between pairs; 0: none")
	fs.Var(&flags, "agent-flag", "an extra aether-agent flag, repeatable (a test-only control soaks a build broken on purpose)")
	fs.Float64Var(&cfg.MaxRatio, "max-ratio", 1.5, "the h3/h2 per-request CPU gate")
	fs.StringVar(&cfg.SLO, "slo", "99.9", "the liveness SLO in percent")
	gateOut := fs.String("gate-out", "", "also write the grade into DIR/<id> (reports/latest/soaks: where aether-gate reads it)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 {
		return misuse(stderr, "run takes flags only, got %q", fs.Arg(0))
	}
	cfg.AgentFlags = flags
	cfg.Roles = soakrun.RolesFor(cfg.Scenario)
	if *leaks {
		l := soakrun.DefaultLeaks()
		l.Every = *leakEvery
		cfg.Leaks = &l
	}
	build := results.Stamp(nil)
	cfg.Build = build.Revision
	if cfg.Build == "" {
		cfg.Build = "unknown"
	}
	if cfg.ID == "" {
		cfg.ID = fmt.Sprintf("local-%s-%.7s", time.Now().UTC().Format("20060102T150405Z"), cfg.Build)
	}
	cfg.Progress, cfg.TTY = stderr, isTTY(stderr)
	if os.Getenv(results.EnvProgress) != "" {
		cfg.Progress = announcer{Writer: stderr, logf: cfg.Logf, failed: new(atomic.Bool)}
	}
	cfg.Logf = func(format string, a ...any) { fmt.Fprintf(stderr, "aether-soak: "+format+"\n", a...) }

	ctx, stop := stopContext()
	defer stop()
	res, err := soakrun.Run(ctx, cfg)
	stop()
	if err != nil {
		fmt.Fprintf(stderr, "aether-soak: run: %v\n", err)
		if res == nil || res.Manifest == "" {
			return 2
		}
	}
	for what, n := range res.Missed {
		fmt.Fprintf(stderr, "aether-soak: %d scrape(s) of %s failed; their counters were carried over the tick\n", n, what)
	}
	if res.Partial != "" {
		fmt.Fprintf(stderr, "aether-soak: PARTIAL: %s\n", res.Partial)
	}
	return gradeRun(res.Manifest, cfg.Out, *gateOut, res.Binaries, stdout, stderr)
}

// gradeRun grades a run into its own folder, updates the index beside the
// run folders and, with gateOut, files the grade for aether-gate.
func gradeRun(path, out, gateOut string, binaries map[string]string, stdout, stderr io.Writer) int {
	g, _, err := gradeOne(path, out, nil, binaries, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "aether-soak: %v\n", err)
		return 2
	}
	if gateOut != "" {
		if _, _, err := gradeOne(path, gateOut, nil, binaries, io.Discard); err != nil {
			fmt.Fprintf(stderr, "aether-soak: %v\n", err)
			return 2
		}
	}
	idx, err := writeIndex(out)
	if err != nil {
		fmt.Fprintf(stderr, "aether-soak: %v\n", err)
		return 2
	}
	fmt.Fprintf(stdout, "index: %s\n", idx)
	if g.Verdict != grade.Pass {
		return 1
	}
	return 0
}

// writeIndex renders the index of every graded run under runs into the
// folder holding runs (reports/index.html beside reports/runs).
func writeIndex(runs string) (string, error) {
	files, err := filepath.Glob(filepath.Join(runs, "*", render.GradeFile))
	if err != nil {
		return "", fmt.Errorf("failed to list the graded runs: %w", err)
	}
	var list []render.Run
	for _, f := range files {
		g, err := render.LoadGrade(f)
		if err != nil {
			return "", err
		}
		rel := filepath.Join(filepath.Base(runs), filepath.Base(filepath.Dir(f)), render.HTMLFile)
		list = append(list, render.Run{Grade: g, Link: filepath.ToSlash(rel)})
	}
	page, err := render.Index(list, nil)
	if err != nil {
		return "", err
	}
	idx := filepath.Join(filepath.Dir(filepath.Clean(runs)), render.IndexFile)
	if err := os.WriteFile(idx, page, 0o644); err != nil {
		return "", fmt.Errorf("failed to write %s: %w", idx, err)
	}
	return idx, nil
}

// stopContext ends when the run is asked to stop: Ctrl-C, SIGTERM, or
// SIGHUP when the terminal it runs in goes away (a dropped ssh session),
// which would otherwise kill it with its cluster's processes and
// namespaces left behind.
func stopContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
}

func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// announcer is the soak's progress writer under the gate: the lines go
// where they went (the log), and each tick's figures to the progress file,
// which the gate reads while the soak runs. Report is called from the
// soak's ticker and its schedule alike.
type announcer struct {
	io.Writer
	logf func(format string, a ...any)
	// failed is set by the first announce that failed, so a broken
	// progress file is logged once, not every tick.
	failed *atomic.Bool
}

func (a announcer) Report(p results.SoakProgress) {
	if err := results.Announce(results.Event{Soak: &p}); err != nil && a.failed.CompareAndSwap(false, true) {
		a.logf("progress: %v", err)
	}
}
