package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/rigs/results"
)

var t0 = time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)

// Each case's line is on the screen as soon as the case is recorded, while
// the suite still runs: the follower reads the progress file from inside
// the next case, and finds the first case's line there and the second's
// not yet; the suite's line follows its written result.
func TestLinesArriveAsCasesFinish(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(results.EnvProgress, filepath.Join(dir, ProgressFile))
	t.Setenv(results.EnvRevision, rev)
	t.Setenv(results.EnvDirty, "false")
	var out bytes.Buffer
	f := &follower{s: &screen{w: &out}, step: "suites", start: t0, lastLine: t0}
	reader := &results.ProgressReader{Path: filepath.Join(dir, ProgressFile)}
	now := t0
	drain := func() string {
		now = now.Add(time.Second)
		events, err := reader.Next()
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			f.handle(e, now)
		}
		f.tick(now)
		return out.String()
	}
	observe := func(what string) func(context.Context) (redgreen.Observation, error) {
		return func(context.Context) (redgreen.Observation, error) {
			return redgreen.Observation{Summary: what, Witness: "the backends", Evidence: saw{what}}, nil
		}
	}
	var seen []string
	res := redgreen.Run(redgreen.Announcing(context.Background()), redgreen.Suite{Name: "udproute", Subject: "s", Cases: []redgreen.Case{
		{Name: "selection-redirect", Role: redgreen.Control, Expect: "collapse", Run: observe("svc-b -> a-0=20"),
			Check: func(redgreen.Observation) error { return nil }},
		{Name: "selection-tproxy", Role: redgreen.Subject, Expect: "apart",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				seen = append(seen, drain())
				return observe("svc-b -> b-0=20")(ctx)
			},
			Check: func(redgreen.Observation) error { return nil }},
		{Name: "twenty-services", Role: redgreen.Subject, Expect: "20 apart",
			Run: func(ctx context.Context) (redgreen.Observation, error) {
				seen = append(seen, drain())
				return redgreen.Observation{}, errors.New("no backend answered")
			},
			Check: func(redgreen.Observation) error { return nil }},
	}})
	if len(seen) != 2 {
		t.Fatalf("the cases ran %d times", len(seen))
	}
	first := "udproute     control  selection-redirect      PASS  svc-b -> a-0=20"
	second := "udproute     subject  selection-tproxy        PASS  svc-b -> b-0=20"
	if !strings.Contains(seen[0], first) || strings.Contains(seen[0], "selection-tproxy") {
		t.Errorf("while the second case ran, the screen was:\n%s\nwant the first case's line and no other", seen[0])
	}
	if !strings.Contains(seen[1], second) || strings.Contains(seen[1], "twenty-services") {
		t.Errorf("while the third case ran, the screen was:\n%s\nwant the second case's line and not the third's", seen[1])
	}
	before := drain()
	if !strings.Contains(before, "udproute     subject  twenty-services         FAIL  run failed: no backend answered") || strings.Contains(before, " suite ") {
		t.Errorf("after the run, before the result was written:\n%s", before)
	}
	if err := res.Write(filepath.Join(dir, "suites")); err != nil {
		t.Fatal(err)
	}
	after := drain()
	if !strings.Contains(after, "udproute     suite    3 cases") || !strings.Contains(after, "FAIL  twenty-services: run failed: no backend answered") {
		t.Errorf("after the result was written:\n%s", after)
	}
	// A run no one asked to announce (a suite's check of a control broken
	// on purpose) adds nothing.
	redgreen.Run(context.Background(), redgreen.Suite{Name: "udproute", Cases: []redgreen.Case{
		{Name: "broken-on-purpose", Role: redgreen.Control, Run: observe("x"), Check: func(redgreen.Observation) error { return nil }}}})
	if got := drain(); strings.Contains(got, "broken-on-purpose") {
		t.Errorf("an unannounced run reached the screen:\n%s", got)
	}
}

// soakAt is the soak's figures s seconds in.
func soakAt(s int) results.Event {
	return results.Event{At: t0.Add(time.Duration(s) * time.Second), Soak: &results.SoakProgress{
		Elapsed: time.Duration(s) * time.Second, Planned: 2 * time.Minute, Probes: int64(10 * s), Step: fmt.Sprintf("step-%d", s)}}
}

// Off a terminal the soak's figures are a line at most every soakEvery,
// the last ones shown at the end; on one, a status line rewritten at most
// every statusEvery, left as a line at the end.
func TestSoakProgressIsPaced(t *testing.T) {
	var plain bytes.Buffer
	f := &follower{s: &screen{w: &plain}, step: "soak smoke", start: t0, lastLine: t0}
	for s := 0; s <= 29; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		f.handle(soakAt(s), now)
		f.tick(now)
	}
	f.finish(t0.Add(30 * time.Second))
	lines := screenLines(plain.String())
	var at []string
	for _, l := range lines {
		at = append(at, strings.Fields(l)[0])
	}
	if got, want := strings.Join(at, " "), "0:00 0:05 0:10 0:15 0:20 0:25 0:29"; got != want {
		t.Errorf("soak lines at %s, want %s:\n%s", got, want, plain.String())
	}
	if !strings.Contains(lines[1], "soak 0:05/2:00  probes 50 (0 failed)") {
		t.Errorf("the line at 0:05 does not show the figures of 0:05: %q", lines[1])
	}
	if strings.Contains(plain.String(), "\r") {
		t.Errorf("a line off a terminal is rewritten in place:\n%q", plain.String())
	}

	var tty bytes.Buffer
	f = &follower{s: &screen{w: &tty, tty: true}, step: "soak smoke", start: t0}
	for s := 0; s <= 9; s++ {
		now := t0.Add(time.Duration(s) * time.Second)
		f.handle(soakAt(s), now)
		f.tick(now)
	}
	f.finish(t0.Add(10 * time.Second))
	got := tty.String()
	// Each drawing starts by clearing the line: five status lines (every
	// 2 s), then the last figures as a line.
	var drawn []string
	for _, d := range strings.Split(got, "\r\x1b[K")[1:] {
		drawn = append(drawn, strings.Fields(d)[0])
	}
	if got, want := strings.Join(drawn, " "), "0:00 0:02 0:04 0:06 0:08 0:09"; got != want {
		t.Errorf("the status line was drawn at %s, want %s", got, want)
	}
	if !strings.HasSuffix(got, "\r\x1b[K 0:09  soak 0:09/2:00  probes 90 (0 failed)  load 0 (0 failed)  503 NC 0  exits 0  0/0 windows  step-9\n") {
		t.Errorf("the last figures are not left as a line:\n%q", got)
	}
	if strings.Count(got, "\n") != 1 {
		t.Errorf("on a terminal the soak took %d lines, want 1:\n%q", strings.Count(got, "\n"), got)
	}
}

// Off a terminal a step that prints nothing for quietEvery says it still
// runs, so a CI log shows the gate is not stuck.
func TestQuietStepSaysItRuns(t *testing.T) {
	var out bytes.Buffer
	f := &follower{s: &screen{w: &out}, step: "suites", start: t0, lastLine: t0}
	f.tick(t0.Add(59 * time.Second))
	if out.Len() != 0 {
		t.Fatalf("a line before a minute of quiet: %q", out.String())
	}
	f.handle(results.Event{At: t0.Add(59 * time.Second), Suite: "phase0", Case: &results.CaseResult{Name: "C1", Role: results.Subject}}, t0.Add(59*time.Second))
	f.tick(t0.Add(118 * time.Second))
	f.tick(t0.Add(119 * time.Second))
	if got := screenLines(out.String()); len(got) != 2 || got[1] != " 1:59  suites: running, 1 case(s) and 0 suite(s) recorded so far" {
		t.Errorf("after a minute of quiet: %q", got)
	}
}

// revealing is a screen's writer that runs fn once the screen shows want.
type revealing struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	fn   func()
}

func (r *revealing) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, err := r.buf.Write(p)
	if r.fn != nil && strings.Contains(r.buf.String(), r.want) {
		r.fn()
		r.fn = nil
	}
	return n, err
}

// envFakeStep makes the test binary a step of the gate (TestFakeStep).
const envFakeStep = "AETHER_GATE_FAKE_STEP"

// The watch prints a case's line while the command that recorded it still
// runs: the command (this test binary, as TestFakeStep) records one case,
// then waits for a file the test creates only once the line is on the
// screen, then records another and exits. A watch that printed at the end
// would leave it waiting.
func TestWatchStreamsWhileTheCommandRuns(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	w := &revealing{want: "first-case", fn: func() {
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Error(err)
		}
	}}
	c := watchConfig{name: "suites", dir: dir, log: filepath.Join(dir, "suites.log"), strict: true, started: t0,
		argv: []string{os.Args[0], "-test.run=^TestFakeStep$"}}
	t.Setenv(envFakeStep, release)
	st, err := watch(c, &screen{w: w}, nil, 20*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	out := w.buf.String()
	log, _ := os.ReadFile(c.log)
	if st.Exit != 0 {
		t.Fatalf("the command exited %d (it waits for the release only so long):\n%s\nits log:\n%s", st.Exit, out, log)
	}
	i, j := strings.Index(out, "first-case"), strings.Index(out, "second-case")
	if i < 0 || j < i {
		t.Errorf("the cases' lines are not both there, in order:\n%s", out)
	}
	if end := strings.Index(out, "suites: exited 0 after"); end < j {
		t.Errorf("no end line after the cases':\n%s", out)
	}
	if !strings.Contains(string(log), "fake step output") {
		t.Errorf("the command's output is not in its log: %q", log)
	}
	if err := writeStep(dir, *st); err != nil {
		t.Fatal(err)
	}
	steps, err := loadSteps(dir)
	if err != nil || len(steps) != 1 || steps[0].Name != "suites" || !steps[0].Strict || steps[0].failed() != "" {
		t.Errorf("the step's record: %+v, %v", steps, err)
	}
}

// TestFakeStep is the command TestWatchStreamsWhileTheCommandRuns watches.
func TestFakeStep(t *testing.T) {
	release := os.Getenv(envFakeStep)
	if release == "" {
		t.Skip("only as the command of TestWatchStreamsWhileTheCommandRuns")
	}
	fmt.Println("fake step output")
	announce := func(name string) {
		c := results.CaseResult{Name: name, Role: results.Subject, Observed: "o", Witness: "w", Facts: map[string]any{"n": 1}, Matched: true}
		if err := results.Announce(results.Event{Suite: "fake", Case: &c}); err != nil {
			t.Fatal(err)
		}
	}
	announce("first-case")
	// A guard, not a measure: a watch that never shows the first line
	// would leave this waiting forever.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := os.Stat(release); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first case's line never reached the screen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	announce("second-case")
}

// A strict step that exited non-zero fails the gate though every table
// passed, naming the step and its log; one that is not strict does not.
func TestStrictStepFailsTheGate(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, suite("phase0", true, built(rev, false)))
	for _, st := range []step{
		{Name: "suites", Command: []string{"go", "test"}, Log: "suites.log", Strict: true, Exit: 1, Started: t0, Ended: t0.Add(5 * time.Minute)},
		{Name: "soak smoke", Command: []string{"aether-soak", "run"}, Log: "soak-smoke.log", Exit: 1, Started: t0.Add(5 * time.Minute), Ended: t0.Add(7 * time.Minute)},
	} {
		if err := writeStep(dir, st); err != nil {
			t.Fatal(err)
		}
	}
	code, out := runGate(t, config{dir: dir, build: rev, started: time.Now().Add(-8 * time.Minute)})
	if code != 1 {
		t.Errorf("a failed strict step passed:\n%s", out)
	}
	wantAll(t, "strict step", out, "step suites exited 1 although its tables are judged apart", "see suites.log",
		"0 of 1 suite(s) and 0 of 0 soak(s) did not pass, and 1 step(s) failed", "total 8m0s (suites 5m0s, soak smoke 2m0s)")
	if strings.Contains(out, "step soak smoke exited") {
		t.Errorf("a step that is not strict failed the gate:\n%s", out)
	}
}

func TestStartLineShowsWhatRuns(t *testing.T) {
	for _, tc := range []struct{ argv, want string }{
		{"env GINKGO_NO_COLOR=TRUE AETHER_REPORT_DIR=/r/suites go test -count=1 ./suites/...", "go test -count=1 ./suites/..."},
		{"/usr/bin/env A=1 true", "true"},
		{"bin/aether-soak run -duration 2m", "bin/aether-soak run -duration 2m"},
		{"env -i A=1 true", "-i A=1 true"},
	} {
		if got := strings.Join(shown(strings.Fields(tc.argv)), " "); got != tc.want {
			t.Errorf("shown(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// saw is the test suites' evidence: what their one case saw.
type saw struct {
	Saw string `json:"saw"`
}
