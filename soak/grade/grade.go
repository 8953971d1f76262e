// Package grade decides a soak's gates from its manifest and evidence: the
// h3/h2 per-request proxy CPU ratio with an exact interval, the liveness
// SLO in exact integer arithmetic, and the counts that must stay at their
// limit. Its Grade is what reports render and the release gate obeys.
package grade

import (
	"fmt"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
)

// Verdict is a gate's or a soak's outcome. Only PASS passes.
type Verdict = results.Verdict

const (
	Pass         = results.Pass
	Fail         = results.Fail
	Inconclusive = results.Inconclusive
	Refused      = results.Refused
)

// Gate is one decided gate with the inputs its verdict follows from; the
// release gate recomputes the verdict from those inputs.
type Gate = results.Gate

// Grade is a graded soak.
type Grade struct {
	Soak        string              `json:"soak"`
	Description string              `json:"description,omitempty"`
	Manifest    string              `json:"manifest"`
	Builds      []string            `json:"builds"`
	Start       time.Time           `json:"start"`
	End         time.Time           `json:"end"`
	Excluded    []manifest.Excluded `json:"excluded,omitempty"`
	Events      []manifest.Event    `json:"events,omitempty"`
	Verdict     Verdict             `json:"verdict"`
	Reason      string              `json:"reason"`
	Gates       []Gate              `json:"gates"`
	CPU         *CPURatio           `json:"cpu_ratio,omitempty"`
	Liveness    *Liveness           `json:"liveness,omitempty"`
	Counts      []Count             `json:"counts,omitempty"`
	// NetworkFaults is the network fault gates' evidence.
	NetworkFaults *NetworkFaults `json:"network_faults,omitempty"`
	// Leaks are the resource growth gates' evidence, gate by gate.
	Leaks []Leak `json:"leaks,omitempty"`
	// ManifestSHA256 and Evidence bind the grade to what it was graded
	// from: the manifest's bytes and every evidence file a gate read. The
	// release gate re-grades from them and refuses a grade they refute.
	ManifestSHA256 string         `json:"manifest_sha256,omitempty"`
	Evidence       []EvidenceFile `json:"evidence,omitempty"`
	// Build is the build that graded the soak; the commands stamp it.
	Build results.Build `json:"build"`
}

// Run reads the evidence a manifest names and decides every gate in it.
// Evidence that cannot be read is an error, not a verdict: a grade must not
// rest on an input that was skipped.
func Run(m *manifest.Manifest) (*Grade, error) {
	g := &Grade{
		Soak: m.Name, Description: m.Description, Manifest: m.Path, Builds: m.Builds,
		Start: m.Start, End: m.End, Excluded: m.Excluded, Events: m.Events,
		ManifestSHA256: m.SHA256,
	}
	ev := &loader{m: m, prom: map[string]evidence.Matrix{}, read: map[string]map[string]bool{}}
	if m.Gates.CPURatio != nil {
		ev.gate = GateCPURatio
		cpu, gate, err := gradeCPU(m, ev)
		if err != nil {
			return nil, fmt.Errorf("soak %s: cpu ratio gate: %w", m.Name, err)
		}
		g.CPU = cpu
		gate.Inputs.Ratio = ratioInputs(cpu, gate)
		g.Gates = append(g.Gates, gate)
	}
	if m.Gates.Liveness != nil {
		ev.gate = GateLiveness
		l, gate, err := gradeLiveness(m, ev)
		if err != nil {
			return nil, fmt.Errorf("soak %s: liveness gate: %w", m.Name, err)
		}
		g.Liveness = l
		gate.Inputs.Liveness = &results.LivenessInputs{Failed: l.Failed, Total: l.Total, SLO: l.SLO}
		g.Gates = append(g.Gates, gate)
	}
	for _, c := range m.Gates.Counts {
		ev.gate = c.Name
		cnt, gate, err := gradeCount(m, ev, c)
		if err != nil {
			return nil, fmt.Errorf("soak %s: count gate %q: %w", m.Name, c.Name, err)
		}
		g.Counts = append(g.Counts, cnt)
		gate.Inputs.Count = &results.CountInputs{Count: cnt.Count, Limit: cnt.Limit}
		g.Gates = append(g.Gates, gate)
	}
	if m.Gates.NetworkFaults != nil && len(m.Faults()) > 0 {
		ev.gate = GateFaultFailures
		nf, gates, err := gradeFaults(m, ev)
		if err != nil {
			return nil, fmt.Errorf("soak %s: network fault gates: %w", m.Name, err)
		}
		ev.read[m.Sources.ProbeLog][GateFaultRecovery] = true
		g.NetworkFaults = nf
		g.Gates = append(g.Gates, gates...)
	}
	for _, lg := range m.Gates.Leaks {
		ev.gate = lg.Name
		l, gate, err := gradeLeak(m, ev, lg)
		if err != nil {
			return nil, fmt.Errorf("soak %s: leak gate %q: %w", m.Name, lg.Name, err)
		}
		g.Leaks = append(g.Leaks, l)
		g.Gates = append(g.Gates, gate)
	}
	g.Verdict, g.Reason = Decide(g.Gates)
	var err error
	if g.Evidence, err = ev.bind(); err != nil {
		return nil, fmt.Errorf("soak %s: %w", m.Name, err)
	}
	return g, nil
}

// Decide derives a soak's verdict: any FAIL fails it; otherwise a refused
// or inconclusive gate keeps it from passing.
func Decide(gates []Gate) (Verdict, string) { return results.DecideSoak(gates) }

// ratioInputs is what the CPU gate's verdict follows from. A refusal is
// carried as its reason: the windows were never paired, so there are no
// bounds to recompute from.
func ratioInputs(cpu *CPURatio, gate Gate) *results.RatioInputs {
	in := &results.RatioInputs{Estimate: cpu.Ratio, Bounded: cpu.Bounded, Max: cpu.Max}
	if cpu.Bounded {
		lo, hi := cpu.Lower, cpu.Upper
		in.Lower, in.Upper = &lo, &hi
	}
	if gate.Verdict == Refused {
		in.Refused = gate.Reason
	}
	return in
}

// loader reads each evidence file once, and records which gate read which
// file, so the grade binds exactly what it was graded from.
type loader struct {
	m    *manifest.Manifest
	prom map[string]evidence.Matrix
	// gate is the gate being graded; read maps each file, as the manifest
	// names it, to the gates that read it.
	gate string
	read map[string]map[string]bool
}

// file records that the gate being graded reads p (manifest-relative) and
// returns the path to open it by.
func (l *loader) file(p string) string {
	if l.read[p] == nil {
		l.read[p] = map[string]bool{}
	}
	l.read[p][l.gate] = true
	return l.m.Resolve(p)
}

func (l *loader) series(s *manifest.Series) ([]evidence.Series, error) {
	p := l.file(s.Prometheus)
	mat, ok := l.prom[p]
	if !ok {
		var err error
		if mat, err = evidence.LoadPromMatrix(p); err != nil {
			return nil, err
		}
		l.prom[p] = mat
	}
	return mat.Select(s.Match)
}

// counter is a counter's increase over the soak, which must be whole.
func counter(series []evidence.Series, from, to time.Time, what string) (int64, error) {
	v, err := evidence.Increase(series, from, to)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	n := int64(v)
	if float64(n) != v {
		return 0, fmt.Errorf("%s: increase %v is not a whole count", what, v)
	}
	return n, nil
}

func fmtInt(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// FormatCount renders a count with thousands separators, as the proposal
// writes them (719,984).
func FormatCount(n int64) string { return fmtInt(n) }
