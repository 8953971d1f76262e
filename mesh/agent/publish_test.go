package agent

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/mesh/registry"
)

// served is what the agent's caches hold, per type.
func served(a *Agent) map[resource.Type]map[string]types.Resource {
	m := map[resource.Type]map[string]types.Resource{}
	for i, typ := range typeURLs {
		m[typ] = a.caches[i].GetResources()
	}
	return m
}

// sameResources says where have (by name) differs from the lists in want.
func sameResources(have map[resource.Type]map[string]types.Resource, want map[resource.Type][]types.Resource) error {
	for _, typ := range typeURLs {
		w := byName(want[typ])
		if len(have[typ]) != len(w) {
			return fmt.Errorf("%s: %d served, want %d", typ, len(have[typ]), len(w))
		}
		names := make([]string, 0, len(w))
		for n := range w {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if !proto.Equal(have[typ][n], w[n]) {
				return fmt.Errorf("%s %q: served content differs", typ, n)
			}
		}
	}
	return nil
}

// applyChanges is a cache holding prev after out's changes, or out itself
// after a full build.
func applyChanges(prev map[resource.Type]map[string]types.Resource, out *Output) map[resource.Type]map[string]types.Resource {
	next := map[resource.Type]map[string]types.Resource{}
	for _, typ := range typeURLs {
		if out.Full {
			next[typ] = byName(out.Resources[typ])
			continue
		}
		m := map[string]types.Resource{}
		for n, r := range prev[typ] {
			m[n] = r
		}
		for n, r := range out.Changes[typ].Updated {
			m[n] = r
		}
		for _, n := range out.Changes[typ].Removed {
			delete(m, n)
		}
		next[typ] = m
	}
	return next
}

// TestRefusalForcesFullPublish: after a refused build the builder has moved
// on to a State that is not served, so the next build's changes are
// relative to it. The control shows that those changes alone, applied to
// what is served, would leave a wrong configuration (the refused edit's
// undo is not among them); the agent publishes the whole output instead,
// and what it serves is exactly the new output.
func TestRefusalForcesFullPublish(t *testing.T) {
	a := quietAgent(t, "node-a", "")
	st, err := registry.ParseScenario("two", readFixture(t, "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Apply(st); err != nil {
		t.Fatalf("control: the fixture must publish: %v", err)
	}
	good, _ := a.Current()
	before := served(a)
	if err := sameResources(before, good.Resources); err != nil {
		t.Fatalf("first publish: %v", err)
	}

	// The refused State carries a bad edit (an endpoint weight of 0 on
	// svc-b) and a good one (weight 3 on svc-a); the next State undoes
	// the bad one only. Relative to the refused build, svc-a did not
	// change, so the build's changes do not carry it.
	ka, kb := registry.Key{Namespace: "demo", Name: "svc-a"}, registry.Key{Namespace: "demo", Name: "svc-b"}
	if len(st.Endpoints[ka]) == 0 || len(st.Endpoints[kb]) == 0 {
		t.Fatal("control: the fixture's svc-a and svc-b have endpoints")
	}
	bOrig := slices.Clone(st.Endpoints[kb])
	st.Endpoints[kb] = slices.Clone(bOrig)
	st.Endpoints[kb][0].Weight = 0
	st.Endpoints[ka] = slices.Clone(st.Endpoints[ka])
	st.Endpoints[ka][0].Weight = 3
	if err := a.Apply(st); err == nil {
		t.Fatal("control: an endpoint weight of 0 must be refused")
	}
	if err := sameResources(served(a), good.Resources); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}

	st.Endpoints[kb] = bOrig
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	next, _ := a.Current()
	if next.Full {
		t.Fatal("control: the build after a gate refusal is incremental; a full one would not need the resync")
	}
	if err := sameResources(applyChanges(before, next), next.Resources); err == nil {
		t.Fatal("control: the build's own changes on top of what was served give the right configuration; the test shows nothing")
	}
	if err := sameResources(served(a), next.Resources); err != nil {
		t.Fatalf("after the refusal and a good build: %v", err)
	}

	// And once in step, incremental publishes follow.
	st.Endpoints[kb] = slices.Clone(bOrig)
	st.Endpoints[kb][0].Weight = 2
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	last, _ := a.Current()
	if last.Full || len(last.Changes[resource.EndpointType].Updated) != 1 {
		t.Fatalf("control: the last build is incremental and changes one load assignment (full %v, changes %+v)", last.Full, last.Changes)
	}
	if err := sameResources(served(a), last.Resources); err != nil {
		t.Fatalf("incremental publish: %v", err)
	}
}
