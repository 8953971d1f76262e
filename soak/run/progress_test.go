package run

import (
	"bytes"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// reporter records the figures it is handed.
type reporter struct {
	bytes.Buffer
	got []results.SoakProgress
}

func (r *reporter) Report(p results.SoakProgress) { r.got = append(r.got, p) }

// A Progress writer that is a Reporter gets every tick's and step's
// figures, on a terminal or not; the lines still go to it as before.
func TestProgressReportsFigures(t *testing.T) {
	for _, tty := range []bool{false, true} {
		r := &reporter{}
		p := &progress{w: r, tty: tty, start: time.Now().Add(-time.Minute), planned: 2 * time.Minute, windows: 12}
		p.tick(status{windowsDone: 3, step: "w04-h2", load: 900, loadErr: 1, probes: 600, pfail: 2, nc: 4, exits: 1})
		p.step(status{windowsDone: 4, step: "w04-h2 done", probes: 610})
		if len(r.got) != 2 {
			t.Fatalf("tty %v: %d reports, want 2", tty, len(r.got))
		}
		g := r.got[0]
		if g.WindowsDone != 3 || g.Windows != 12 || g.Step != "w04-h2" || g.Requests != 900 || g.RequestsFail != 1 ||
			g.Probes != 600 || g.ProbesFail != 2 || g.NC != 4 || g.ProxyExits != 1 || g.Planned != 2*time.Minute || g.Elapsed < time.Minute {
			t.Errorf("tty %v: tick reported %+v", tty, g)
		}
		if r.got[1].Step != "w04-h2 done" || r.got[1].Probes != 610 {
			t.Errorf("tty %v: step reported %+v", tty, r.got[1])
		}
		if r.Len() == 0 {
			t.Errorf("tty %v: the lines no longer reach the writer", tty)
		}
	}
}
