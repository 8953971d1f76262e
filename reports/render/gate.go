package render

import (
	"bytes"
	"fmt"
	"html/template"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/grade"
)

// GateFile and GateLog are the gate's report and its log under the report
// directory: the red-then-green tables and soak gates a terminal has no
// room for.
const (
	GateFile = "gate.html"
	GateLog  = "gate.log"
)

// Gate is what one run of the gate judged, for its page.
type Gate struct {
	// Verdict is PASS or FAIL; Line the verdict line, as printed.
	Verdict results.Verdict
	Line    string
	// Build is the gated build as the verdict line names it.
	Build  string
	Judged time.Time
	// Total is how long the gate ran, when known.
	Total  time.Duration
	Steps  []GateStep
	Suites []results.Result
	Soaks  []GateSoak
	// Problems are the gate's failure lines, in full.
	Problems []string
}

// GateStep is one command the gate ran: its log, its exit, how long.
type GateStep struct {
	Name, Command, Log string
	Exit               int
	Error              string
	Took               time.Duration
}

// GateSoak is one soak grade as the gate judged it: the re-grade's gates
// (or, when it could not re-grade, the declared ones) and the soak's own
// report page, relative to the gate's.
type GateSoak struct {
	Grade *grade.Grade
	// Regraded is false when the table is the grade as declared.
	Regraded bool
	Link     string
}

type gateSuite struct {
	R results.Result
	// Verdict and Reason are the rows' verdict, recomputed.
	Verdict results.Verdict
	Reason  string
	Class   string
}

// GatePage renders the gate's self-contained page: the verdict, the steps,
// every suite's red-then-green table and every soak's gates.
func GatePage(g Gate) ([]byte, error) {
	d := struct {
		Gate
		Class  string
		Suites []gateSuite
	}{Gate: g, Class: verdictClass(string(g.Verdict))}
	for _, r := range g.Suites {
		v, why := results.Decide(r)
		d.Suites = append(d.Suites, gateSuite{R: r, Verdict: v, Reason: why, Class: verdictClass(string(v))})
	}
	var buf bytes.Buffer
	if err := gatePage.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("failed to render the gate's report: %w", err)
	}
	return buf.Bytes(), nil
}

var gateFuncs = template.FuncMap{
	"span": func(d time.Duration) string { return d.Round(time.Second).String() },
	"ms": func(v float64) string {
		return (time.Duration(v * float64(time.Millisecond))).Round(time.Millisecond).String()
	},
	"row": func(c results.CaseResult) string {
		switch ok, _ := c.Counts(); {
		case ok:
			return "pass"
		case c.Role == results.Control:
			return "other"
		}
		return "fail"
	},
	"counts": func(c results.CaseResult) bool { ok, _ := c.Counts(); return ok },
	"why":    func(c results.CaseResult) string { _, why := c.Counts(); return why },
}

var gatePage = template.Must(template.New("gate").Funcs(funcs).Funcs(gateFuncs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>aether gate: {{.Verdict}}</title>
<style>` + style + `</style></head><body>
<h1>aether gate <span class="badge {{.Class}}">{{.Verdict}}</span></h1>
<p id="verdict"><code>{{.Line}}</code></p>
<p class="muted">{{.Build}} · judged {{ts .Judged}} UTC{{if .Total}} · {{span .Total}} in all{{end}}</p>

{{with .Problems}}<h2>Why it did not pass</h2>
<ul>{{range .}}<li>{{.}}</li>
{{end}}</ul>{{end}}

{{with .Steps}}<h2>Steps</h2>
<table id="steps"><tr><th>step</th><th>command</th><th>exit</th><th>took</th><th>log</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td><code>{{.Command}}</code></td><td class="num">{{if .Error}}{{.Error}}{{else}}{{.Exit}}{{end}}</td><td class="num">{{span .Took}}</td><td><code>{{.Log}}</code></td></tr>
{{end}}</table>{{end}}

<h2>Suites, red then green</h2>
<table id="suites"><tr><th>suite</th><th>verdict</th><th>cases</th><th>why</th></tr>
{{range .Suites}}<tr><td><a href="#suite-{{.R.Suite}}">{{.R.Suite}}</a></td><td><span class="badge {{.Class}}">{{.Verdict}}</span></td><td class="num">{{len .R.Cases}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>
{{range .Suites}}<h3 id="suite-{{.R.Suite}}">{{.R.Suite}} <span class="badge {{.Class}}">{{.Verdict}}</span></h3>
<p class="muted">{{.R.Subject}} · {{.Reason}}{{if ne .Verdict .R.Verdict}} · the result declares {{.R.Verdict}}{{end}}</p>
{{if .R.CouldNotStart}}<p>could not start: {{.R.CouldNotStart}}</p>{{else}}
<table class="cases"><tr><th>case</th><th>role</th><th>expected</th><th>observed</th><th>witness</th><th>took</th><th>verdict</th></tr>
{{range .R.Cases}}<tr><td>{{.Name}}</td><td>{{.Role}}</td><td>{{.Expected}}</td><td>{{.Observed}}</td><td>{{.Witness}}</td><td class="num">{{ms .DurationMS}}</td><td><span class="badge {{row .}}">{{if counts .}}as expected{{else}}NO{{end}}</span>{{if not (counts .)}} {{why .}}{{end}}</td></tr>
{{end}}</table>{{end}}{{end}}

{{with .Soaks}}<h2>Soaks</h2>
{{range .}}<h3>soak {{.Grade.Soak}} <span class="badge {{class .Grade.Verdict}}">{{.Grade.Verdict}}</span></h3>
<p class="muted">{{.Grade.Reason}} · builds {{join .Grade.Builds ", "}}{{if not .Regraded}} · as the grade declares it: not re-graded{{end}}{{with .Link}} · <a href="{{.}}">its report</a>{{end}}</p>
<table class="gates"><tr><th>gate</th><th>verdict</th><th>figure</th><th>reason</th></tr>
{{range .Grade.Gates}}<tr><td>{{.Name}}</td><td><span class="badge {{class .Verdict}}">{{.Verdict}}</span></td><td>{{.Figure}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>{{end}}{{end}}
</body></html>
`))
