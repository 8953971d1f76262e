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
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"
)

// Role says whether a case is a control (expected to show a failure
// signature) or a subject (expected to show the property).
type Role string

const (
	Control Role = "control"
	Subject Role = "subject"
)

// Verdict is a suite's outcome.
type Verdict string

const (
	Pass      Verdict = "PASS"
	Fail      Verdict = "FAIL"
	BrokenRig Verdict = "BROKEN_RIG"
)

// Observation is what a case measured, as its witness reported it.
type Observation struct {
	// Summary is one line a person reads in the table.
	Summary string `json:"summary"`
	// Witness names who observed it: "the receiver's IP_PKTINFO", "the
	// backend's own log", "the proxy's counters". Never the client's claim.
	Witness string `json:"witness"`
	// Facts is the structured evidence behind Summary.
	Facts map[string]any `json:"facts,omitempty"`
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

// CaseResult is a case's row in the report. Every result starts unmatched;
// only a Check that returns nil on a successful Run makes it matched.
type CaseResult struct {
	Name        string         `json:"name"`
	Role        Role           `json:"role"`
	Description string         `json:"description,omitempty"`
	Expected    string         `json:"expected"`
	Observed    string         `json:"observed"`
	Witness     string         `json:"witness,omitempty"`
	Facts       map[string]any `json:"facts,omitempty"`
	Matched     bool           `json:"matched"`
	Reason      string         `json:"reason,omitempty"`
	DurationMS  float64        `json:"duration_ms"`
}

// Suite is a named set of cases around one subject.
type Suite struct {
	Name    string
	Subject string
	Cases   []Case
}

// Result is a suite run: the rows and the verdict derived from them.
type Result struct {
	Suite    string       `json:"suite"`
	Subject  string       `json:"subject"`
	Verdict  Verdict      `json:"verdict"`
	Reason   string       `json:"reason,omitempty"`
	Cases    []CaseResult `json:"cases"`
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Host     Host         `json:"host"`
}

// Host records where the suite ran.
type Host struct {
	Kernel   string `json:"kernel"`
	Hostname string `json:"hostname"`
	Revision string `json:"revision,omitempty"`
}

// Run measures every control, then every subject, and derives the verdict.
// A panic inside a case is recorded as that case's failure.
func Run(ctx context.Context, s Suite) Result {
	res := Result{Suite: s.Name, Subject: s.Subject, Started: time.Now().UTC(), Host: host()}
	var controls, subjects []Case
	for _, c := range s.Cases {
		if c.Role == Control {
			controls = append(controls, c)
		} else {
			subjects = append(subjects, c)
		}
	}
	for _, c := range append(controls, subjects...) {
		res.Cases = append(res.Cases, runCase(ctx, c))
	}
	res.Finished = time.Now().UTC()
	res.Verdict, res.Reason = Decide(res.Cases)
	return res
}

// Decide derives a suite verdict from its rows: any unmatched control makes
// a broken rig; otherwise any unmatched subject, or no subject at all, fails.
func Decide(rows []CaseResult) (Verdict, string) {
	var broken, failed []string
	nControl, nSubject := 0, 0
	for _, r := range rows {
		switch r.Role {
		case Control:
			nControl++
			if !r.Matched {
				broken = append(broken, fmt.Sprintf("control %s did not show its signature (%s): %s", r.Name, r.Expected, r.Reason))
			}
		default:
			nSubject++
			if !r.Matched {
				failed = append(failed, fmt.Sprintf("%s: %s", r.Name, r.Reason))
			}
		}
	}
	switch {
	case len(broken) > 0:
		return BrokenRig, strings.Join(broken, "; ")
	case nControl == 0:
		return BrokenRig, "the suite has no control"
	case nSubject == 0:
		return Fail, "the suite has no subject case"
	case len(failed) > 0:
		return Fail, strings.Join(failed, "; ")
	}
	return Pass, fmt.Sprintf("%d control(s) red, %d subject(s) green", nControl, nSubject)
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
	row.Witness, row.Facts = obs.Witness, obs.Facts
	if err != nil {
		row.Reason = "run failed: " + err.Error()
		return row
	}
	if obs.Summary == "" && len(obs.Facts) == 0 {
		row.Reason = "inconclusive: the witness reported nothing"
		return row
	}
	if err := c.Check(obs); err != nil {
		row.Reason = err.Error()
		return row
	}
	row.Matched = true
	return row
}

// Err is nil only for a passing suite.
func (r Result) Err() error {
	if r.Verdict == Pass {
		return nil
	}
	return fmt.Errorf("suite %s: %s: %s", r.Suite, r.Verdict, r.Reason)
}

// Table renders the rows the way the proposal's tables read: case, role,
// expected, observed, verdict; then a one-line suite verdict.
func (r Result) Table() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\trole\texpected\tobserved\tverdict")
	for _, c := range r.Cases {
		v := "as expected"
		if !c.Matched {
			v = "UNEXPECTED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Role, c.Expected, c.Observed, v)
	}
	tw.Flush()
	fmt.Fprintf(&b, "%s: %s (%s)\n", r.Suite, r.Verdict, r.Reason)
	return b.String()
}

// EnvReportDir names the directory suites write their results into; `make
// gate` sets it to reports/latest/suites.
const EnvReportDir = "AETHER_REPORT_DIR"

// Write stores the result as <dir>/<suite>.json. An empty dir means the
// directory named by AETHER_REPORT_DIR, and nothing is written when that is
// unset too.
func (r Result) Write(dir string) error {
	if dir == "" {
		dir = os.Getenv(EnvReportDir)
	}
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create report dir %q: %w", dir, err)
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode result of suite %s: %w", r.Suite, err)
	}
	p := filepath.Join(dir, r.Suite+".json")
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", p, err)
	}
	return nil
}

// Load reads a result written by Write.
func Load(path string) (Result, error) {
	var r Result
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("failed to read suite result: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("suite result %s: %w", path, err)
	}
	if r.Suite == "" {
		return r, fmt.Errorf("suite result %s: field \"suite\" is empty", path)
	}
	return r, nil
}

func host() Host {
	var h Host
	var u unixName
	h.Kernel = u.release()
	h.Hostname, _ = os.Hostname()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				h.Revision = s.Value
			}
		}
	}
	return h
}
