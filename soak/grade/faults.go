package grade

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/soak/evidence"
	"github.com/aether-mesh/aether/soak/manifest"
)

// The network fault gates' names.
const (
	GateFaultFailures = "network faults: probe failures"
	GateFaultRecovery = "network faults: recovery"
)

// ReleaseFaultBounds are the local soak's bounds per network fault kind
// (aether-soak run's): a soak graded against looser ones cannot release
// a build.
var ReleaseFaultBounds = map[string]manifest.FaultBound{
	manifest.FaultNetem:     {Allowance: seconds(3), MaxFailed: seconds(1), MaxRecovery: seconds(3)},
	manifest.FaultLinkFlap:  {Allowance: seconds(4), MaxFailed: seconds(3), MaxRecovery: seconds(3)},
	manifest.FaultPartition: {Allowance: seconds(5), MaxFailed: seconds(6), MaxRecovery: seconds(3)},
}

func seconds(n int) manifest.Duration {
	return manifest.Duration{Duration: time.Duration(n) * time.Second}
}

// NetworkFaults is the evidence behind the network fault gates: each
// fault with its probes, read from the probe log.
type NetworkFaults struct {
	ProbeLog   string       `json:"probe_log"`
	ProbeKinds []string     `json:"probe_kinds"`
	Faults     []FaultGrade `json:"faults"`
}

// FaultGrade is one fault's figures against its kind's bound.
type FaultGrade struct {
	Name  string    `json:"name"`
	Kind  string    `json:"kind"`
	Node  string    `json:"node"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	// Until is End plus the kind's allowance (clipped to the soak): the
	// fault's probes are those started in [Start, Until).
	Until       time.Time `json:"until"`
	MaxFailed   string    `json:"max_failed"`
	MaxRecovery string    `json:"max_recovery"`
	// Probes are the fault's figures per probe kind, in kind order.
	Probes []FaultProbes `json:"probes"`
	// OverBound: some probe kind failed longer than MaxFailed. Slow: some
	// graded probe kind did not recover within MaxRecovery.
	OverBound bool `json:"over_bound"`
	Slow      bool `json:"slow"`
}

// FaultProbes is one probe kind's probes of one fault.
type FaultProbes struct {
	Kind    string `json:"kind"`
	Started int64  `json:"started"`
	Failed  int64  `json:"failed"`
	// FailedMS is the kind's failed time: the fault's span, Start to
	// Until, times Failed/Started.
	FailedMS int64 `json:"failed_ms"`
	// Graded says the kind's recovery is graded (gates.network_faults.
	// probe_kinds).
	Graded bool `json:"graded"`
	// RecoveryMS is the time from the fault's end to the end of the first
	// probe of this kind that succeeded after it; absent when none did
	// before the soak ended.
	RecoveryMS *int64 `json:"recovery_ms,omitempty"`
}

// gradeFaults grades every fault event against its kind's bound, from the
// probe log alone.
func gradeFaults(m *manifest.Manifest, ev *loader) (*NetworkFaults, []Gate, error) {
	nf := m.Gates.NetworkFaults
	probes, err := evidence.LoadProbeLog(ev.file(m.Sources.ProbeLog))
	if err != nil {
		return nil, nil, fmt.Errorf("sources.probe_log: %w", err)
	}
	kinds := map[string]bool{}
	for _, p := range probes {
		kinds[p.Kind] = true
	}
	graded := map[string]bool{}
	for _, k := range nf.ProbeKinds {
		graded[k] = true
		kinds[k] = true
	}
	kindList := make([]string, 0, len(kinds))
	for k := range kinds {
		kindList = append(kindList, k)
	}
	sort.Strings(kindList)
	out := &NetworkFaults{ProbeLog: m.Sources.ProbeLog, ProbeKinds: nf.ProbeKinds}
	var over, slow int64
	var failFig, recFig []string
	for _, e := range m.Faults() {
		b := nf.Kinds[e.Fault.Kind]
		until := e.End.Add(b.Allowance.Duration)
		if until.After(m.End) {
			until = m.End
		}
		fg := FaultGrade{Name: e.Name, Kind: e.Fault.Kind, Node: e.Fault.Node, Start: e.Start, End: e.End, Until: until,
			MaxFailed: b.MaxFailed.String(), MaxRecovery: b.MaxRecovery.String()}
		var fails, recs []string
		for _, k := range kindList {
			fp := FaultProbes{Kind: k, Graded: graded[k]}
			var first time.Time
			for _, p := range probes {
				if p.Kind != k {
					continue
				}
				if !p.Time.Before(e.Start) && p.Time.Before(until) {
					fp.Started++
					if !p.OK {
						fp.Failed++
					}
				}
				if d := p.Done(); p.OK && !d.Before(e.End) && (first.IsZero() || d.Before(first)) {
					first = d
				}
			}
			if !first.IsZero() {
				ms := first.Sub(e.End).Milliseconds()
				fp.RecoveryMS = &ms
			}
			failed := failedTime(until.Sub(e.Start), fp.Failed, fp.Started)
			fp.FailedMS = failed.Milliseconds()
			if failed > b.MaxFailed.Duration {
				fg.OverBound = true
			}
			fails = append(fails, fmt.Sprintf("%s %s/%s (%s)", k, fmtInt(fp.Failed), fmtInt(fp.Started), failed.Round(time.Millisecond)))
			if fp.Graded {
				switch {
				case fp.RecoveryMS == nil:
					fg.Slow = true
					recs = append(recs, fmt.Sprintf("%s never (no success in the %s to the soak's end)", k, m.End.Sub(e.End).Round(time.Millisecond)))
				default:
					if time.Duration(*fp.RecoveryMS)*time.Millisecond > b.MaxRecovery.Duration {
						fg.Slow = true
					}
					recs = append(recs, fmt.Sprintf("%s %s", k, (time.Duration(*fp.RecoveryMS)*time.Millisecond).String()))
				}
			}
			fg.Probes = append(fg.Probes, fp)
		}
		if fg.OverBound {
			over++
		}
		if fg.Slow {
			slow++
		}
		failFig = append(failFig, fmt.Sprintf("%s (%s on %s): %s failed (bound %s each)%s", e.Name, e.Fault.Kind, e.Fault.Node,
			strings.Join(fails, ", "), b.MaxFailed, mark(fg.OverBound, " OVER")))
		recFig = append(recFig, fmt.Sprintf("%s (%s): %s (bound %s)%s", e.Name, e.Fault.Kind, strings.Join(recs, ", "), b.MaxRecovery, mark(fg.Slow, " SLOW")))
		out.Faults = append(out.Faults, fg)
	}
	n := int64(len(out.Faults))
	failures := countGate(GateFaultFailures, over, n, "over their kind's failure bound", failFig)
	recovery := countGate(GateFaultRecovery, slow, n, "without every graded probe kind recovering in time", recFig)
	return out, []Gate{failures, recovery}, nil
}

// failedTime is a probe kind's failed time in a span: the span's length
// times the share of the kind's probes started in it that failed, so
// one second of every probe failing weighs one second at any rate.
func failedTime(span time.Duration, failed, started int64) time.Duration {
	if started == 0 {
		return 0
	}
	return time.Duration(float64(span) * float64(failed) / float64(started))
}

func mark(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

// countGate is a gate counting bad faults of n, at limit 0.
func countGate(name string, bad, n int64, what string, figures []string) Gate {
	g := Gate{Name: name, Figure: fmt.Sprintf("%s of %s fault(s) %s (limit 0): %s", fmtInt(bad), fmtInt(n), what, strings.Join(figures, "; "))}
	g.Inputs.Count = &results.CountInputs{Count: bad, Limit: 0}
	if bad == 0 {
		g.Verdict, g.Reason = Pass, fmt.Sprintf("0 ≤ 0: every one of %s fault(s) within its bound", fmtInt(n))
	} else {
		g.Verdict, g.Reason = Fail, fmt.Sprintf("%s > 0: %s of %s fault(s) %s", fmtInt(bad), fmtInt(bad), fmtInt(n), what)
	}
	return g
}

// faultSpans are the spans the liveness SLO leaves out: each fault event
// from its start to its end plus its kind's allowance, clipped to the soak.
func faultSpans(m *manifest.Manifest) []LeftOut {
	nf := m.Gates.NetworkFaults
	if nf == nil {
		return nil
	}
	var out []LeftOut
	for _, e := range m.Faults() {
		to := e.End.Add(nf.Kinds[e.Fault.Kind].Allowance.Duration)
		if to.After(m.End) {
			to = m.End
		}
		out = append(out, LeftOut{Name: e.Name, Start: e.Start, End: to})
	}
	return out
}
