package redgreen

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/results"
)

// seen is the test cases' evidence: what the case saw.
type seen struct {
	Saw string `json:"saw"`
}

func obs(s string) func(context.Context) (Observation, error) {
	return func(context.Context) (Observation, error) {
		return Observation{Summary: s, Witness: "test", Evidence: seen{s}}, nil
	}
}

func want(s string) func(Observation) error {
	return func(o Observation) error {
		if o.Summary != s {
			return errors.New("saw " + o.Summary + ", want " + s)
		}
		return nil
	}
}

func TestVerdicts(t *testing.T) {
	red := Case{Name: "ctl", Role: Control, Expect: "red", Run: obs("red"), Check: want("red")}
	silentCtl := Case{Name: "ctl", Role: Control, Expect: "red", Run: obs("green"), Check: want("red")}
	green := Case{Name: "subj", Role: Subject, Expect: "green", Run: obs("green"), Check: want("green")}
	badSubj := Case{Name: "subj", Role: Subject, Expect: "green", Run: obs("red"), Check: want("green")}
	empty := Case{Name: "subj", Role: Subject, Expect: "green", Check: func(Observation) error { return nil },
		Run: func(context.Context) (Observation, error) { return Observation{Witness: "test"}, nil }}
	errCtl := Case{Name: "ctl", Role: Control, Expect: "red", Run: func(context.Context) (Observation, error) {
		return Observation{}, errors.New("no delivery")
	}, Check: want("red")}
	ok := func(Observation) error { return nil }
	noWitness := Case{Name: "ctl", Role: Control, Expect: "red", Check: ok, Run: func(context.Context) (Observation, error) {
		return Observation{Summary: "red", Evidence: seen{"red"}}, nil
	}}
	noFacts := Case{Name: "subj", Role: Subject, Expect: "green", Check: ok, Run: func(context.Context) (Observation, error) {
		return Observation{Summary: "green", Witness: "the backend"}, nil
	}}
	panicky := Case{Name: "subj", Role: Subject, Expect: "green", Run: func(context.Context) (Observation, error) { panic("boom") }, Check: want("green")}

	for _, c := range []struct {
		name  string
		cases []Case
		want  Verdict
		why   string
	}{
		{"red then green", []Case{green, red}, Pass, "1 control(s) red"},
		{"control agrees with subject", []Case{silentCtl, green}, BrokenRig, "control ctl did not show its signature"},
		{"control run error", []Case{errCtl, green}, BrokenRig, "no delivery"},
		{"subject red", []Case{red, badSubj}, Fail, "saw red"},
		{"empty witness is inconclusive", []Case{red, empty}, Fail, "inconclusive"},
		{"panic is a failure", []Case{red, panicky}, Fail, "panic: boom"},
		{"a control nobody witnessed cannot match", []Case{noWitness, green}, BrokenRig, "observation has no witness"},
		{"a subject without facts cannot match", []Case{red, noFacts}, Fail, "observation has no facts"},
		{"no control", []Case{green}, BrokenRig, "no control"},
		{"no subject", []Case{red}, Fail, "no subject"},
	} {
		r := Run(context.Background(), Suite{Name: "s", Cases: c.cases})
		if r.Verdict != c.want || !strings.Contains(r.Reason, c.why) {
			t.Errorf("%s: got %s (%s), want %s containing %q", c.name, r.Verdict, r.Reason, c.want, c.why)
		}
		if (r.Err() == nil) != (c.want == Pass) {
			t.Errorf("%s: Err() = %v for verdict %s", c.name, r.Err(), r.Verdict)
		}
	}
}

func TestControlsRunFirst(t *testing.T) {
	var order []string
	rec := func(n string) func(context.Context) (Observation, error) {
		return func(context.Context) (Observation, error) {
			order = append(order, n)
			return Observation{Summary: n, Witness: "test", Evidence: seen{n}}, nil
		}
	}
	ok := func(Observation) error { return nil }
	Run(context.Background(), Suite{Name: "s", Cases: []Case{
		{Name: "s1", Role: Subject, Run: rec("s1"), Check: ok},
		{Name: "c1", Role: Control, Run: rec("c1"), Check: ok},
	}})
	if strings.Join(order, ",") != "c1,s1" {
		t.Fatalf("order %v, want the control first", order)
	}
}

func TestWriteLoadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	r := Run(context.Background(), Suite{Name: "roundtrip", Subject: "x", Cases: []Case{
		{Name: "c", Role: Control, Expect: "red", Run: obs("red"), Check: want("red")},
		{Name: "s", Role: Subject, Expect: "green", Run: obs("green"), Check: want("green")},
	}})
	if err := r.Write(dir); err != nil {
		t.Fatal(err)
	}
	got, err := results.Load(filepath.Join(dir, "roundtrip.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Verdict != Pass || len(got.Cases) != 2 || got.Cases[0].Observed != "red" {
		t.Fatalf("round trip lost data: %+v", got)
	}
	if !strings.Contains(r.Table(), "roundtrip: PASS") {
		t.Fatalf("table has no verdict line:\n%s", r.Table())
	}
}

func TestCouldNotStartNamesTheCause(t *testing.T) {
	s := Suite{Name: "udproute", Subject: "x"}
	r := s.CouldNotStart(errors.New("failed to bring up the tproxy cluster: node-1: agent exited"))
	if r.Verdict != Fail || !strings.Contains(r.Reason, "could not start: failed to bring up the tproxy cluster") {
		t.Fatalf("got %s (%s)", r.Verdict, r.Reason)
	}
	if !strings.Contains(r.Table(), "could not start: failed to bring up") {
		t.Fatalf("the table hides the cause:\n%s", r.Table())
	}
}

func TestSetupWritesWhyTheSuiteCouldNotStart(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvReportDir, dir)
	s := Suite{Name: "udproute", Subject: "x"}
	if err := s.Setup(func() error { return nil }); err != nil {
		t.Fatalf("a setup that succeeded: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "udproute.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a setup that succeeded wrote a result: %v", err)
	}
	cause := errors.New("skipped: missing CAP_NET_ADMIN")
	if err := s.Setup(func() error { return cause }); !errors.Is(err, cause) {
		t.Fatalf("Setup returned %v, want the setup's error", err)
	}
	r, err := results.Load(filepath.Join(dir, "udproute.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Fail || r.CouldNotStart != cause.Error() {
		t.Fatalf("written result: %s, could not start %q", r.Verdict, r.CouldNotStart)
	}
}

// A run whose context ends while its cases run (Ctrl-C under ginkgo, a
// timeout) is INTERRUPTED, naming the cause: its failed rows say what
// happened, but not that the subject failed. No case runs after that.
func TestInterruptedRunIsNotJudged(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	interrupted := errors.New("Interrupted by User")
	ran := map[string]bool{}
	r := Run(ctx, Suite{Name: "udproute", Subject: "x", Cases: []Case{
		{Name: "c", Role: Control, Expect: "red", Run: func(ctx context.Context) (Observation, error) {
			ran["c"] = true
			cancel(interrupted)
			return Observation{}, context.Cause(ctx)
		}, Check: want("red")},
		{Name: "s", Role: Subject, Expect: "green", Run: func(context.Context) (Observation, error) {
			ran["s"] = true
			return obs("green")(ctx)
		}, Check: want("green")},
	}})
	if r.Verdict != Interrupted || r.Reason != "interrupted, not judged: Interrupted by User" {
		t.Fatalf("got %s (%s), want INTERRUPTED naming the cause", r.Verdict, r.Reason)
	}
	if !ran["c"] || ran["s"] || len(r.Cases) != 1 {
		t.Fatalf("ran %v with %d row(s); want the case that was cut short only", ran, len(r.Cases))
	}
	if !strings.Contains(r.Table(), "udproute: INTERRUPTED (interrupted, not judged: Interrupted by User)") {
		t.Fatalf("the table does not say the run was interrupted:\n%s", r.Table())
	}
	if problems := results.CheckSuite("udproute.json", r); len(problems) > 0 {
		t.Fatalf("the gate disagrees with the runner: %v", problems)
	}
}

// TestStampNamesTheSuitesBinaries: a result names the binaries its own
// suite was given and the running executable, and nothing another suite of
// the same process ran.
func TestStampNamesTheSuitesBinaries(t *testing.T) {
	cases := []Case{{Name: "s", Role: Subject, Expect: "green", Run: obs("green"), Check: want("green")}}
	const sum = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	a := Run(context.Background(), Suite{Name: "a", Subject: "x", Cases: cases, Binaries: map[string]string{"aether-agent": sum}})
	if got := a.Build.Binaries["aether-agent"]; got != sum {
		t.Fatalf("suite a's stamp: aether-agent %q, want %q (%v)", got, sum, a.Build.Binaries)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if a.Build.Binaries["self:"+filepath.Base(exe)] == "" {
		t.Errorf("suite a's stamp has no entry for the running executable: %v", a.Build.Binaries)
	}
	b := Run(context.Background(), Suite{Name: "b", Subject: "x", Cases: cases})
	if got, ok := b.Build.Binaries["aether-agent"]; ok {
		t.Errorf("suite b ran no aether-agent, yet its stamp names one: %q", got)
	}
	if c := (Suite{Name: "c", Binaries: map[string]string{"aether-proxy": sum}}).CouldNotStart(errors.New("x")); c.Build.Binaries["aether-proxy"] != sum {
		t.Errorf("a suite that could not start lost its binaries: %v", c.Build.Binaries)
	}
}

// Under Announcing each row is on the progress file before the next case
// runs; without it, a run (a suite's check of a control broken on
// purpose) announces nothing.
func TestAnnouncingAnnouncesEachRowAsItIsRecorded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "progress.jsonl")
	t.Setenv(results.EnvProgress, p)
	reader := &results.ProgressReader{Path: p}
	var before []string
	peek := func(s string) func(context.Context) (Observation, error) {
		return func(ctx context.Context) (Observation, error) {
			events, err := reader.Next()
			if err != nil {
				t.Error(err)
			}
			for _, e := range events {
				before = append(before, s+" sees "+e.Suite+"/"+e.Case.Name)
			}
			return obs(s)(ctx)
		}
	}
	suite := Suite{Name: "s", Cases: []Case{
		{Name: "green", Role: Subject, Run: peek("green"), Check: want("green")},
		{Name: "red", Role: Control, Run: peek("red"), Check: want("red")},
	}}
	res := Run(Announcing(context.Background()), suite)
	if res.Verdict != Pass {
		t.Fatalf("%s: %s", res.Verdict, res.Reason)
	}
	// The control runs first; the subject finds its row already there.
	if got := strings.Join(before, ", "); got != "green sees s/red" {
		t.Errorf("what each case found on the progress file when it ran: %q", got)
	}
	events, err := reader.Next()
	if err != nil || len(events) != 1 || events[0].Case.Name != "green" || !events[0].Case.Matched {
		t.Errorf("after the run: %+v, %v", events, err)
	}
	Run(context.Background(), suite)
	if events, err := reader.Next(); err != nil || len(events) != 0 || len(before) != 1 {
		t.Errorf("an unannounced run announced %+v (%v); the cases saw %q", events, err, before)
	}
}

// A run that leaves a case out (a focused run) is PARTIAL, naming what it
// left out, even when every row it ran is as expected: it speaks for the
// cases it ran, not the suite. The gate agrees.
func TestRunnerLeavingACaseOutIsPartial(t *testing.T) {
	s := Suite{Name: "udproute", Subject: "x", Cases: []Case{
		{Name: "s1", Role: Subject, Expect: "green", Run: obs("green"), Check: want("green")},
		{Name: "c1", Role: Control, Expect: "red", Run: obs("red"), Check: want("red")},
		{Name: "s2", Role: Subject, Expect: "green", Run: obs("green"), Check: want("green")},
	}}
	if got := []string{s.Ordered()[0].Name, s.Ordered()[1].Name, s.Ordered()[2].Name}; strings.Join(got, ",") != "c1,s1,s2" {
		t.Fatalf("order %v, want the control first", got)
	}
	ctx := context.Background()
	r := Start(ctx, s)
	for _, n := range []string{"c1", "s1"} {
		if row, err := r.Case(ctx, n); err != nil || !row.Matched {
			t.Fatalf("case %s: %+v, %v", n, row, err)
		}
	}
	if _, err := r.Case(ctx, "s1"); err == nil {
		t.Error("a case ran twice")
	}
	if _, err := r.Case(ctx, "nope"); err == nil || !strings.Contains(err.Error(), `no case "nope"`) {
		t.Errorf("an unknown case: %v", err)
	}
	res := r.Finish(ctx)
	if res.Verdict != Partial || res.Reason != "partial run, not judged: ran 2 of 3 cases; not run: s2" {
		t.Fatalf("got %s (%s), want PARTIAL naming s2", res.Verdict, res.Reason)
	}
	if problems := results.CheckSuite("udproute.json", res); len(problems) > 0 {
		t.Fatalf("the gate disagrees with the runner: %v", problems)
	}
	// The same rows declared PASS: the gate re-derives PARTIAL.
	res.Verdict = Pass
	if problems := results.CheckSuite("udproute.json", res); len(problems) != 1 || !strings.Contains(problems[0], "declares PASS but its rows decide PARTIAL") {
		t.Fatalf("a partial run declaring PASS: %v", problems)
	}
	// Every case run one at a time is the same as Run.
	r = Start(ctx, s)
	for _, c := range r.Order() {
		r.Case(ctx, c.Name)
	}
	if res := r.Finish(ctx); res.Verdict != Pass || res.Partial != "" {
		t.Fatalf("every case run one by one: %s (%s), partial %q", res.Verdict, res.Reason, res.Partial)
	}
}

// A case whose own context ends (its spec's timeout, an interrupt) makes
// the run INTERRUPTED, and no case runs after it.
func TestRunnerStopsAfterAnInterruptedCase(t *testing.T) {
	s := Suite{Name: "udproute", Subject: "x", Cases: []Case{
		{Name: "c1", Role: Control, Expect: "red", Run: func(ctx context.Context) (Observation, error) {
			return Observation{}, context.Cause(ctx)
		}, Check: want("red")},
		{Name: "s1", Role: Subject, Expect: "green", Run: obs("green"), Check: want("green")},
	}}
	r := Start(context.Background(), s)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("spec timeout"))
	if row, err := r.Case(ctx, "c1"); err != nil || row.Matched {
		t.Fatalf("the interrupted case: %+v, %v", row, err)
	}
	if _, err := r.Case(context.Background(), "s1"); err == nil || !strings.Contains(err.Error(), "interrupted: spec timeout") {
		t.Fatalf("a case after the interrupt: %v", err)
	}
	if res := r.Finish(context.Background()); res.Verdict != Interrupted || res.Partial != "" {
		t.Fatalf("got %s (%s), partial %q", res.Verdict, res.Reason, res.Partial)
	}
}

type flow struct {
	Sent      int            `json:"sent"`
	Delivered map[string]int `json:"delivered"`
}

// Typed evidence reaches the row as the JSON object of its tags, the same
// facts a map would have carried, and a check reads it back typed; a check
// given evidence of another type gets an error, not a panic.
func TestTypedEvidence(t *testing.T) {
	ev := flow{Sent: 20, Delivered: map[string]int{"a-0": 20}}
	check := func(o Observation) error {
		f, err := EvidenceOf[flow](o)
		if err != nil {
			return err
		}
		if f.Delivered["a-0"] != f.Sent {
			return errors.New("not all at a-0")
		}
		return nil
	}
	run := func(o Observation) func(context.Context) (Observation, error) {
		return func(context.Context) (Observation, error) { return o, nil }
	}
	typed := Observation{Summary: "a-0=20", Witness: "the backends", Evidence: ev}
	untyped := Observation{Summary: "a-0=20", Witness: "the backends", Evidence: map[string]any{"sent": 20, "delivered": map[string]int{"a-0": 20}}}
	r := Run(context.Background(), Suite{Name: "s", Cases: []Case{
		{Name: "c", Role: Control, Run: obs("red"), Check: want("red")},
		{Name: "typed", Role: Subject, Run: run(typed), Check: check},
		{Name: "untyped", Role: Subject, Run: run(untyped), Check: func(Observation) error { return nil }},
	}})
	byName := map[string]results.CaseResult{}
	for _, c := range r.Cases {
		byName[c.Name] = c
	}
	if c := byName["typed"]; !c.Matched || c.Facts["sent"] != float64(20) || c.Facts["delivered"].(map[string]any)["a-0"] != float64(20) {
		t.Errorf("typed evidence: matched %v (%s), facts %v", c.Matched, c.Reason, c.Facts)
	}
	a, _ := json.Marshal(byName["typed"].Facts)
	b, _ := json.Marshal(untyped.Evidence)
	if string(a) != string(b) {
		t.Errorf("the row's facts of typed evidence %s, of the same map %s", a, b)
	}
	// An untyped map is refused even by a check that accepts anything.
	if c := byName["untyped"]; c.Matched || !strings.Contains(c.Reason, "evidence is an untyped map[string]interface {}") {
		t.Errorf("untyped map evidence: matched %v (%s)", c.Matched, c.Reason)
	}
}
