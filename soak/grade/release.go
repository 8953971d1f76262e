package grade

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
)

// ReleaseGates is the local soak's full gate set: a release rests on a
// soak that graded every one of them. A soak that lacks one was not asked
// the question, and a grade that lacks one did not answer it: a soak cut
// short before its first ABBA pair has no CPU gate, a soak whose agents
// export no prunes of in-use twins has no prune gate, and neither can
// release a build.
var ReleaseGates = []string{GateCPURatio, GateLiveness, Gate503NC, GatePrunedLive, GateCrashes, GateLoadGenErrors, GateStepsNotRun}

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
