package run

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
	"github.com/aether-mesh/aether/soak/netfault"
)

// The network fault steps: each puts one fault on one node's link (the
// veth between the node and the cluster's bridge, both of its ends) for
// its hold, removes it, and waits out its recovery allowance.
const (
	// NetemFault: netem loss 1–5 %, delay with jitter, reordering and
	// duplication (on a kernel without netem, the loss and duplication
	// alone, by nftables: netfault.Impair).
	NetemFault StepKind = "net-netem"
	// LinkFlap: the bridge's end of the node's veth down, then up.
	LinkFlap StepKind = "net-link-flap"
	// Partition: the node cut off, every packet either way dropped (loss
	// 100 % on both ends).
	Partition StepKind = "net-partition"
)

// NetworkKinds are the network faults a schedule draws from.
func NetworkKinds() []StepKind { return []StepKind{NetemFault, LinkFlap, Partition} }

// IsNetwork says whether k is a network fault step.
func (k StepKind) IsNetwork() bool {
	switch k {
	case NetemFault, LinkFlap, Partition:
		return true
	}
	return false
}

// FaultKind is the manifest's name of a network fault kind.
func (k StepKind) FaultKind() string {
	switch k {
	case NetemFault:
		return manifest.FaultNetem
	case LinkFlap:
		return manifest.FaultLinkFlap
	case Partition:
		return manifest.FaultPartition
	}
	return ""
}

// Fault is one network fault as scheduled.
type Fault struct {
	// Hold is how long the fault stays on the link; Allowance is how long
	// its step runs on after the fault is removed, for the mesh to recover
	// before the next step.
	Hold, Allowance time.Duration
	// Netem is what the link does to its packets while it holds (netem and
	// partition steps).
	Netem netfault.Netem `json:",omitzero"`
}

// Holds are how long each network fault kind holds: a netem window of
// 4 s, a link down for 2 s, a partition of 3 s.
var Holds = map[StepKind]time.Duration{NetemFault: 4 * time.Second, LinkFlap: 2 * time.Second, Partition: 3 * time.Second}

// Bounds are what each network fault kind is held to, stated in the
// manifest (gates.network_faults) and graded from the probe log: the
// release's (grade.ReleaseFaultBounds). A failure bound is a time, the
// span times the share of a kind's probes that failed, so it holds alike
// for a kind probing one target every 100 ms and one probing thirty.
//
//   - netem: loss at most 5 %, delay at most 30 ms ± 15 ms for 4 s, 3 s
//     allowed after: a probe's handshake can lose a packet and retransmit
//     within its timeout, so few fail: at most 1 s of the 7.
//   - link flap: 2 s down, 4 s after. Every probe started while it is
//     down may fail (2 s), and those in flight when it comes back may
//     wait out a retransmission: at most 3 s.
//   - partition: 3 s of total loss, 5 s after: 3 s, and as long again in
//     flight or held by a backed-off retransmission: 6 s.
//
// Every kind must see each direct probe kind succeed within 3 s of the
// fault's removal: a new connection over a link back up needs a round
// trip, or one retransmission of a handshake packet lost at the edge.
func Bounds() map[string]manifest.FaultBound {
	return maps.Clone(grade.ReleaseFaultBounds)
}

// networkOrder draws the network faults of a schedule's gaps: with every
// = b.NetworkEvery (3 by default), gap i gets one when i mod every is
// every-1 (the third, sixth, … gap), or the last gap when there are fewer
// than every, so a soak of n gaps runs max(1, n/every) faults, bounded as
// the chaos steps are. The kinds come round in turn,
// each once before any repeats, the first round starting with netem, so
// even the shortest soak (the smoke, five gaps) grades a loss window; the
// node, the order after that and each netem's figures are drawn from the
// seed's own stream, so the process chaos a seed gave before network
// faults existed is unchanged.
func networkOrder(b Budget, gaps int) []*Step {
	if len(b.Network) == 0 || len(b.Nodes) == 0 || gaps == 0 {
		return nil
	}
	every := b.NetworkEvery
	if every <= 0 {
		every = 3
	}
	rng := rand.New(rand.NewPCG(b.Seed^0x6e657466, b.Seed^0xbf58476d1ce4e5b9))
	out := make([]*Step, gaps)
	var queue []StepKind
	for round := 0; ; round++ {
		next := -1
		for i := range gaps {
			if out[i] == nil && (i%every == every-1 || (gaps < every && i == gaps-1)) {
				next = i
				break
			}
		}
		if next < 0 {
			return out
		}
		if len(queue) == 0 {
			queue = append([]StepKind(nil), b.Network...)
			rng.Shuffle(len(queue), func(i, j int) { queue[i], queue[j] = queue[j], queue[i] })
			if round == 0 {
				for i, k := range queue {
					if k == NetemFault {
						queue[0], queue[i] = queue[i], queue[0]
					}
				}
			}
		}
		k := queue[0]
		queue = queue[1:]
		out[next] = &Step{Kind: k, Node: b.Nodes[rng.IntN(len(b.Nodes))], Fault: drawFault(rng, k)}
	}
}

// drawFault gives kind k its shape and, for netem, its figures: loss
// 1–5 % in steps of 0.5, delay 5–30 ms with jitter up to half of it,
// reordering 5–25 % and duplication 1–5 %.
func drawFault(rng *rand.Rand, k StepKind) Fault {
	f := Fault{Hold: Holds[k], Allowance: grade.ReleaseFaultBounds[k.FaultKind()].Allowance.Duration}
	switch k {
	case NetemFault:
		delay := time.Duration(5+rng.IntN(26)) * time.Millisecond
		f.Netem = netfault.Netem{
			LossPct: 1 + float64(rng.IntN(9))/2,
			Delay:   delay, Jitter: time.Duration(1+rng.IntN(int(delay/time.Millisecond)/2)) * time.Millisecond,
			ReorderPct:   float64(5 + rng.IntN(21)),
			DuplicatePct: float64(1 + rng.IntN(5)),
		}
	case Partition:
		f.Netem = netfault.Netem{LossPct: 100}
	}
	return f
}

// nodeLink is both ends of node n's uplink: its eth0 and the bridge's
// port for it.
func nodeLink(c *node.Cluster, n *node.Node) []netfault.Link {
	return []netfault.Link{{NS: n.NS, Name: "eth0"}, {NS: c.Bridge(), Name: fmt.Sprintf("n%d", n.Index)}}
}

// faultTimes are a network fault step's instants: the fault went on at
// Applied and came off at Removed; the step declared it for [start,
// start+Hold].
type faultTimes struct{ Applied, Removed time.Time }

// holdFault puts s's fault on links at start, holds it until start+Hold,
// removes it, and returns what was applied and when. The fault is removed
// whatever happens: on a failed application (netfault undoes its half)
// and when ctx ends during the hold.
func holdFault(ctx context.Context, s Step, links []netfault.Link, start time.Time) (string, faultTimes, error) {
	var ft faultTimes
	if s.Fault.Hold <= 0 {
		return "", ft, fmt.Errorf("network fault step %s has no hold", s.Kind)
	}
	var undo func() error
	var what string
	var err error
	switch s.Kind {
	case NetemFault, Partition:
		var applied netfault.Netem
		var engine string
		undo, applied, engine, err = netfault.Impair(s.Fault.Netem, links...)
		what = fmt.Sprintf("%s by %s", applied, engine)
		if err == nil && applied != s.Fault.Netem {
			what += fmt.Sprintf(" (drawn: %s; the kernel has no netem to delay or reorder)", s.Fault.Netem)
		}
	case LinkFlap:
		// The bridge's end: the node's eth0 loses its carrier and keeps
		// its routes (netfault.Down).
		undo, err = netfault.Down(links[len(links)-1])
		what = "link " + links[len(links)-1].String() + " down"
	default:
		return "", ft, fmt.Errorf("step %s is not a network fault", s.Kind)
	}
	ft.Applied = time.Now()
	if err != nil {
		return "", ft, err
	}
	held := sleepUntil(ctx, start.Add(s.Fault.Hold))
	uerr := undo()
	ft.Removed = time.Now()
	return what, ft, errors.Join(held, uerr)
}
