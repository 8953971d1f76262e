package run

import (
	"fmt"
	"io"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// Reporter is a Progress writer that also takes each tick's figures, on a
// terminal or not, so that whoever watches the run (the gate) can lay
// them out itself.
type Reporter interface {
	Report(results.SoakProgress)
}

// progress prints the run's state: on a terminal one line rewritten every
// second, elsewhere (a CI log) one line per step.
type progress struct {
	w        io.Writer
	tty      bool
	start    time.Time
	planned  time.Duration
	windows  int
	lastLoad int64
	lastAt   time.Time
}

// status is what one progress line reports.
type status struct {
	windowsDone   int
	step          string
	load, loadErr int64
	probes, pfail int64
	nc            float64
	exits         int
}

func (p *progress) line(s status) string {
	now := time.Now()
	rate := 0.0
	if !p.lastAt.IsZero() && now.After(p.lastAt) {
		rate = float64(s.load-p.lastLoad) / now.Sub(p.lastAt).Seconds()
	}
	p.lastLoad, p.lastAt = s.load, now
	return fmt.Sprintf("soak %s/%s  windows %d/%d  %s  load %.0f rps (%d sent, %d failed)  probes %d (%d failed)  503 NC %.0f  proxy exits %d",
		now.Sub(p.start).Round(time.Second), p.planned.Round(time.Second), s.windowsDone, p.windows, s.step,
		rate, s.load, s.loadErr, s.probes, s.pfail, s.nc, s.exits)
}

// report hands a Reporter the figures.
func (p *progress) report(s status) {
	if r, ok := p.w.(Reporter); ok {
		r.Report(results.SoakProgress{Elapsed: time.Since(p.start), Planned: p.planned, WindowsDone: s.windowsDone, Windows: p.windows,
			Step: s.step, Requests: s.load, RequestsFail: s.loadErr, Probes: s.probes, ProbesFail: s.pfail, NC: s.nc, ProxyExits: s.exits})
	}
}

// tick updates the rewritten line on a terminal.
func (p *progress) tick(s status) {
	p.report(s)
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", p.line(s))
	}
}

// step prints a line for a finished step off a terminal.
func (p *progress) step(s status) {
	p.report(s)
	if !p.tty {
		fmt.Fprintln(p.w, p.line(s))
	}
}

// done ends the rewritten line.
func (p *progress) done() {
	if p.tty {
		fmt.Fprintln(p.w)
	}
}
