// Package render turns soak grades and suite results into what people and
// pipelines read: a self-contained HTML page per soak (inline SVG charts,
// no network), its JSON and JUnit XML, a plain-text gate table, and the
// nightly index of runs.
package render

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/bench"
	"github.com/aether-mesh/aether/soak/grade"
)

// Files a soak's report directory holds.
const (
	GradeFile  = "grade.json"
	HTMLFile   = "report.html"
	JUnitFile  = "junit.xml"
	IndexFile  = "index.html"
	suitesGlob = "*.json"
)

// Text is the gate table a terminal shows.
func Text(g *grade.Grade) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak %s (%s, %s .. %s)\n", g.Soak, strings.Join(g.Builds, ", "),
		g.Start.Format("2006-01-02 15:04"), g.End.Format("2006-01-02 15:04 MST"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "gate\tverdict\tfigure\treason")
	for _, gt := range g.Gates {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", gt.Name, gt.Verdict, gt.Figure, gt.Reason)
	}
	tw.Flush()
	fmt.Fprintf(&b, "%s: %s (%s)\n", g.Soak, g.Verdict, g.Reason)
	return b.String()
}

// WriteSoak writes grade.json, junit.xml and report.html for one soak into
// dir; suites, when given, add their red-then-green tables to the page.
func WriteSoak(dir string, g *grade.Grade, suites []results.Result) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create report dir %q: %w", dir, err)
	}
	js, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode grade of soak %s: %w", g.Soak, err)
	}
	if err := write(filepath.Join(dir, GradeFile), append(js, '\n')); err != nil {
		return err
	}
	ju, err := JUnit([]*grade.Grade{g}, suites)
	if err != nil {
		return err
	}
	if err := write(filepath.Join(dir, JUnitFile), ju); err != nil {
		return err
	}
	page, err := HTML(g, suites)
	if err != nil {
		return err
	}
	return write(filepath.Join(dir, HTMLFile), page)
}

func write(path string, b []byte) error {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

// LoadGrade reads a grade.json written by WriteSoak.
func LoadGrade(path string) (*grade.Grade, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read soak grade: %w", err)
	}
	// Strict: a misspelt key would otherwise be judged as absent.
	var g grade.Grade
	if err := results.DecodeStrict(b, &g); err != nil {
		return nil, fmt.Errorf("soak grade %s: %w", path, err)
	}
	if g.Soak == "" {
		return nil, fmt.Errorf("soak grade %s: field \"soak\" is empty", path)
	}
	switch g.Verdict {
	case grade.Pass, grade.Fail, grade.Inconclusive, grade.Refused:
	default:
		return nil, fmt.Errorf("soak grade %s: field \"verdict\": unknown verdict %q", path, g.Verdict)
	}
	return &g, nil
}

// LoadSuites reads every suite result under dir (redgreen's JSON), sorted
// by file name. A missing dir is no suites, not an error.
func LoadSuites(dir string) ([]results.Result, error) {
	files, err := filepath.Glob(filepath.Join(dir, suitesGlob))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []results.Result
	for _, f := range files {
		r, err := results.Load(f)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// junit XML, in the shape Jenkins, GitLab and GitHub reporters read.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Errors    int         `xml:"errors,attr"`
	Timestamp string      `xml:"timestamp,attr,omitempty"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// JUnit renders soak gates and suite cases as JUnit XML. A gate that did
// not pass (FAIL, INCONCLUSIVE, REFUSED) is a failure whose type names the
// verdict; a suite case that did not match its expectation is a failure too.
func JUnit(gs []*grade.Grade, suites []results.Result) ([]byte, error) {
	doc := junitSuites{Name: "aether"}
	for _, g := range gs {
		s := junitSuite{Name: "soak/" + g.Soak, Timestamp: g.End.Format("2006-01-02T15:04:05")}
		for _, gt := range g.Gates {
			c := junitCase{Name: gt.Name, Classname: "soak." + g.Soak, Time: "0", SystemOut: gt.Figure + ": " + gt.Reason}
			if gt.Verdict != grade.Pass {
				c.Failure = &junitFailure{Message: fmt.Sprintf("%s: %s", gt.Verdict, gt.Reason), Type: string(gt.Verdict), Text: gt.Figure}
				s.Failures++
			}
			s.Cases = append(s.Cases, c)
		}
		s.Tests = len(s.Cases)
		doc.Suites = append(doc.Suites, s)
	}
	for _, r := range suites {
		s := junitSuite{Name: "suite/" + r.Suite, Timestamp: r.Started.Format("2006-01-02T15:04:05")}
		for _, c := range r.Cases {
			jc := junitCase{Name: fmt.Sprintf("%s (%s)", c.Name, c.Role), Classname: "suite." + r.Suite,
				Time: fmt.Sprintf("%.3f", c.DurationMS/1000), SystemOut: "expected: " + c.Expected + "; observed: " + c.Observed}
			if !c.Matched {
				jc.Failure = &junitFailure{Message: c.Reason, Type: string(r.Verdict), Text: c.Observed}
				s.Failures++
			}
			s.Cases = append(s.Cases, jc)
		}
		if r.Verdict != results.Pass && s.Failures == 0 {
			// A suite can fail with every row matched (no subject case).
			s.Cases = append(s.Cases, junitCase{Name: "suite verdict", Classname: "suite." + r.Suite, Time: "0",
				Failure: &junitFailure{Message: r.Reason, Type: string(r.Verdict)}})
			s.Failures++
		}
		s.Tests = len(s.Cases)
		doc.Suites = append(doc.Suites, s)
	}
	for _, s := range doc.Suites {
		doc.Tests += s.Tests
		doc.Failures += s.Failures
	}
	var buf bytes.Buffer
	buf.WriteString(xml.Header)
	enc := xml.NewEncoder(&buf)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("failed to encode JUnit XML: %w", err)
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

type pageData struct {
	G        *grade.Grade
	Charts   []chart
	Suites   []suiteView
	Verdicts map[grade.Verdict]string
}

type chart struct {
	Title string
	SVG   template.HTML
}

type suiteView struct {
	R     results.Result
	Class string
}

func verdictClass(v string) string {
	switch v {
	case string(grade.Pass):
		return "pass"
	case string(grade.Fail):
		return "fail"
	default:
		return "other"
	}
}

// HTML renders one soak's self-contained page.
func HTML(g *grade.Grade, suites []results.Result) ([]byte, error) {
	d := pageData{G: g}
	add := func(title string, s string, err error) error {
		if err != nil {
			return fmt.Errorf("soak %s: chart %q: %w", g.Soak, title, err)
		}
		if s != "" {
			d.Charts = append(d.Charts, chart{Title: title, SVG: template.HTML(s)}) //nolint:gosec // produced by vgsvg from numbers
		}
		return nil
	}
	if g.CPU != nil && len(g.CPU.Windows) > 0 {
		s, err := cpuChart(g.CPU)
		if err := add("CPU per request per window", s, err); err != nil {
			return nil, err
		}
		s, err = ratioChart(g.CPU)
		if err := add("h3/h2 ratio with its interval", s, err); err != nil {
			return nil, err
		}
	}
	if g.Liveness != nil {
		s, err := timelineChart("Liveness: failed probes per step", "failed probes", g, g.Liveness.Timeline)
		if err := add("Liveness timeline", s, err); err != nil {
			return nil, err
		}
	}
	for _, c := range g.Counts {
		if len(c.Timeline) == 0 || c.Count == 0 {
			continue
		}
		s, err := timelineChart(c.Name+": counted per step", c.Name, g, c.Timeline)
		if err := add(c.Name+" timeline", s, err); err != nil {
			return nil, err
		}
	}
	if len(g.Counts) > 0 {
		s, err := countsChart(g.Counts)
		if err := add("Counts per gate", s, err); err != nil {
			return nil, err
		}
	}
	for _, r := range suites {
		d.Suites = append(d.Suites, suiteView{R: r, Class: verdictClass(string(r.Verdict))})
	}
	var buf bytes.Buffer
	if err := soakPage.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("failed to render report of soak %s: %w", g.Soak, err)
	}
	return buf.Bytes(), nil
}

func fixed1(v float64) string { return fmt.Sprintf("%.1f", v) }
func fixed3(v float64) string { return fmt.Sprintf("%.3f", v) }
func count(v float64) string  { return grade.FormatCount(int64(v)) }

// notMeasured formats a figure a grade may lack: nil is a figure nobody
// measured, and the page says so rather than print a zero.
func notMeasured(f func(float64) string) func(*float64) string {
	return func(v *float64) string {
		if v == nil {
			return notMeasuredText
		}
		return f(*v)
	}
}

// notMeasuredText stands in the report for a figure the grade has not got.
const notMeasuredText = "not measured"

var funcs = template.FuncMap{
	"class": func(v any) string { return verdictClass(fmt.Sprint(v)) },
	"f1":    fixed1,
	"pct":   func(v float64) string { return fmt.Sprintf("%.1f%%", v*100) },
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"f3":    fixed3,
	"mf1":   notMeasured(fixed1),
	"mf3":   notMeasured(fixed3),
	"mn":    notMeasured(count),
	"i":     func(v int64) string { return grade.FormatCount(v) },
	"t":     func(v interface{ Format(string) string }) string { return v.Format("2006-01-02 15:04") },
	"ts":    func(v interface{ Format(string) string }) string { return v.Format("2006-01-02 15:04:05") },
	"hms":   func(v interface{ Format(string) string }) string { return v.Format("15:04:05") },
	"join":  strings.Join,
	"rate":  grade.LeakRate,
	"level": grade.LeakLevel,
}

const style = `
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:70em;color:#222;padding:0 1em}
h1{margin-bottom:.2em} h2{margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em} td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4} td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:.15em .6em;border-radius:.3em;font-weight:bold;color:#fff}
.pass{background:#2a8a3a}.fail{background:#c0392b}.other{background:#b7791f}
.muted{color:#666}.charts{display:flex;flex-wrap:wrap;gap:1em}.charts figure{margin:0}
figcaption{font-size:.9em;color:#555}
`

var soakPage = template.Must(template.New("soak").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>soak {{.G.Soak}}: {{.G.Verdict}}</title>
<style>` + style + `</style></head><body>
<h1>soak {{.G.Soak}} <span class="badge {{class .G.Verdict}}">{{.G.Verdict}}</span></h1>
<p>{{.G.Reason}}</p>
<p class="muted">{{.G.Description}}<br>builds {{join .G.Builds ", "}} · {{t .G.Start}} .. {{t .G.End}} UTC · manifest <code>{{.G.Manifest}}</code></p>

<h2>Gates</h2>
<table><tr><th>gate</th><th>verdict</th><th>figure</th><th>reason</th></tr>
{{range .G.Gates}}<tr><td>{{.Name}}</td><td><span class="badge {{class .Verdict}}">{{.Verdict}}</span></td><td>{{.Figure}}</td><td>{{.Reason}}</td></tr>
{{end}}</table>

{{if .Charts}}<h2>Charts</h2><div class="charts">
{{range .Charts}}<figure>{{.SVG}}<figcaption>{{.Title}}</figcaption></figure>
{{end}}</div>{{end}}

{{with .G.Excluded}}<h2>Excluded windows</h2>
<table><tr><th>name</th><th>from</th><th>to</th><th>reason</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td>{{ts .Start}}</td><td>{{ts .End}}</td><td>{{.Reason}}</td></tr>{{end}}</table>{{end}}

{{with .G.Events}}<h2>Graded chaos events</h2>
<table><tr><th>name</th><th>from</th><th>to</th><th>what</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td>{{ts .Start}}</td><td>{{ts .End}}</td><td>{{.What}}</td></tr>{{end}}</table>{{end}}

{{with .G.CPU}}<h2>h3/h2 per-request proxy CPU</h2>
<p>{{.Method}}. Target {{f1 .TargetRPS}} rps; gate ≤ {{f2 .Max}}×.
{{if .Ratio}}Estimate <b>{{f2 .Ratio}}×</b>{{if .Bounded}}, interval [{{f3 .Lower}}, {{f3 .Upper}}] at {{pct .Confidence}} exact coverage{{end}}.{{end}}</p>
{{if .Windows}}<table><tr><th>window</th><th>protocol</th><th>build</th><th>span</th><th>CPU source</th><th>CPU s</th><th>proxy requests</th><th>client requests</th><th>achieved rps</th><th>ms CPU/request</th><th>valid</th></tr>
{{range .Windows}}<tr><td>{{.Name}}</td><td>{{.Protocol}}</td><td>{{.Build}}</td><td>{{ts .Start}}–{{hms .End}}</td><td>{{.CPUSource}}</td><td class="num">{{mf1 .CPUSeconds}}</td><td class="num">{{mn .ProxyRequests}}</td><td class="num">{{mn .ClientRequests}}</td><td class="num">{{mf1 .AchievedRPS}}</td><td class="num">{{mf3 .CPUPerRequestMS}}</td><td>{{if .Valid}}yes{{else}}<b>no</b>: {{.Invalid}}{{end}}</td></tr>
{{end}}</table>
<table><tr><th>pair</th><th>h2 window</th><th>h3 window</th><th>h3/h2</th><th>used</th></tr>
{{range $i, $p := .Pairs}}<tr><td>{{$i}}</td><td>{{$p.H2}}</td><td>{{$p.H3}}</td>{{if $p.Used}}<td class="num">{{f3 $p.Ratio}}</td><td>yes</td>{{else}}<td class="num">—</td><td>no: {{$p.Reason}}</td>{{end}}</tr>
{{end}}</table>{{end}}{{end}}

{{with .G.Liveness}}<h2>Liveness</h2>
<p>{{i .Failed}} failed of {{i .Total}} probes over the whole soak (excluded windows included); SLO {{.SLO}}% allows {{i .Allowed}}.</p>{{end}}

{{with .G.Counts}}<h2>Counts</h2>
<table><tr><th>gate</th><th>what it counts</th><th>counted</th><th>limit</th><th>recorded</th><th>outside the soak</th><th>in excluded windows</th><th>source</th></tr>
{{range .}}<tr><td>{{.Name}}</td><td>{{.About}}</td><td class="num">{{i .Count}}</td><td class="num">{{i .Limit}}</td><td class="num">{{i .Seen}}</td><td class="num">{{i .OutsideRun}}</td><td>{{range $k, $v := .InExcluded}}{{$k}}: {{i $v}} {{end}}</td><td>{{.Source}}{{with .Note}}<br><span class="muted">{{.}}</span>{{end}}</td></tr>
{{end}}</table>{{end}}

{{with .G.Leaks}}<h2>Resource growth</h2>
{{range .}}<h3>{{.Name}}</h3>
<p class="muted">{{.About}} · bound {{rate .MaxPerHour .Unit}} per process · each life's first {{.Settle}} left out · at least {{.MinSamples}} samples over {{.MinSpan}} to decide · {{.Source}}</p>
<table><tr><th>process</th><th>lives</th><th>samples</th><th>span</th><th>range</th><th>growth</th><th>verdict</th><th>reason</th></tr>
{{$u := .Unit}}{{range .Processes}}<tr><td>{{.Name}}</td><td class="num">{{.Lives}}</td><td class="num">{{.Samples}}</td><td class="num">{{f1 .SpanSeconds}} s</td><td>{{if .Samples}}{{level .Min $u}} – {{level .Max $u}}{{else}}—{{end}}</td><td class="num">{{with .PerHour}}{{rate . $u}}{{else}}—{{end}}</td><td><span class="badge {{class .Verdict}}">{{.Verdict}}</span></td><td>{{.Reason}}</td></tr>
{{end}}</table>{{end}}{{end}}

{{if .Suites}}<h2>Suites, red then green</h2>
{{range .Suites}}<h3>{{.R.Suite}} <span class="badge {{.Class}}">{{.R.Verdict}}</span></h3>
<p class="muted">{{.R.Subject}} · {{.R.Reason}}</p>
<table><tr><th>case</th><th>role</th><th>expected</th><th>observed</th><th>witness</th><th>as expected</th></tr>
{{range .R.Cases}}<tr><td>{{.Name}}</td><td>{{.Role}}</td><td>{{.Expected}}</td><td>{{.Observed}}</td><td>{{.Witness}}</td><td>{{if .Matched}}yes{{else}}<b>NO</b>: {{.Reason}}{{end}}</td></tr>
{{end}}</table>{{end}}{{end}}
</body></html>
`))

// Run is one graded soak as the index lists it.
type Run struct {
	Grade *grade.Grade
	// Link is the run's report page, relative to the index.
	Link string
}

// Index renders the nightly index: every run with its verdict and the
// trend of the h3/h2 ratio.
func Index(runs []Run, suites []results.Result) ([]byte, error) {
	return IndexWithBench(runs, suites, nil)
}

// BenchDir is the benchmark's folder beside the index (reports/bench).
const BenchDir = "bench"

// IndexWithBench is Index with the benchmark's history (soak/bench) below
// the runs: its runs, linked under BenchDir, and the trend of their CPU
// per request.
func IndexWithBench(runs []Run, suites []results.Result, benchHistory []bench.HistoryEntry) ([]byte, error) {
	benchHTML, err := benchSection(benchHistory, BenchDir+"/")
	if err != nil {
		return nil, err
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].Grade.Start.Before(runs[j].Grade.Start) })
	var gs []*grade.Grade
	for _, r := range runs {
		gs = append(gs, r.Grade)
	}
	trend, err := trendChart(gs)
	if err != nil {
		return nil, err
	}
	d := struct {
		Runs   []Run
		Trend  template.HTML
		Suites []suiteView
		Bench  template.HTML
	}{Runs: runs, Trend: template.HTML(trend), Bench: benchHTML} //nolint:gosec // produced by vgsvg from numbers
	for _, r := range suites {
		d.Suites = append(d.Suites, suiteView{R: r, Class: verdictClass(string(r.Verdict))})
	}
	var buf bytes.Buffer
	if err := indexPage.Execute(&buf, d); err != nil {
		return nil, fmt.Errorf("failed to render the index: %w", err)
	}
	return buf.Bytes(), nil
}

var indexPage = template.Must(template.New("index").Funcs(funcs).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>aether soak runs</title>
<style>` + style + `</style></head><body>
<h1>aether soak runs</h1>
<table><tr><th>soak</th><th>start</th><th>builds</th><th>verdict</th><th>h3/h2</th><th>reason</th></tr>
{{range .Runs}}<tr><td><a href="{{.Link}}">{{.Grade.Soak}}</a></td><td>{{t .Grade.Start}}</td><td>{{join .Grade.Builds ", "}}</td><td><span class="badge {{class .Grade.Verdict}}">{{.Grade.Verdict}}</span></td><td>{{with .Grade.CPU}}{{if .Ratio}}{{f2 .Ratio}}×{{if .Bounded}} [{{f2 .Lower}}, {{f2 .Upper}}]{{end}}{{else}}—{{end}}{{else}}—{{end}}</td><td>{{.Grade.Reason}}</td></tr>
{{end}}</table>
{{if .Trend}}<h2>Trend of the ratio</h2><figure>{{.Trend}}<figcaption>h3/h2 per-request CPU per run, with its interval, against the gate</figcaption></figure>{{end}}
{{if .Bench}}<h2>Benchmark: direct, the mesh, HAProxy and nginx</h2>{{.Bench}}{{end}}
{{if .Suites}}<h2>Latest suites</h2><table><tr><th>suite</th><th>verdict</th><th>reason</th></tr>
{{range .Suites}}<tr><td>{{.R.Suite}}</td><td><span class="badge {{.Class}}">{{.R.Verdict}}</span></td><td>{{.R.Reason}}</td></tr>{{end}}</table>{{end}}
</body></html>
`))
