package agent

import (
	"maps"
	"slices"
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// TestAdmissionChecksWhatTheTwinJoins: a twin's admission runs the gates
// over what the twin joins (clusters, load assignments, secrets), not
// over the listeners the last build published, which that build
// checked. Here the published snapshot is given a capture listener the
// capture_listener gate refuses, as no build would publish it: the twins
// are admitted all the same, since nothing of them touches it. Walking
// every listener again made each admission a whole snapshot's check,
// most of its time.
func TestAdmissionChecksWhatTheTwinJoins(t *testing.T) {
	a, st, _ := quicControlsAgent(t, "node-a", Controls{})
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	out, _ := a.Current()
	i := slices.IndexFunc(out.Resources[resource.ListenerType], func(r types.Resource) bool {
		return r.(*listener.Listener).GetTransparent().GetValue()
	})
	if i < 0 {
		t.Fatal("control: node-a publishes no transparent capture listener")
	}
	broken := proto.Clone(out.Resources[resource.ListenerType][i]).(*listener.Listener)
	broken.Transparent = wrapperspb.Bool(false)
	next := *out
	next.Resources = maps.Clone(out.Resources)
	next.Resources[resource.ListenerType] = append(slices.Clone(out.Resources[resource.ListenerType][:i]), broken)
	next.Resources[resource.ListenerType] = append(next.Resources[resource.ListenerType], out.Resources[resource.ListenerType][i+1:]...)
	if err := validate.Check(next.Resources); err == nil {
		t.Fatal("control: the snapshot with a non-transparent capture listener passed the gates")
	}
	a.mu.Lock()
	a.current = &next
	a.mu.Unlock()

	var names []string
	for _, p := range dialledPairs(st, "node-a") {
		names = append(names, xdsnames.TwinCluster(p))
	}
	if len(names) == 0 {
		t.Fatal("control: node-a dials no pair")
	}
	if refused := a.admit(names); len(refused) != 0 {
		t.Fatalf("refused %v (config-gate: %v): the admission judged the listeners again", refused,
			testutil.ToFloat64(a.metrics.odcdsRefused.WithLabelValues(RefusedGate)))
	}
	for _, name := range names {
		if !twinServed(a, name) {
			t.Fatalf("%s not served", name)
		}
	}
}
