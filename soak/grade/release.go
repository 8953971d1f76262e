package grade

import (
	"fmt"
	"math/big"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// The gates' names. The CPU ratio and liveness gates are named here; a
// count gate is named by its manifest, and the local soak (soak/run) names
// its counts with these.
const (
	GateCPURatio      = "h3/h2 per-request proxy CPU"
	GateLiveness      = "liveness SLO"
	Gate503NC         = "503 NC"
	GatePrunedLive    = "prunes of in-use twins"
	GateCrashes       = "proxy crashes"
	GateLoadGenErrors = "load-generator errors"
	GateStepsNotRun   = "schedule steps not run"
	// GateProbesShort counts the liveness probes a soak with a planned
	// probe rate did not start (the long soak's).
	GateProbesShort = "liveness probes short of plan"
	// The long soak's leak gates (gates.leaks). A release does not
	// require them: the smoke that every gate runs is too short to fit a
	// growth per hour.
	GateLeakResident   = "leak: resident memory"
	GateLeakFDs        = "leak: open fds"
	GateLeakGoroutines = "leak: goroutines"
	GateLeakPairs      = "leak: recorded QUIC pairs"
)

// ReleaseGates is the local soak's full gate set: a release rests on a
// soak that graded every one of them. A soak that lacks one was not asked
// the question, and a grade that lacks one did not answer it: a soak cut
// short before its first ABBA pair has no CPU gate, a soak whose agents
// export no prunes of in-use twins has no prune gate, and neither can
// release a build.
var ReleaseGates = []string{GateCPURatio, GateLiveness, Gate503NC, GatePrunedLive, GateCrashes, GateLoadGenErrors, GateStepsNotRun,
	GateFaultFailures, GateFaultRecovery}

// MissingForRelease names every release gate g does not carry, in
// ReleaseGates' order.
func MissingForRelease(g *Grade) []string {
	has := map[string]bool{}
	for _, gt := range g.Gates {
		has[gt.Name] = true
	}
	var missing []string
	for _, name := range ReleaseGates {
		if !has[name] {
			missing = append(missing, name)
		}
	}
	return missing
}

// A release's limits are the local soak's own (aether-soak run's defaults):
// a soak graded against looser ones asked an easier question, so a
// manifest edited to a count limit of 1,000 and graded again cannot
// release a build. Stricter limits pass.
const (
	ReleaseMaxRatio   = 1.5
	ReleaseMinSLO     = "99.9"
	ReleaseCountLimit = 0
)

// ReleaseRefusals says why g cannot release a build: each release gate it
// lacks (MissingForRelease), and each it graded against a limit looser
// than the release's, read from the gate's inputs.
func ReleaseRefusals(g *Grade) []string {
	var out []string
	for _, name := range MissingForRelease(g) {
		out = append(out, fmt.Sprintf("gate %q is missing: a release (-require-soak) requires the local soak's full gate set", name))
	}
	if nf := g.NetworkFaults; nf != nil {
		for _, f := range nf.Faults {
			rb, ok := ReleaseFaultBounds[f.Kind]
			rec, err := time.ParseDuration(f.MaxRecovery)
			failed, ferr := time.ParseDuration(f.MaxFailed)
			if !ok || err != nil || ferr != nil || failed > rb.MaxFailed.Duration || rec > rb.MaxRecovery.Duration || f.Until.Sub(f.End) > rb.Allowance.Duration {
				out = append(out, fmt.Sprintf("network fault %s (%s) is graded against at most %s failed, recovery %s and allowance %s; a release allows at most %s, %s and %s",
					f.Name, f.Kind, f.MaxFailed, f.MaxRecovery, f.Until.Sub(f.End), rb.MaxFailed, rb.MaxRecovery, rb.Allowance))
			}
		}
	}
	minSLO, _ := new(big.Rat).SetString(ReleaseMinSLO)
	for _, gt := range g.Gates {
		in := gt.Inputs
		switch {
		case gt.Name == GateCPURatio && (in.Ratio == nil || in.Ratio.Max > ReleaseMaxRatio):
			out = append(out, fmt.Sprintf("gate %q is graded against %s; a release requires a limit of at most %.2f×", gt.Name, ratioLimit(in), ReleaseMaxRatio))
		case gt.Name == GateLiveness:
			slo, ok := new(big.Rat), false
			if in.Liveness != nil {
				_, ok = slo.SetString(in.Liveness.SLO)
			}
			if !ok || slo.Cmp(minSLO) < 0 {
				out = append(out, fmt.Sprintf("gate %q is graded against %s; a release requires an SLO of at least %s%%", gt.Name, sloLimit(in), ReleaseMinSLO))
			}
		case isReleaseCount(gt.Name) && (in.Count == nil || in.Count.Limit > ReleaseCountLimit):
			out = append(out, fmt.Sprintf("gate %q is graded against %s; a release requires a limit of %d", gt.Name, countLimit(in), ReleaseCountLimit))
		}
	}
	return out
}

func isReleaseCount(name string) bool {
	switch name {
	case Gate503NC, GatePrunedLive, GateCrashes, GateLoadGenErrors, GateStepsNotRun, GateFaultFailures, GateFaultRecovery:
		return true
	}
	return false
}

func ratioLimit(in results.GateInputs) string {
	if in.Ratio == nil {
		return "no ratio inputs"
	}
	return fmt.Sprintf("a limit of %.2f×", in.Ratio.Max)
}

func sloLimit(in results.GateInputs) string {
	if in.Liveness == nil {
		return "no liveness inputs"
	}
	return fmt.Sprintf("an SLO of %s%%", in.Liveness.SLO)
}

func countLimit(in results.GateInputs) string {
	if in.Count == nil {
		return "no count inputs"
	}
	return fmt.Sprintf("a limit of %d", in.Count.Limit)
}
