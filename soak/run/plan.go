package run

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aether-mesh/aether/soak/manifest"
)

// StepKind is what one step of a soak's schedule does.
type StepKind string

const (
	// Warmup runs the load on the current transport and discards the span:
	// the first one after bring-up, and one after every transport switch.
	Warmup StepKind = "warm-up"
	// Switch restarts every agent with the other --mesh-transport.
	Switch StepKind = "switch"
	// Measure is a graded window of the CPU gate.
	Measure StepKind = "window"
	// The chaos steps.
	AgentRestart      StepKind = "agent-restart"
	ProxyHotRestart   StepKind = "proxy-hot-restart"
	AgentInHotRestart StepKind = "agent-restart-in-hot-restart"
	PodChurn          StepKind = "pod-churn"
)

// Step is one step of the schedule.
type Step struct {
	Kind StepKind
	// Protocol is the window's (Measure) or the switch's target (Switch).
	Protocol string
	// Length is how long a Warmup or Measure step lasts; the others last
	// as long as they take.
	Length time.Duration
	// Node is the node a chaos step acts on.
	Node string
	// Fault is a network fault step's fault (NetworkKinds).
	Fault Fault `json:",omitzero"`
}

// Excluded says whether a step's span is left out of grading (the
// manifest's excluded list) or graded like any other (its events list):
// a switch and its warm-up are discarded as the ABBA design requires, and
// a proxy hot restart's handover is excluded from the load-generator
// errors, while the mesh must carry agent restarts and pod churn unseen.
// The liveness SLO counts every span alike.
func (k StepKind) Excluded() bool {
	switch k {
	case Warmup, Switch, ProxyHotRestart, AgentInHotRestart:
		return true
	}
	return false
}

// Budget sizes a schedule.
type Budget struct {
	// Duration is the soak's whole length, chaos and switches included.
	Duration time.Duration
	// Tick is the sampling grid every boundary lies on.
	Tick time.Duration
	// Warmup is each discarded warm-up's length.
	Warmup time.Duration
	// SwitchCost and ChaosCost are what a switch and a chaos step are
	// expected to take, to size the windows from what is left.
	SwitchCost, ChaosCost time.Duration
	// Nodes are the nodes chaos may act on.
	Nodes []string
	// Chaos are the chaos kinds this build can run.
	Chaos []StepKind
	// Network are the network fault kinds the schedule draws from
	// (NetworkKinds); each lasts its FaultShapes' hold and allowance.
	Network []StepKind
	// NetworkEvery puts a network fault in every NetworkEvery-th gap
	// (default 3).
	NetworkEvery int
	Seed         uint64
	// Pairs, when set, is the number of ABBA pairs; fewer than MinPairs
	// leave the CPU gate without an interval (a check of the runner, not
	// a soak). Otherwise there is one pair per PairEvery of the duration
	// (a minute when unset), at least MinPairs. MinWindow, when set,
	// replaces the shortest window.
	Pairs     int
	PairEvery time.Duration
	MinWindow time.Duration
}

// MinPairs is the fewest ABBA pairs a schedule has: an exact 95% Wilcoxon
// interval needs six (soak/stats).
const MinPairs = 6

// MinWindow is the shortest measurement window: below it a proxy's CPU,
// counted in 10 ms clock ticks, is too coarse to compare.
const MinWindow = 3 * time.Second

// Plan lays out a soak: a warm-up, then ABBA pairs of windows starting
// with h2. Inside a pair the transport changes (switch, warm-up); between
// pairs, where it does not, a chaos step may run. The chaos steps are
// drawn from b.Chaos by b.Seed, every kind once before any repeats, one per
// gap at most: the schedule is bounded by the gaps and the same seed gives
// the same soak. Network faults (b.Network) are drawn apart, by their own
// stream of the seed, into every third gap (networkOrder), before that
// gap's chaos step.
func Plan(b Budget) ([]Step, error) {
	if b.Tick <= 0 || b.Warmup < b.Tick {
		return nil, fmt.Errorf("plan: tick %s and warm-up %s: the warm-up must last at least a tick", b.Tick, b.Warmup)
	}
	every := b.PairEvery
	if every <= 0 {
		every = time.Minute
	}
	pairs := max(MinPairs, int(b.Duration/every))
	if b.Pairs > 0 {
		pairs = b.Pairs
	}
	minWindow := MinWindow
	if b.MinWindow > 0 {
		minWindow = b.MinWindow
	}
	gaps := pairs - 1
	over := b.Warmup + time.Duration(pairs)*(b.SwitchCost+b.Warmup)
	if len(b.Chaos) > 0 {
		over += time.Duration(gaps) * b.ChaosCost
	}
	network := networkOrder(b, gaps)
	for _, st := range network {
		if st != nil {
			over += st.Fault.Hold + st.Fault.Allowance
		}
	}
	window := ((b.Duration - over) / time.Duration(2*pairs)).Truncate(b.Tick)
	if window < minWindow {
		return nil, fmt.Errorf("plan: %s leaves %s per window for %d ABBA pairs (switches %s, warm-ups %s, chaos %s each): at least %s is needed",
			b.Duration, window, pairs, b.SwitchCost, b.Warmup, b.ChaosCost, minWindow)
	}
	chaos := chaosOrder(b, gaps)
	steps := []Step{{Kind: Warmup, Protocol: manifest.H2, Length: b.Warmup}}
	proto := manifest.H2
	for i := 0; i < 2*pairs; i++ {
		want := abba(i)
		if want != proto {
			steps = append(steps, Step{Kind: Switch, Protocol: want}, Step{Kind: Warmup, Protocol: want, Length: b.Warmup})
			proto = want
		}
		steps = append(steps, Step{Kind: Measure, Protocol: want, Length: window})
		// A gap's network fault runs first: its allowance and the chaos
		// step after it stand between the fault and the next window.
		if i%2 == 1 && i/2 < len(network) && network[i/2] != nil {
			steps = append(steps, *network[i/2])
		}
		if i%2 == 1 && i/2 < len(chaos) {
			steps = append(steps, chaos[i/2])
		}
	}
	return steps, nil
}

// abba is the protocol of window i: h2,h3,h3,h2, h2,h3,h3,h2, …
func abba(i int) string {
	if k := i % 4; k == 1 || k == 2 {
		return manifest.H3
	}
	return manifest.H2
}

// chaosOrder draws up to gaps chaos steps.
func chaosOrder(b Budget, gaps int) []Step {
	if len(b.Chaos) == 0 || len(b.Nodes) == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(b.Seed, b.Seed^0x9e3779b97f4a7c15))
	var out []Step
	for len(out) < gaps {
		kinds := append([]StepKind(nil), b.Chaos...)
		rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		for _, k := range kinds {
			if len(out) == gaps {
				break
			}
			out = append(out, Step{Kind: k, Node: b.Nodes[rng.IntN(len(b.Nodes))]})
		}
	}
	return out
}
