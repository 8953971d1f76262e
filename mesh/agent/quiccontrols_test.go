package agent

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	quicv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/quic/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// quicControlsAgent is node's agent on the east-west scenario with ctl,
// and what it logged.
func quicControlsAgent(t *testing.T, node string, ctl Controls) (*Agent, *registry.State, *bytes.Buffer) {
	t.Helper()
	st, err := registry.LoadScenarioFile(filepath.Join(scenarioDir, "eastwest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	h := testHTTPPath(t, st, node)
	h.EastWest = true
	var log bytes.Buffer
	a, err := New(Options{Node: node, Mode: constants.CaptureTProxy, HTTP: h, Controls: ctl, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	return a, st, &log
}

// quicChains are the R4 fields of every chain of every QUIC listener out
// holds, default chains included.
func quicChains(t *testing.T, a *Agent) []*quicv3.QuicDownstreamTransport {
	t.Helper()
	out, _ := a.Current()
	var qs []*quicv3.QuicDownstreamTransport
	for _, r := range out.Resources[resource.ListenerType] {
		l := r.(*listener.Listener)
		if !strings.HasPrefix(l.GetName(), xdsnames.QuicInboundListenerPrefix) {
			continue
		}
		for _, fc := range append(l.GetFilterChains(), l.GetDefaultFilterChain()) {
			q := &quicv3.QuicDownstreamTransport{}
			if err := fc.GetTransportSocket().GetTypedConfig().UnmarshalTo(q); err != nil {
				t.Fatal(err)
			}
			qs = append(qs, q)
		}
	}
	if len(qs) == 0 {
		t.Fatal("no QUIC chain published")
	}
	return qs
}

// Item: R4's gate refuses a chain with resumption on, and the agent does
// not publish it; the test-only control publishes it past the gate, and
// says so in its log.
func TestControlQUICResumption(t *testing.T) {
	a, st, _ := quicControlsAgent(t, "node-b", Controls{})
	if err := a.Apply(st); err != nil {
		t.Fatal(err)
	}
	for _, q := range quicChains(t, a) {
		if q.GetEnableResumption() == nil || q.GetEnableResumption().GetValue() || q.GetEnableEarlyData() == nil || q.GetEnableEarlyData().GetValue() {
			t.Fatalf("the mesh published a QUIC chain without both R4 fields stated false: %v", q)
		}
	}

	gated, st, _ := quicControlsAgent(t, "node-b", Controls{QUICResumption: true, keepGates: true})
	err := gated.Apply(st)
	if err == nil || !strings.Contains(err.Error(), validate.GateQuicR4) {
		t.Fatalf("Apply with resumption on and the gate kept = %v, want a %s refusal", err, validate.GateQuicR4)
	}
	if n := testutil.ToFloat64(gated.metrics.refused.WithLabelValues(validate.GateQuicR4)); n != 1 {
		t.Fatalf("refused{%s} = %v, want 1", validate.GateQuicR4, n)
	}
	if out, _ := gated.Current(); out != nil {
		t.Fatal("a snapshot with resumption on was published with the gate kept")
	}

	passed, st, log := quicControlsAgent(t, "node-b", Controls{QUICResumption: true})
	if err := passed.Apply(st); err != nil {
		t.Fatalf("the control's snapshot was refused: %v", err)
	}
	for _, q := range quicChains(t, passed) {
		if !q.GetEnableResumption().GetValue() || !q.GetEnableEarlyData().GetValue() {
			t.Fatalf("the control published a chain with %v", q)
		}
	}
	if !strings.Contains(log.String(), "TEST ONLY") || !strings.Contains(log.String(), validate.GateQuicR4) {
		t.Fatalf("the control's pass of the gate is not in the log:\n%s", log)
	}
}

// twinCluster admits web's twin of api on node-a and returns it.
func admittedTwin(t *testing.T, a *Agent) *cluster.Cluster {
	t.Helper()
	name := xdsnames.TwinCluster(xdsnames.Twin{Service: "api", Namespace: "demo", SA: "web", SANamespace: "demo"})
	if refused := a.admit([]string{name}); len(refused) != 0 {
		t.Fatalf("%s refused", name)
	}
	out, _ := a.Current()
	for _, r := range out.Resources[resource.ClusterType] {
		if cachev3.GetResourceName(r) == name {
			return r.(*cluster.Cluster)
		}
	}
	t.Fatalf("%s not published", name)
	return nil
}

// Per-downstream pooling on a twin: the gate refuses the next snapshot
// that holds it, unless the test-only control passes it (and logs so).
func TestControlTwinPoolPerDownstream(t *testing.T) {
	gated, st, _ := quicControlsAgent(t, "node-a", Controls{TwinPoolPerDownstream: true, keepGates: true})
	if err := gated.Apply(st); err != nil {
		t.Fatal(err)
	}
	// A twin admitted on demand joins the snapshot outside any build: the
	// gate refuses it there too, counted as a build's refusal is.
	name := xdsnames.TwinCluster(xdsnames.Twin{Service: "api", Namespace: "demo", SA: "web", SANamespace: "demo"})
	if refused := gated.admit([]string{name}); !slices.Equal(refused, []string{name}) {
		t.Fatalf("admit with the gate kept refused %v, want %s refused", refused, name)
	}
	if n := testutil.ToFloat64(gated.metrics.odcdsRefused.WithLabelValues(RefusedGate)); n != 1 {
		t.Fatalf("refused{%s} = %v, want 1", RefusedGate, n)
	}
	if n := testutil.ToFloat64(gated.metrics.refused.WithLabelValues(validate.GateTwinPooling)); n != 1 {
		t.Fatalf("snapshot_refused{%s} = %v, want 1", validate.GateTwinPooling, n)
	}

	passed, st, log := quicControlsAgent(t, "node-a", Controls{TwinPoolPerDownstream: true})
	if err := passed.Apply(st); err != nil {
		t.Fatal(err)
	}
	admittedTwin(t, passed)
	// Admitted on demand, the twin is published before any gate ran.
	if !strings.Contains(log.String(), "TEST ONLY") || !strings.Contains(log.String(), validate.GateTwinPooling) {
		t.Fatalf("the twin's admission past the gate is not in the log:\n%s", log)
	}
	if err := passed.Apply(st); err != nil {
		t.Fatalf("the control's snapshot was refused: %v", err)
	}
}

// A shared certificate: web's twin presents batch's SVID.
func TestControlTwinSharedCert(t *testing.T) {
	const batch = "spiffe://aether.test/ns/demo/sa/batch"
	for _, c := range []struct {
		ctl  Controls
		want string
	}{
		{Controls{}, "spiffe://aether.test/ns/demo/sa/web"},
		{Controls{TwinSharedCert: batch}, batch},
	} {
		a, st, _ := quicControlsAgent(t, "node-a", c.ctl)
		if err := a.Apply(st); err != nil {
			t.Fatal(err)
		}
		q := &quicv3.QuicUpstreamTransport{}
		if err := admittedTwin(t, a).GetTransportSocket().GetTypedConfig().UnmarshalTo(q); err != nil {
			t.Fatal(err)
		}
		if got := q.GetUpstreamTlsContext().GetCommonTlsContext().GetTlsCertificateSdsSecretConfigs()[0].GetName(); got != c.want {
			t.Fatalf("%+v: web's twin presents %s, want %s", c.ctl, got, c.want)
		}
	}
}

// A QUIC inbound binds its pod's own address, not transparent, so a pod
// app's own dial of a peer's 18008, which the capture diverts into the
// pod's netns, finds no socket; the control binds 0.0.0.0, transparent.
func TestQUICInboundBindsThePodAddress(t *testing.T) {
	for _, c := range []struct {
		ctl         Controls
		addr        string
		transparent bool
	}{
		{Controls{}, "10.244.2.10", false},
		{Controls{QUICInboundWildcard: true}, "0.0.0.0", true},
	} {
		a, st, _ := quicControlsAgent(t, "node-b", c.ctl)
		if err := a.Apply(st); err != nil {
			t.Fatal(err)
		}
		out, _ := a.Current()
		var l *listener.Listener
		for _, r := range out.Resources[resource.ListenerType] {
			if r.(*listener.Listener).GetName() == xdsnames.QuicInboundListener("demo", "api-0") {
				l = r.(*listener.Listener)
			}
		}
		if l == nil {
			t.Fatal("no QUIC inbound for api-0")
		}
		if got := l.GetAddress().GetSocketAddress().GetAddress(); got != c.addr || l.GetTransparent().GetValue() != c.transparent {
			t.Fatalf("%+v: api-0's QUIC inbound binds %s transparent=%v, want %s transparent=%v", c.ctl, got, l.GetTransparent().GetValue(), c.addr, c.transparent)
		}
	}
}
