package main

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aether-mesh/aether/rigs/results"
)

// width bounds every line the gate prints for a person: the tables, whose
// rows run to thousands of columns, go to the log and the HTML report.
const width = 120

// The columns of a case line: the gate's clock, the suite, the role, the
// case, the verdict, then the fact that decided it in what is left. A name
// longer than its column pushes the rest right; the line is still cut at
// width.
const lineFormat = "%5s  %-11s  %-7s  %-22s  %-4s  %s"

// clock is how long the gate has run, as m:ss (h:mm:ss past an hour); an
// instant stamped before the start (a clock a little behind) is 0:00.
func clock(d time.Duration) string {
	d = max(d, 0)
	s := int64(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

// since is the clock at t for a gate started at start (zero: not known).
func since(start, t time.Time) string {
	if start.IsZero() {
		return ""
	}
	return clock(t.Sub(start))
}

// span is a duration as a person reads it: 850ms, 41s, 5m12s, 1h2m0s.
func span(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// rowVerdict is what a row does to its suite by the red-then-green rules
// (results.Decide): PASS when it counts as matched (a control red, a
// subject green), else BROKEN_RIG for a control and FAIL for a subject;
// and the fact that decided it: the witness's summary, or why the row
// does not count.
func rowVerdict(c results.CaseResult) (results.Verdict, string) {
	ok, why := c.Counts()
	switch {
	case ok:
		return results.Pass, c.Observed
	case c.Role == results.Control:
		return results.BrokenRig, why
	}
	return results.Fail, why
}

// caseLine is a case's line as it finishes: "udproute  subject
// selection-tproxy  PASS  svc-a -> a-0=20 ...".
func caseLine(at, suite string, c results.CaseResult) string {
	v, fact := rowVerdict(c)
	return fit(fmt.Sprintf(lineFormat, at, suite, c.Role, c.Name, v, firstLine(fact)))
}

// suiteLine is a suite's line once its result is written: its verdict
// recomputed from its rows, and why.
func suiteLine(at string, r results.Result) string {
	v, why := results.Decide(r)
	what := fmt.Sprintf("%d cases", len(r.Cases))
	if len(r.Cases) == 1 {
		what = "1 case"
	}
	if d := r.Finished.Sub(r.Started); d > 0 {
		what += ", " + span(d)
	}
	return fit(fmt.Sprintf(lineFormat, at, r.Suite, "suite", what, v, firstLine(why)))
}

// soakLine is a running soak's figures: elapsed of planned, the probes
// and the load's requests with their failures, 503 NC, proxy exits, the
// windows done and, last as the first to be cut, the step last reported.
func soakLine(at string, p results.SoakProgress) string {
	return fit(fmt.Sprintf("%5s  soak %s/%s  probes %d (%d failed)  load %d (%d failed)  503 NC %.0f  exits %d  %d/%d windows  %s",
		at, clock(p.Elapsed), clock(p.Planned), p.Probes, p.ProbesFail, p.Requests, p.RequestsFail,
		p.NC, p.ProxyExits, p.WindowsDone, p.Windows, p.Step))
}

// firstLine is s up to its first line break (a panic's stack, say).
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// fit cuts a line to width columns (one per rune), ending in "…" when
// cut, and drops trailing blanks.
func fit(s string) string {
	s = strings.TrimRight(s, " ")
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return strings.TrimRight(string(r[:width-1]), " ") + "…"
}

// wrap breaks a line longer than width at spaces into at most max lines,
// the later ones indented; what does not fit in them is cut, ending in
// more (where the whole text is).
func wrap(s string, max int, more string) []string {
	const indent = "    "
	var out []string
	for rest := strings.TrimSpace(s); rest != ""; {
		limit := width
		if len(out) > 0 {
			limit -= len(indent)
		}
		r := []rune(rest)
		if len(r) <= limit {
			out = append(out, rest)
			break
		}
		if len(out) == max-1 {
			tail := " … " + more
			cut := limit - utf8.RuneCountInString(tail)
			if cut < 1 {
				cut = 1
			}
			out = append(out, strings.TrimRight(string(r[:min(cut, len(r))]), " ")+tail)
			break
		}
		cut := strings.LastIndexByte(string(r[:limit+1]), ' ')
		if cut <= 0 {
			// One word longer than the line: cut it.
			cut = len(string(r[:limit]))
		}
		head := string(rest[:cut])
		out = append(out, strings.TrimRight(head, " "))
		rest = strings.TrimSpace(rest[cut:])
	}
	for i := 1; i < len(out); i++ {
		out[i] = indent + out[i]
	}
	for i := range out {
		out[i] = fit(out[i])
	}
	return out
}
