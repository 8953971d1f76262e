package agent

import (
	"bytes"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"google.golang.org/protobuf/proto"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// edits are the kinds of change a warm builder must follow, each applied to
// the registry State in place, in sequence.
var edits = []struct {
	name string
	do   func(t *testing.T, st *registry.State)
	// quiet edits may leave every resource as it was: a second UDP port
	// is not dialled (one port per transport), and a lone backend's
	// weight only matters to the redirect-mode fallback.
	quiet bool
}{
	{name: "endpoint added", do: func(t *testing.T, st *registry.State) { changes[0].do(st, 15) }},
	{name: "endpoint removed", do: func(t *testing.T, st *registry.State) { changes[0].do(st, 15) }},
	{name: "endpoint weight", do: func(t *testing.T, st *registry.State) { st.Endpoints[st.Services[20].Key()][1].Weight = 7 }},
	{name: "endpoint unready (route loses its healthy backend)", do: func(t *testing.T, st *registry.State) {
		for i := range st.Endpoints[st.Services[25].Key()] {
			st.Endpoints[st.Services[25].Key()][i].Ready = false
		}
	}},
	{name: "UDPRoute weight", do: func(t *testing.T, st *registry.State) { changes[2].do(st, 30) }, quiet: true},
	{name: "second UDP port", do: func(t *testing.T, st *registry.State) { changes[1].do(st, 35) }, quiet: true},
	{name: "UDP port gone (arm leaves)", do: func(t *testing.T, st *registry.State) {
		svc := &st.Services[10]
		svc.Ports = slices.DeleteFunc(slices.Clone(svc.Ports), func(p registry.ServicePort) bool { return p.Protocol == registry.ProtocolUDP })
	}},
	{name: "targetPort", do: func(t *testing.T, st *registry.State) { st.Services[12].Ports[0].TargetPort = 9100 }},
	{name: "ClusterIP", do: func(t *testing.T, st *registry.State) {
		st.Services[13].ClusterIP = netip.MustParseAddr("10.97.0.13")
	}},
	{name: "service added with a route", do: func(t *testing.T, st *registry.State) {
		addService(st, "svc-new", netip.MustParseAddr("10.97.1.1"), true)
	}},
	{name: "service removed", do: func(t *testing.T, st *registry.State) {
		k := st.Services[5].Key()
		st.Services = slices.Delete(st.Services, 5, 6)
		delete(st.Endpoints, k)
	}},
	{name: "route removed", do: func(t *testing.T, st *registry.State) { st.UDPRoutes = slices.Delete(st.UDPRoutes, 3, 4) }},
	{name: "conflicting route added", do: func(t *testing.T, st *registry.State) {
		// A later route claiming svc-00000's ClusterIP for another backend.
		st.UDPRoutes = append(st.UDPRoutes, registry.UDPRoute{Name: "zz-conflict", Namespace: "bench",
			ParentRefs: []registry.ParentRef{{Kind: "Service", Namespace: "bench", Name: "svc-00000"}},
			Rules:      []registry.UDPRouteRule{{BackendRefs: []registry.BackendRef{{Kind: "Service", Namespace: "bench", Name: "svc-00040"}}}}})
		st.Sort()
	}},
	{name: "conflicting route's rival removed (conflict clears)", do: func(t *testing.T, st *registry.State) {
		i := slices.IndexFunc(st.UDPRoutes, func(r registry.UDPRoute) bool { return r.Name == "svc-00000" })
		st.UDPRoutes = slices.Delete(st.UDPRoutes, i, i+1)
	}},
	{name: "pod added", do: func(t *testing.T, st *registry.State) {
		st.Pods = append(st.Pods, registry.Pod{Name: "pod-zz", Namespace: "bench", Node: "n1", IP: netip.MustParseAddr("10.244.1.200"),
			NetnsPath: "/run/netns/bench~pod-zz", Ready: true})
		st.Sort()
	}},
	{name: "pod netns moved", do: func(t *testing.T, st *registry.State) { st.Pods[3].NetnsPath = "/run/netns/moved" }},
	{name: "pod without netns", do: func(t *testing.T, st *registry.State) { st.Pods[4].NetnsPath = "" }},
	{name: "pod depends on two services only", do: func(t *testing.T, st *registry.State) {
		for i := range st.Pods {
			st.Pods[i].DependsOn = []registry.Key{{Namespace: "bench", Name: "svc-00015"}, {Namespace: "bench", Name: "svc-00016"}}
		}
	}},
	{name: "dependencies back to every service", do: func(t *testing.T, st *registry.State) {
		for i := range st.Pods {
			st.Pods[i].DependsOn = nil
		}
	}},
}

func addService(st *registry.State, name string, ip netip.Addr, route bool) {
	one := int32(1)
	svc := registry.Service{Name: name, Namespace: "bench", ClusterIP: ip,
		Ports: []registry.ServicePort{{Name: "d", Port: 53, TargetPort: 5353, Protocol: registry.ProtocolUDP}, {Name: "h", Port: 80, TargetPort: 8080, Protocol: registry.ProtocolTCP}}}
	st.Services = append(st.Services, svc)
	st.Endpoints[svc.Key()] = []registry.Endpoint{{Pod: name + "-0", IP: ip.Next(), Node: "n2", Ready: true, Weight: 1}}
	if route {
		st.UDPRoutes = append(st.UDPRoutes, registry.UDPRoute{Name: name, Namespace: "bench",
			ParentRefs: []registry.ParentRef{{Kind: "Service", Namespace: "bench", Name: name}},
			Rules:      []registry.UDPRouteRule{{BackendRefs: []registry.BackendRef{{Kind: "Service", Namespace: "bench", Name: name, Weight: &one}}}}})
	}
	st.Sort()
}

// TestIncrementalBuildEqualsFromScratch follows one warm builder through
// every kind of edit and compares each result with a cold builder's on the
// same State: the same resources and selection, every snapshot passing the
// gates. It also holds each build's Changes to their meaning (exactly the
// resources added, removed or changed in content) and checks that a build
// never alters an earlier, already published output.
func TestIncrementalBuildEqualsFromScratch(t *testing.T) {
	for _, mode := range []constants.CaptureMode{constants.CaptureTProxy, constants.CaptureRedirect} {
		t.Run(string(mode), func(t *testing.T) {
			st := benchState(50)
			warm := NewBuilder("n1", mode)
			prev, err := warm.Build(st, "v0")
			if err != nil {
				t.Fatal(err)
			}
			prevDump := dump(t, prev)
			for i, e := range edits {
				e.do(t, st)
				got, err := warm.Build(st, fmt.Sprintf("v%d", i+1))
				if err != nil {
					t.Fatalf("%s: incremental build: %v", e.name, err)
				}
				want, err := NewBuilder("n1", mode).Build(st, "scratch")
				if err != nil {
					t.Fatalf("%s: build from scratch: %v", e.name, err)
				}
				if err := validate.Check(got.Resources); err != nil {
					t.Fatalf("%s: incremental snapshot fails the gates: %v", e.name, err)
				}
				equalOutputs(t, e.name, got, want)
				if moved := changesFollowContent(t, e.name, prev, got); moved == 0 && !e.quiet && reflect.DeepEqual(prev.Selection, got.Selection) {
					t.Fatalf("%s: neither a resource nor the selection changed: the edit did not reach the output", e.name)
				}
				if d := dump(t, prev); !bytes.Equal(d, prevDump) {
					t.Fatalf("%s: building changed the previous (published) output", e.name)
				}
				prev, prevDump = got, dump(t, got)
			}
		})
	}
}

// dump is every resource's deterministic encoding, in output order.
func dump(t *testing.T, o *Output) []byte {
	t.Helper()
	var out []byte
	for _, typ := range typeURLs {
		for _, r := range o.Resources[typ] {
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, b...)
		}
	}
	return out
}

func byName(list []types.Resource) map[string]types.Resource {
	m := map[string]types.Resource{}
	for _, r := range list {
		m[cachev3.GetResourceName(r)] = r
	}
	return m
}

func equalOutputs(t *testing.T, edit string, got, want *Output) {
	t.Helper()
	for _, typ := range typeURLs {
		g, w := got.Resources[typ], want.Resources[typ]
		if len(g) != len(w) {
			t.Fatalf("%s: %d %s, from scratch %d", edit, len(g), typ, len(w))
		}
		for i := range g {
			if !proto.Equal(g[i], w[i]) {
				t.Fatalf("%s: %s #%d (%s) differs from scratch", edit, typ, i, cachev3.GetResourceName(g[i]))
			}
		}
	}
	if !reflect.DeepEqual(got.Selection, want.Selection) {
		t.Fatalf("%s: selection differs from scratch:\n got %+v\nwant %+v", edit, got.Selection, want.Selection)
	}
	if !slices.Equal(got.PodsWithoutNetns, want.PodsWithoutNetns) {
		t.Fatalf("%s: pods without netns %v, from scratch %v", edit, got.PodsWithoutNetns, want.PodsWithoutNetns)
	}
}

// changesFollowContent returns how many resources changed content, and
// holds cur's Changes to them: a resource is in the changes exactly when it
// was added, removed or its content changed (the cache's versions are a
// hash of the content, so this is also when the proxy sees one move).
func changesFollowContent(t *testing.T, edit string, prev, cur *Output) int {
	t.Helper()
	// A full build (a change of the node's dependencies starts over)
	// carries no changes: its whole output is published.
	full := cur.Full
	moved := 0
	for _, typ := range typeURLs {
		pr, cr := byName(prev.Resources[typ]), byName(cur.Resources[typ])
		ch := cur.Changes[typ]
		var names []string
		for n := range cr {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			old, ok := pr[n]
			changed := !ok || !proto.Equal(old, cr[n])
			r, listed := ch.Updated[n]
			if full {
				r, listed = cr[n], changed
			}
			if changed != listed {
				t.Fatalf("%s: %s %q: content changed=%v but in the changes=%v", edit, typ, n, changed, listed)
			}
			if listed && r != cr[n] {
				t.Fatalf("%s: %s %q: the changes hold another message than the output", edit, typ, n)
			}
			if changed {
				moved++
			}
		}
		var gone []string
		for n := range pr {
			if _, ok := cr[n]; !ok {
				gone = append(gone, n)
			}
		}
		sort.Strings(gone)
		removed := slices.Sorted(slices.Values(ch.Removed))
		if full {
			removed = gone
		}
		if !slices.Equal(gone, removed) {
			t.Fatalf("%s: %s removed %v, the changes say %v", edit, typ, gone, removed)
		}
		moved += len(gone)
		if !full && len(ch.Updated)+len(ch.Removed) != len(cr)-len(pr)+2*len(gone)+countChanged(pr, cr) {
			t.Fatalf("%s: %s changes name %d updated and %d removed, more than moved", edit, typ, len(ch.Updated), len(ch.Removed))
		}
	}
	return moved
}

// countChanged is how many resources in both prev and cur differ.
func countChanged(prev, cur map[string]types.Resource) int {
	n := 0
	for name, r := range cur {
		if old, ok := prev[name]; ok && !proto.Equal(old, r) {
			n++
		}
	}
	return n
}

// TestSlabsCompact: every regenerated service leaves its old input copies
// behind in the builder's slabs; past twice their size at the last full
// build the builder starts over, so a long-lived agent does not grow
// without bound, and the result is still the from-scratch one.
func TestSlabsCompact(t *testing.T) {
	st := benchState(50)
	b := NewBuilder("n1", constants.CaptureTProxy)
	if _, err := b.Build(st, "v0"); err != nil {
		t.Fatal(err)
	}
	peak, compacted := 0, false
	var out *Output
	for i := 0; i < 2000 && !compacted; i++ {
		changes[0].do(st, i%50/5*5)
		var err error
		if out, err = b.Build(st, "v"); err != nil {
			t.Fatal(err)
		}
		if n := b.slabSize(); n < peak {
			compacted = true
		} else {
			peak = n
		}
	}
	if !compacted {
		t.Fatalf("slabs grew to %d entries over 2000 changes without a compaction", peak)
	}
	want, err := NewBuilder("n1", constants.CaptureTProxy).Build(st, "scratch")
	if err != nil {
		t.Fatal(err)
	}
	equalOutputs(t, "after compaction", out, want)
}
