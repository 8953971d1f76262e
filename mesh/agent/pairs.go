package agent

import (
	"maps"
	"slices"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/aether-mesh/aether/mesh/agent/pairs"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// The agent's side of the pair lifecycle (package pairs): what it tells
// the set and when. A call that must agree with what is published (a
// fresh stream's prunes, a build's settle, the fetch window's rebuild) is
// made with a.mu held, then the set's own lock: that order, never the
// other.

// newPairs is the set opts configure, the state dir's pairs carried over.
func newPairs(opts Options) (*pairs.Set, error) {
	return pairs.New(pairs.Options{StateDir: opts.StateDir, Logger: opts.Logger, Registerer: opts.Registerer,
		ProxyMetricsURL: opts.ProxyMetricsURL, ProxyMetricsInterval: opts.ProxyMetricsInterval,
		DropOnRemoval: opts.Controls.DropPairOnRemoval, PruneUnfetchedSinceStart: opts.Controls.PruneUnfetchedSinceStart})
}

// cdsRequest tells the set of a CDS request, on the stream's loop; a.mu
// is not held. For a stream's first request it is taken: a fresh
// stream's prune of a dormant pair must not fall between a build's
// overlay, which may republish that pair's twin, and its settle, or the
// twin would be served with no pair to withdraw it. A later request
// prunes nothing and is told without it: an admission holds a.mu while
// it runs (odcds.go), and the loop must not wait on it.
func (a *Agent) cdsRequest(stream pairs.StreamID, req *discovery.DeltaDiscoveryRequest) {
	if a.pairs.LaterRequest(stream, req) {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pairs.Request(stream, req)
}

// settlePairs moves each pair to the state the published registry view
// gives it; a.mu is held. A pair is away when its source account left
// the node or its destination left the dependency set.
func (a *Agent) settlePairs() {
	a.pairs.Settle(func(t xdsnames.Twin) bool {
		switch twinRefusal(a.state, a.opts.Node, a.opts.HTTP, t) {
		case RefusedNoLocalPod, RefusedNotDependency, RefusedUnknownDestination:
			return true
		}
		return false
	})
}

// endFetchWindow ends the pair fetch window, on its timer's goroutine,
// which nothing waits on: the window is over once its prunes are judged.
func (a *Agent) endFetchWindow() {
	a.mu.Lock()
	if a.pairs.EndFetchWindow() && a.last != nil {
		// The same registry view again: the build removes the pruned
		// twins, and nothing else moves.
		_ = a.applyLocked(a.last)
	}
	a.mu.Unlock()
	a.pairs.FetchWindowEnded()
}

// Flush waits until every on-demand name being judged is judged, every
// change to the QUIC pairs made so far is on disk (or failed, and was
// logged) and every prune is judged: an agent stopping calls it last.
func (a *Agent) Flush() {
	// A judgment under way may still admit a pair.
	a.judging.running.Wait()
	a.pairs.Flush()
}

// Pairs lists the recorded pairs, sorted by twin name.
func (a *Agent) Pairs() []pairs.Status { return a.pairs.Status() }

// Counts returns the pair counters.
func (a *Agent) Counts() pairs.Counts { return a.pairs.Counts() }

// withoutUnpairedTwins is a restored snapshot's resources less the twins
// of pairs not recorded live: a twin the previous agent served but did
// not persist admits nothing, and a proxy holding it is told it is gone
// (#1033).
func (a *Agent) withoutUnpairedTwins(res map[string][]types.Resource) map[string][]types.Resource {
	out := maps.Clone(res)
	for _, typ := range []string{resource.ClusterType, resource.EndpointType} {
		out[typ] = slices.DeleteFunc(slices.Clone(res[typ]), func(r types.Resource) bool {
			t, err := xdsnames.ParseTwin(cache.GetResourceName(r))
			return err == nil && !a.pairs.Live(t)
		})
	}
	return out
}
