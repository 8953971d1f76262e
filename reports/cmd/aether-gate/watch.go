package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// ProgressFile is the progress file under the report directory: every
// event of every step, in the order they happened.
const ProgressFile = "progress.jsonl"

// stepsDir holds one record per step under the report directory.
const stepsDir = "steps"

// step is one watched command's record: what ran, where its output went,
// how it ended and how long it took. A strict step's non-zero exit fails
// the gate (the suite packages: a leak check or a test outside the tables
// can fail while every table passes); another's is only shown, its
// results deciding.
type step struct {
	Name    string    `json:"name"`
	Command []string  `json:"command"`
	Log     string    `json:"log"`
	Strict  bool      `json:"strict"`
	Exit    int       `json:"exit"`
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended"`
}

func (s step) took() time.Duration { return s.Ended.Sub(s.Started) }

// failed says why a strict step fails the gate, or "".
func (s step) failed() string {
	switch {
	case !s.Strict:
		return ""
	case s.Error != "":
		return fmt.Sprintf("step %s could not run: %s", s.Name, s.Error)
	case s.Exit != 0:
		return fmt.Sprintf("step %s exited %d although its tables are judged apart (a leak check or a test outside the tables failed; see %s)", s.Name, s.Exit, s.Log)
	}
	return ""
}

// watchConfig is what `aether-gate watch` is asked.
type watchConfig struct {
	name, dir, log string
	strict         bool
	started        time.Time
	argv           []string
}

// parseStarted reads -started: the gate's start in Unix seconds, so every
// command's lines share one clock; empty is now.
func parseStarted(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("-started %q: want the Unix time in seconds (date +%%s): %w", v, err)
	}
	return time.Unix(n, 0), nil
}

func parseWatch(args []string, stderr io.Writer) (watchConfig, error) {
	var c watchConfig
	fs := flag.NewFlagSet("aether-gate watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.name, "name", "", "the step's name on its lines (suites, soak smoke)")
	fs.StringVar(&c.dir, "dir", "reports/latest", "the report directory: the progress file and the step's record go there")
	fs.StringVar(&c.log, "log", "", "the file the command's output goes to (default <dir>/<name>.log)")
	fs.BoolVar(&c.strict, "strict", false, "the command's non-zero exit fails the gate")
	started := fs.String("started", "", "the gate's start, Unix seconds: the clock on every line (default now)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: aether-gate watch -name NAME [flags] -- COMMAND [ARG...]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.started, err = parseStarted(*started); err != nil {
		return c, err
	}
	c.argv = fs.Args()
	switch {
	case c.name == "":
		return c, errors.New("watch: -name is required")
	case len(c.argv) == 0:
		return c, errors.New("watch: no command after the flags")
	}
	if c.log == "" {
		c.log = filepath.Join(c.dir, strings.ReplaceAll(c.name, " ", "-")+".log")
	}
	return c, nil
}

// watchCmd is `aether-gate watch`: it runs one command of the gate with its
// output in a log and results.EnvProgress naming the progress file, and
// prints a line for each case and suite as the command records it, and
// the soak's figures as it runs; then the step's end, and its record for
// the gate. It exits 0 once the record is written, whatever the command's
// exit (the gate judges it), 2 when it could not watch at all.
func watchCmd(args []string, stdout, stderr io.Writer) int {
	c, err := parseWatch(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: %v\n", err)
		return 2
	}
	// Ctrl-C reaches the command itself, which ends its run cleanly (a
	// soak tears its cluster down): the watch waits for it rather than
	// leave it unwatched. SIGTERM sent to the watch alone is passed on.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	st, err := watch(c, newScreen(stdout), sig, 250*time.Millisecond)
	if err != nil {
		fmt.Fprintf(stderr, "aether-gate: watch %s: %v\n", c.name, err)
	}
	if st == nil {
		return 2
	}
	if err := writeStep(c.dir, *st); err != nil {
		fmt.Fprintf(stderr, "aether-gate: watch %s: %v\n", c.name, err)
		return 2
	}
	return 0
}

// watch runs the command and follows its progress every poll until it
// ends. It returns the step's record; nil when the command's output or
// the progress file could not be set up, and an error for what went
// wrong, even when the record says the command ran.
func watch(c watchConfig, s *screen, sig <-chan os.Signal, poll time.Duration) (*step, error) {
	progress, err := filepath.Abs(filepath.Join(c.dir, ProgressFile))
	if err != nil {
		return nil, err
	}
	// Events already in the file are earlier steps'.
	reader := &results.ProgressReader{Path: progress}
	if fi, err := os.Stat(progress); err == nil {
		reader.Offset = fi.Size()
	}
	if err := os.MkdirAll(filepath.Dir(c.log), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the log's directory: %w", err)
	}
	logf, err := os.Create(c.log)
	if err != nil {
		return nil, fmt.Errorf("failed to create the step's log: %w", err)
	}
	defer logf.Close()

	start := c.started
	now := time.Now()
	if start.IsZero() {
		start = now
	}
	f := &follower{s: s, step: c.name, start: start, lastLine: now}
	st := &step{Name: c.name, Command: c.argv, Log: c.log, Strict: c.strict, Started: now}
	s.line(fmt.Sprintf("%5s  %s: %s", since(start, now), c.name, strings.Join(shown(c.argv), " ")))
	s.line(fmt.Sprintf("%5s  %s: its output goes to %s", "", c.name, c.log))

	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), results.EnvProgress+"="+progress)
	if err := cmd.Start(); err != nil {
		st.Exit, st.Error, st.Ended = -1, err.Error(), time.Now()
		s.line(fmt.Sprintf("%5s  %s: could not start: %v", since(start, st.Ended), c.name, err))
		return st, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var readErr error
	drain := func(now time.Time) {
		events, err := reader.Next()
		for _, e := range events {
			f.handle(e, now)
		}
		if err != nil && readErr == nil {
			// Named once: a line that is not an event is the writer's
			// fault, and the next lines still count.
			readErr = err
			s.line(fmt.Sprintf("%5s  %s: %v", since(start, now), c.name, err))
		}
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	var waitErr error
loop:
	for {
		select {
		case waitErr = <-done:
			break loop
		case got := <-sig:
			if got == syscall.SIGTERM {
				_ = cmd.Process.Signal(got)
			}
		case now := <-t.C:
			drain(now)
			f.tick(now)
		}
	}
	st.Ended = time.Now()
	drain(st.Ended)
	f.finish(st.Ended)
	st.Exit = cmd.ProcessState.ExitCode()
	var exit *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exit) {
		st.Error = waitErr.Error()
	}
	how := fmt.Sprintf("exited %d", st.Exit)
	if st.Exit < 0 {
		// Killed by a signal: ExitCode has no number for it.
		how = cmd.ProcessState.String()
	}
	s.line(fmt.Sprintf("%5s  %s: %s after %s", since(start, st.Ended), c.name, how, span(st.took())))
	return st, readErr
}

// shown is the command as its start line shows it: without a leading env
// and its assignments, which the record keeps, so that what runs (go test
// and its packages) is what the width leaves room for.
func shown(argv []string) []string {
	if len(argv) == 0 || filepath.Base(argv[0]) != "env" {
		return argv
	}
	rest := argv[1:]
	for len(rest) > 1 && strings.Contains(rest[0], "=") && !strings.HasPrefix(rest[0], "-") {
		rest = rest[1:]
	}
	return rest
}

// writeStep records a step under <dir>/steps, named after it.
func writeStep(dir string, st step) error {
	d := filepath.Join(dir, stepsDir)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", d, err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the record of step %s: %w", st.Name, err)
	}
	p := filepath.Join(d, strings.ReplaceAll(st.Name, " ", "-")+".json")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", p, err)
	}
	return nil
}

// loadSteps reads every step record under <dir>/steps, in the order the
// steps started. None is no steps: the gate can judge results it did
// not watch being made.
func loadSteps(dir string) ([]step, error) {
	files, err := filepath.Glob(filepath.Join(dir, stepsDir, "*.json"))
	if err != nil {
		return nil, err
	}
	var out []step
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("failed to read a step record: %w", err)
		}
		var st step
		if err := results.DecodeStrict(b, &st); err != nil {
			return nil, fmt.Errorf("step record %s: %w", p, err)
		}
		out = append(out, st)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Started.Before(out[j].Started) })
	return out, nil
}
