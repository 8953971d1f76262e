// Package redgreen runs a suite's cases red then green and records, for each,
// what was expected and what an independent witness observed.
//
// A suite has controls and subjects. A control is a real configuration known
// to break the property (REDIRECT capture, resumption on, ...). It runs first
// and must show its specific failure signature; a control that does not is a
// broken rig, and the suite fails as one, never passes. Then every subject
// must show the property. Both columns go into the report.
package redgreen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// The models a run produces live in rigs/results, where the release
// gate loads them; these names keep the runner's vocabulary.
type (
	Role       = results.Role
	Verdict    = results.Verdict
	CaseResult = results.CaseResult
	Result     = results.Result
)

const (
	Control     = results.Control
	Subject     = results.Subject
	Pass        = results.Pass
	Fail        = results.Fail
	BrokenRig   = results.BrokenRig
	Interrupted = results.Interrupted
	Partial     = results.Partial
)

// EnvReportDir names the directory suites write their results into.
const EnvReportDir = results.EnvReportDir

// Observation is what a case measured, as its witness reported it.
type Observation struct {
	// Summary is one line a person reads in the table.
	Summary string `json:"summary"`
	// Witness names who observed it: "the receiver's IP_PKTINFO", "the
	// backend's own log", "the proxy's counters". Never the client's claim.
	Witness string `json:"witness"`
	// Evidence is the structured evidence behind Summary, as the case's
	// own type (a struct with JSON tags): its checks read it back with
	// EvidenceOf, typed. The row carries it as its JSON object, the facts
	// the gate reads.
	// An untyped map is refused: a check reading one back could not be
	// told, by its type, that it was handed another case's evidence.
	Evidence any `json:"-"`
}

// EvidenceOf returns o's Evidence as T, or an error naming what it holds
// instead: a check given another case's observation fails, never panics.
func EvidenceOf[T any](o Observation) (T, error) {
	t, ok := o.Evidence.(T)
	if !ok {
		return t, fmt.Errorf("the observation holds %T evidence, not %T", o.Evidence, t)
	}
	return t, nil
}

// facts is what the row records of o's evidence: Evidence as its JSON
// object (the keys of its tags); none without evidence.
func (o Observation) facts() (map[string]any, error) {
	if o.Evidence == nil {
		return nil, nil
	}
	if t := reflect.TypeOf(o.Evidence); t.Kind() == reflect.Map && t.Name() == "" {
		return nil, fmt.Errorf("the observation's evidence is an untyped %s: give the case its own type", t)
	}
	b, err := json.Marshal(o.Evidence)
	if err != nil {
		return nil, fmt.Errorf("failed to encode %T evidence: %w", o.Evidence, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%T evidence is not a JSON object: %w", o.Evidence, err)
	}
	return m, nil
}

// Case is one measured configuration.
type Case struct {
	Name        string
	Role        Role
	Description string
	// Expect is the signature in words, for the table.
	Expect string
	// Run performs the measurement. An error means nothing conclusive was
	// observed.
	Run func(ctx context.Context) (Observation, error)
	// Check returns nil when the observation shows the expected signature,
	// else why not. An empty observation must not pass.
	Check func(Observation) error
}

// Suite is a named set of cases around one subject.
type Suite struct {
	Name    string
	Subject string
	Cases   []Case
	// Binaries is the sha256 of each binary the suite's clusters run, by
	// name (results.HashBinaries), for the result's build stamp.
	Binaries map[string]string
}

// announcing marks a context whose run is the one its suite's result is
// written from.
type announcing struct{}

// Announcing returns ctx marked so that Run announces each case's row on
// the progress file (results.EnvProgress) as soon as it is recorded. Only
// the run whose result is written asks for it: a suite's own checks of a
// control broken on purpose run the same cases, and their rows, red by
// design, must not read as the suite's progress.
func Announcing(ctx context.Context) context.Context {
	return context.WithValue(ctx, announcing{}, true)
}

// Run measures every control, then every subject, and derives the verdict.
// A panic inside a case is recorded as that case's failure. Once ctx ends,
// no further case runs and the run is INTERRUPTED, not judged. Under
// Announcing, each row is announced as it is recorded.
func Run(ctx context.Context, s Suite) Result {
	r := Start(ctx, s)
	for _, c := range r.Order() {
		if ctx.Err() != nil {
			break
		}
		r.Case(ctx, c.Name)
	}
	return r.Finish(ctx)
}

// Ordered returns the suite's cases in the order they run: every
// control, then every subject, each in the order given.
func (s Suite) Ordered() []Case {
	var controls, subjects []Case
	for _, c := range s.Cases {
		if c.Role == Control {
			controls = append(controls, c)
		} else {
			subjects = append(subjects, c)
		}
	}
	return append(controls, subjects...)
}

// Runner runs a suite's cases one at a time, so that each can be a spec of
// its own (suites/provider), and derives the verdict when asked: Run is a
// Runner that runs every case in Order. A run that skipped a case (a
// focused run) finishes PARTIAL, never PASS: its rows speak for the cases
// that ran, not for the suite.
type Runner struct {
	suite    Suite
	announce bool
	res      Result
	ran      map[string]bool
	// interrupted is why a case's context ended while it ran; no case runs
	// after it.
	interrupted string
}

// Start begins a run of s; ctx says only whether its rows are announced
// (Announcing).
func Start(ctx context.Context, s Suite) *Runner {
	announce, _ := ctx.Value(announcing{}).(bool)
	return &Runner{suite: s, announce: announce, ran: map[string]bool{},
		res: Result{Suite: s.Name, Subject: s.Subject, Started: time.Now().UTC()}}
}

// Order is the order the suite's cases run in (Suite.Ordered).
func (r *Runner) Order() []Case { return r.suite.Ordered() }

// Case runs the case named name, records and announces its row, and
// returns it. A case that is not the suite's, one already run, or any case
// after the run was interrupted is not run: the error says why.
func (r *Runner) Case(ctx context.Context, name string) (CaseResult, error) {
	if r.interrupted != "" {
		return CaseResult{}, fmt.Errorf("suite %s: case %s not run: the run was interrupted: %s", r.suite.Name, name, r.interrupted)
	}
	if r.ran[name] {
		return CaseResult{}, fmt.Errorf("suite %s: case %s already ran", r.suite.Name, name)
	}
	var c *Case
	for i := range r.suite.Cases {
		if r.suite.Cases[i].Name == name {
			c = &r.suite.Cases[i]
			break
		}
	}
	if c == nil {
		return CaseResult{}, fmt.Errorf("suite %s has no case %q", r.suite.Name, name)
	}
	r.ran[name] = true
	row := runCase(ctx, *c)
	r.res.Cases = append(r.res.Cases, row)
	// A context that ended while the case ran made its failure, and
	// leaves the rest unrun: the row says what happened, but the verdict
	// must not read as the subject's.
	if ctx.Err() != nil {
		r.interrupted = context.Cause(ctx).Error()
	}
	if r.announce {
		// The row is already recorded: a progress file that cannot be
		// written costs the person watching, not the suite's verdict.
		if err := results.Announce(results.Event{Suite: r.suite.Name, Case: &row}); err != nil {
			fmt.Fprintf(os.Stderr, "redgreen: suite %s, case %s: %v\n", r.suite.Name, row.Name, err)
		}
	}
	return row, nil
}

// Done reports whether every case of the suite has run.
func (r *Runner) Done() bool { return len(r.ran) == len(r.suite.Cases) }

// Rows is what the run has recorded so far, verdict not derived.
func (r *Runner) Rows() Result {
	res := r.res
	res.Cases = slices.Clone(r.res.Cases)
	return res
}

// Finish derives the verdict of what ran: INTERRUPTED when ctx ended or a
// case's context did, PARTIAL when a case did not run (naming them), else
// the red-then-green rules' (results.Decide).
func (r *Runner) Finish(ctx context.Context) Result {
	res := r.Rows()
	if r.interrupted == "" && ctx.Err() != nil {
		r.interrupted = context.Cause(ctx).Error()
	}
	res.Interrupted = r.interrupted
	if res.Interrupted == "" && !r.Done() {
		var unrun []string
		for _, c := range r.Order() {
			if !r.ran[c.Name] {
				unrun = append(unrun, c.Name)
			}
		}
		res.Partial = fmt.Sprintf("ran %d of %d cases; not run: %s", len(r.ran), len(r.suite.Cases), strings.Join(unrun, ", "))
	}
	res.Finished = time.Now().UTC()
	stamp(&res, r.suite.Binaries)
	res.Verdict, res.Reason = results.Decide(res)
	return res
}

// CouldNotStart is the result of a suite whose setup failed (a cluster
// that did not come up, a sweep that failed, a missing capability) before
// any case ran. Written like any result, it puts the cause in front of the
// gate instead of a missing file.
func (s Suite) CouldNotStart(cause error) Result {
	now := time.Now().UTC()
	res := Result{Suite: s.Name, Subject: s.Subject, Started: now, Finished: now, CouldNotStart: cause.Error()}
	stamp(&res, s.Binaries)
	res.Verdict, res.Reason = results.Decide(res)
	return res
}

// Setup runs a suite's setup. When it fails, the suite's could-not-start
// result is written where results go (AETHER_REPORT_DIR) before the error
// is returned, so the gate prints the cause instead of a missing file.
func (s Suite) Setup(setup func() error) error {
	err := setup()
	if err == nil {
		return nil
	}
	if werr := s.CouldNotStart(err).Write(""); werr != nil {
		return errors.Join(err, werr)
	}
	return err
}

// self is the running executable's name and sha256, hashed once: suites
// that run the mesh in-process (phase0, cni-capture) ran the code linked
// into it.
var self = sync.OnceValue(func() map[string]string {
	// Best effort: a stamp without this entry still names the build, and
	// out-of-process binaries are hashed (and fail) by their runners.
	exe, err := os.Executable()
	if err != nil {
		return nil
	}
	sums, err := results.HashBinaries(filepath.Dir(exe), filepath.Base(exe))
	if err != nil {
		return nil
	}
	return map[string]string{"self:" + filepath.Base(exe): sums[filepath.Base(exe)]}
})

// stamp records where the suite ran and the build it judged: the binaries
// its clusters ran and the running executable.
func stamp(r *Result, binaries map[string]string) {
	all := maps.Clone(binaries)
	if all == nil {
		all = map[string]string{}
	}
	maps.Copy(all, self())
	r.Hostname, _ = os.Hostname()
	r.Build = results.Stamp(all)
}

func runCase(ctx context.Context, c Case) (row CaseResult) {
	row = CaseResult{Name: c.Name, Role: c.Role, Description: c.Description, Expected: c.Expect, Observed: "(nothing observed)"}
	start := time.Now()
	defer func() {
		row.DurationMS = float64(time.Since(start).Microseconds()) / 1000
		if p := recover(); p != nil {
			row.Matched = false
			row.Reason = fmt.Sprintf("panic: %v\n%s", p, debug.Stack())
		}
	}()
	if c.Run == nil || c.Check == nil {
		row.Reason = "case has no Run or no Check"
		return row
	}
	obs, err := c.Run(ctx)
	if obs.Summary != "" {
		row.Observed = obs.Summary
	}
	facts, ferr := obs.facts()
	row.Witness, row.Facts = obs.Witness, facts
	if err != nil {
		row.Reason = "run failed: " + err.Error()
		return row
	}
	if ferr != nil {
		row.Reason = "inconclusive: " + ferr.Error()
		return row
	}
	if obs.Summary == "" && len(facts) == 0 {
		row.Reason = "inconclusive: the witness reported nothing"
		return row
	}
	if why := row.Evidenced(); why != "" {
		row.Reason = "inconclusive: the observation has " + why
		return row
	}
	if err := c.Check(obs); err != nil {
		row.Reason = err.Error()
		return row
	}
	row.Matched = true
	return row
}
