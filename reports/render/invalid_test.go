package render

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/soak/grade"
)

// A grade written by hand, not by the grader: w1's CPU was never measured
// (nil), its pair was left out and carries no ratio; w2-w4 were measured.
func unmeasuredGrade() *grade.Grade {
	at := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	v := func(f float64) *float64 { return &f }
	win := func(name, proto string, i int, cpu, cpr *float64, valid bool, why string) grade.Window {
		return grade.Window{Name: name, Protocol: proto, Build: "b1", Start: at.Add(time.Duration(i) * 5 * time.Minute), End: at.Add(time.Duration(i+1) * 5 * time.Minute),
			CPUSource: "prometheus", CPUSeconds: cpu, ProxyRequests: v(3000), ClientRequests: v(3000), CPUPerRequestMS: cpr, AchievedRPS: v(10), Valid: valid, Invalid: why}
	}
	return &grade.Grade{Soak: "hand", Builds: []string{"b1"}, Start: at, End: at.Add(20 * time.Minute), Verdict: grade.Inconclusive,
		Gates: []grade.Gate{{Name: "h3/h2 per-request proxy CPU", Verdict: grade.Inconclusive, Figure: "1.75× (no interval)", Reason: "1 valid pair(s) of 2"}},
		CPU: &grade.CPURatio{Max: 1.5, TargetRPS: 10, Ratio: 1.75,
			Windows: []grade.Window{
				win("w1-h2", "h2", 0, nil, nil, false, "sources.proxy_cpu not measured"),
				win("w2-h3", "h3", 1, v(9), v(3), true, ""),
				win("w3-h3", "h3", 2, v(10.5), v(3.5), true, ""),
				win("w4-h2", "h2", 3, v(6), v(2), true, ""),
			},
			Pairs: []grade.Pair{
				{H2: "w1-h2", H3: "w2-h3", Reason: "w1-h2 invalid: sources.proxy_cpu not measured"},
				{H2: "w4-h2", H3: "w3-h3", Ratio: 1.75, Used: true},
			}}}
}

// The page shows "not measured" where the grade has no figure, never a
// zero, and the left-out pair's row has no ratio.
func TestHTMLShowsNoFigureThatWasNotMeasured(t *testing.T) {
	page, err := HTML(unmeasuredGrade(), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	w1 := regexp.MustCompile(`<tr><td>w1-h2</td>.*?</tr>`).FindString(s)
	if strings.Count(w1, "<td class=\"num\">not measured</td>") != 2 || strings.Contains(w1, ">0.0</td>") || strings.Contains(w1, ">0.000</td>") || !strings.Contains(w1, "3,000") {
		t.Errorf("w1's row must show its CPU and CPU per request as not measured and its 3,000 requests: %s", w1)
	}
	pair0 := regexp.MustCompile(`<tr><td>0</td><td>w1-h2</td>.*?</tr>`).FindString(s)
	if pair0 == "" || !strings.Contains(pair0, `<td class="num">—</td>`) || regexp.MustCompile(`\d\.\d{3}`).MatchString(pair0) {
		t.Errorf("the left-out pair's row must show no ratio: %q", pair0)
	}
	if pair1 := regexp.MustCompile(`<tr><td>1</td><td>w4-h2</td>.*?</tr>`).FindString(s); !strings.Contains(pair1, "1.750") {
		t.Errorf("the used pair's row must show 1.750: %q", pair1)
	}
}

// The 2026-09-30 re-soak leaves out w11's pair; its row shows no ratio.
func TestHTMLResoakLeftOutPairHasNoRatio(t *testing.T) {
	page, err := HTML(fixtureGrades(t)["2026-09-30-resoak-1.0.13-84fb413"], nil)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`<tr><td>\d+</td><td>w12-h2</td><td>w11-h3</td>.*?</tr>`).FindString(string(page))
	if !strings.Contains(row, `<td class="num">—</td><td>no: w11-h3 invalid: achieved 285.`) {
		t.Errorf("w11's pair row: %q", row)
	}
}
