// Package results holds what the release gate judges: a suite's
// red-then-green rows and a soak's graded gates, the rules that turn them
// into verdicts, and the build each result was made by. Suites write these
// models, soak grading fills them, and aether-gate loads them and recomputes
// every verdict from the evidence instead of trusting a declared one.
package results

// Verdict is the outcome of a suite, a soak, or one soak gate. Only PASS
// passes.
type Verdict string

const (
	Pass Verdict = "PASS"
	Fail Verdict = "FAIL"
	// BrokenRig: a suite's control did not show its failure signature, so
	// the suite proved nothing about its subject.
	BrokenRig Verdict = "BROKEN_RIG"
	// Inconclusive: a soak gate's evidence cannot decide (the interval
	// straddles the limit, too few valid pairs).
	Inconclusive Verdict = "INCONCLUSIVE"
	// Refused: a soak's evidence cannot be graded as asked (windows of two
	// builds offered as pairs).
	Refused Verdict = "REFUSED"
	// Interrupted: a suite's run was cut short (Ctrl-C, a timeout) while
	// its cases ran, so its rows were not judged; it does not pass, and it
	// is not a failure of the subject either.
	Interrupted Verdict = "INTERRUPTED"
	// Partial: a suite's run left cases out on purpose (a focused run), so
	// its rows cannot speak for the suite; the gate refuses it.
	Partial Verdict = "PARTIAL"
)
