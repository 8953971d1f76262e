package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	kjson "sigs.k8s.io/json"
)

// Role says whether a case is a control (expected to show a failure
// signature) or a subject (expected to show the property).
type Role string

const (
	Control Role = "control"
	Subject Role = "subject"
)

// CaseResult is a case's row in the report. Every row starts unmatched;
// only a check that passed on a witness's facts makes it matched.
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

// Evidenced says why a row cannot count as matched whatever it declares:
// a signature nobody witnessed, or witnessed without facts, is vacuous.
// It returns "" when the row carries both.
func (c CaseResult) Evidenced() string {
	switch {
	case strings.TrimSpace(c.Witness) == "" && len(c.Facts) == 0:
		return "no witness and no facts"
	case strings.TrimSpace(c.Witness) == "":
		return "no witness"
	case len(c.Facts) == 0:
		return "no facts"
	}
	return ""
}

// Counts says whether the row counts as matched and, when it does not,
// why: its own reason, or that it was declared matched without evidence.
// A row with neither still gets a reason, so a verdict never ends in an
// empty "name: ".
func (c CaseResult) Counts() (bool, string) {
	switch v := c.Evidenced(); {
	case c.Matched && v == "":
		return true, ""
	case c.Matched:
		return false, "declared matched with " + v
	case strings.TrimSpace(c.Reason) == "":
		return false, "not matched, and the row records no reason"
	}
	return false, c.Reason
}

// Result is a suite run: the rows, the verdict derived from them, and the
// build they judged.
type Result struct {
	Suite   string  `json:"suite"`
	Subject string  `json:"subject"`
	Verdict Verdict `json:"verdict"`
	Reason  string  `json:"reason,omitempty"`
	// CouldNotStart is why the suite measured nothing (its setup failed or
	// it was skipped); a suite with a cause here never passes.
	CouldNotStart string `json:"could_not_start,omitempty"`
	// Interrupted is why the run was cut short while its cases ran (its
	// context ended: an interrupt, a timeout); such rows are not judged.
	Interrupted string `json:"interrupted,omitempty"`
	// Partial says which cases a run left out on purpose (a focused run:
	// go test -ginkgo.focus); its rows speak for the cases that ran, never
	// for the suite, so it is not judged. A full run leaves it empty.
	Partial  string       `json:"partial,omitempty"`
	Cases    []CaseResult `json:"cases"`
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Hostname string       `json:"hostname"`
	Build    Build        `json:"build"`
}

// Decide derives a suite's verdict from its rows by the red-then-green
// rules: a suite that could not start fails; an interrupted one is not
// judged (its rows are partial, and a cut-short case's failure is not the
// subject's), nor is a partial one (it left cases out); any control not showing its signature makes a broken rig, as
// does a suite with no control; otherwise any subject not showing the
// property, or no subject at all, fails. A row counts as matched only when
// it says so and carries a witness and facts.
func Decide(r Result) (Verdict, string) {
	if r.CouldNotStart != "" {
		return Fail, "could not start: " + r.CouldNotStart
	}
	if r.Interrupted != "" {
		return Interrupted, "interrupted, not judged: " + r.Interrupted
	}
	if r.Partial != "" {
		return Partial, "partial run, not judged: " + r.Partial
	}
	var broken, failed []string
	nControl, nSubject := 0, 0
	for _, c := range r.Cases {
		ok, why := c.Counts()
		switch c.Role {
		case Control:
			nControl++
			if !ok {
				broken = append(broken, fmt.Sprintf("control %s did not show its signature (%s): %s", c.Name, c.Expected, why))
			}
		default:
			nSubject++
			if !ok {
				failed = append(failed, fmt.Sprintf("%s: %s", c.Name, why))
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
	if r.CouldNotStart != "" {
		fmt.Fprintf(&b, "%s: %s (could not start: %s)\n", r.Suite, r.Verdict, r.CouldNotStart)
		return b.String()
	}
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "case\trole\texpected\tobserved\tverdict")
	for _, c := range r.Cases {
		v := "as expected"
		switch why := c.Evidenced(); {
		case !c.Matched:
			v = "UNEXPECTED"
		case why != "":
			v = "VACUOUS (" + why + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, c.Role, c.Expected, c.Observed, v)
	}
	tw.Flush()
	// The verdict line is the rows' verdict, not the file's: a table whose
	// rows are red must not end in a declared PASS.
	v, why := Decide(r)
	if v != r.Verdict {
		fmt.Fprintf(&b, "%s: %s (%s); the result declares %s\n", r.Suite, v, why, r.Verdict)
		return b.String()
	}
	fmt.Fprintf(&b, "%s: %s (%s)\n", r.Suite, v, why)
	return b.String()
}

// EnvReportDir names the directory suites write their results into; `make
// gate` sets it to reports/latest/suites.
const EnvReportDir = "AETHER_REPORT_DIR"

// Write stores the result as <dir>/<suite>.json. An empty dir means the
// directory named by AETHER_REPORT_DIR, and nothing is written when that is
// unset too. Once written, the file is announced on the progress file
// (EnvProgress), where the gate reads it as soon as it exists.
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
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	return Announce(Event{Suite: r.Suite, Written: p})
}

// Load reads a result written by Write. It checks the shape, not the
// verdict: Check does that. A key Write never writes (a misspelt
// "verdcit", a "Verdict" in the wrong case) is refused naming its path: a
// reader would otherwise judge the file without it.
func Load(path string) (Result, error) {
	var r Result
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("failed to read suite result: %w", err)
	}
	if err := DecodeStrict(b, &r); err != nil {
		return r, fmt.Errorf("suite result %s: %w", path, err)
	}
	if r.Suite == "" {
		return r, fmt.Errorf("suite result %s: field \"suite\" is empty", path)
	}
	return r, nil
}

// DecodeStrict decodes JSON into v, refusing a key v does not have,
// matched in exact case; every such key is named by its path
// (cases[1].verdcit).
func DecodeStrict(b []byte, v any) error {
	strict, err := kjson.UnmarshalStrict(b, v)
	if err != nil {
		return err
	}
	return errors.Join(strict...)
}
