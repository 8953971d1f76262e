package agent

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/aether-mesh/aether/mesh/agent/validate"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// benchState is the shape: n services with 3 ports each, 20% of the
// ports UDP (so 60% of the services have a UDP port and a UDPRoute to
// themselves), two ready endpoints per service on another node, and 50 pods
// on the node under test.
func benchState(n int) *registry.State {
	st := &registry.State{Nodes: []registry.Node{{Name: "n1"}, {Name: "n2"}}, Endpoints: map[registry.Key][]registry.Endpoint{}}
	for p := 0; p < 50; p++ {
		st.Pods = append(st.Pods, registry.Pod{Name: fmt.Sprintf("pod-%02d", p), Namespace: "bench", Node: "n1", ServiceAccount: "default",
			IP: netip.AddrFrom4([4]byte{10, 244, 1, byte(p + 1)}), NetnsPath: fmt.Sprintf("/run/netns/bench~pod-%02d", p), Ready: true})
	}
	one := int32(1)
	for i := 0; i < n; i++ {
		svc := registry.Service{Name: fmt.Sprintf("svc-%05d", i), Namespace: "bench",
			ClusterIP: netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})}
		udp := false
		for k := 0; k < 3; k++ {
			proto := registry.ProtocolTCP
			if (i*3+k)%5 == 0 {
				proto, udp = registry.ProtocolUDP, true
			}
			svc.Ports = append(svc.Ports, registry.ServicePort{Name: fmt.Sprintf("p%d", k), Port: uint16(8000 + k), TargetPort: uint16(9000 + k), Protocol: proto})
		}
		st.Services = append(st.Services, svc)
		k := svc.Key()
		st.Endpoints[k] = []registry.Endpoint{
			{Pod: svc.Name + "-0", IP: netip.AddrFrom4([4]byte{10, 245, byte(i >> 8), byte(i)}), Node: "n2", Ready: true, Weight: 1},
			{Pod: svc.Name + "-1", IP: netip.AddrFrom4([4]byte{10, 246, byte(i >> 8), byte(i)}), Node: "n2", Ready: true, Weight: 1},
		}
		if udp {
			st.UDPRoutes = append(st.UDPRoutes, registry.UDPRoute{Name: svc.Name, Namespace: "bench",
				ParentRefs: []registry.ParentRef{{Kind: "Service", Namespace: "bench", Name: svc.Name}},
				Rules:      []registry.UDPRouteRule{{BackendRefs: []registry.BackendRef{{Kind: "Service", Namespace: "bench", Name: svc.Name, Weight: &one}}}}})
		}
	}
	st.Sort()
	return st
}

// BenchmarkSnapshotBuild is a full build from a cold builder. Targets, read
// side by side from one run: services=10000 costs at most 12x services=1000.
func BenchmarkSnapshotBuild(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		st := benchState(n)
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := NewBuilder("n1", constants.CaptureTProxy).Build(st, "v1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// change is one real one-service edit of a benchState, made in place on
// the registry State the way a source's next State differs from its last.
// Applied twice it restores the state, so a benchmark can alternate.
type change func(st *registry.State, i int)

var changes = []struct {
	kind string
	do   change
}{
	// endpoint: a backend pod of service i appears (or goes).
	{"endpoint", func(st *registry.State, i int) {
		k := st.Services[i].Key()
		eps := st.Endpoints[k]
		if len(eps) == 2 {
			st.Endpoints[k] = append(slices.Clip(eps), registry.Endpoint{Pod: k.Name + "-2",
				IP: netip.AddrFrom4([4]byte{10, 247, byte(i >> 8), byte(i)}), Node: "n2", Ready: true, Weight: 1})
		} else {
			st.Endpoints[k] = eps[:2:2]
		}
	}},
	// port: service i gains (or loses) a second UDP port; its cluster's
	// application port does not move, its CLA and chain stay.
	{"port", func(st *registry.State, i int) {
		svc := &st.Services[i]
		if len(svc.Ports) == 3 {
			svc.Ports = append(slices.Clip(svc.Ports), registry.ServicePort{Name: "extra", Port: 9999, TargetPort: 9999, Protocol: registry.ProtocolUDP})
		} else {
			svc.Ports = svc.Ports[:3:3]
		}
	}},
	// weight: the UDPRoute of service i changes its backend's weight.
	{"route-weight", func(st *registry.State, i int) {
		k := st.Services[i].Key()
		for ri := range st.UDPRoutes {
			if r := &st.UDPRoutes[ri]; r.Key() == k {
				w := *r.Rules[0].BackendRefs[0].Weight%2 + 1
				r.Rules[0].BackendRefs[0].Weight = &w
				return
			}
		}
		panic("service has no route: " + k.String())
	}},
}

// changedService picks the service the n-th change edits: spread over the
// mesh, always one with a UDP port and a UDPRoute.
func changedService(n int) int { return (n * 7919) % 10000 / 5 * 5 }

// BenchmarkOneServiceChange rebuilds after one service changed, on a warm
// builder, the change moving across the mesh from one iteration to the
// next. Target for kind=endpoint (the common change): at most 5% of
// BenchmarkSnapshotBuild/services=10000 in the same run.
func BenchmarkOneServiceChange(b *testing.B) {
	for _, c := range changes {
		b.Run("kind="+c.kind, func(b *testing.B) {
			st := benchState(10000)
			bld := NewBuilder("n1", constants.CaptureTProxy)
			if _, err := bld.Build(st, "v0"); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				// Each service is changed twice in a row (there and back),
				// so every build sees a real edit.
				c.do(st, changedService(n/2))
				n++
				if _, err := bld.Build(st, "v1"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGates is the gate cost on the 1,000-service snapshot, reported
// beside the build it guards; it is not part of the build targets.
func BenchmarkGates(b *testing.B) {
	out, err := NewBuilder("n1", constants.CaptureTProxy).Build(benchState(1000), "v1")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := validate.Check(out.Resources); err != nil {
			b.Fatal(err)
		}
	}
}

// TestBenchStatePassesGates keeps the benchmark honest: what it builds is a
// publishable snapshot of the stated shape.
func TestBenchStatePassesGates(t *testing.T) {
	out, err := NewBuilder("n1", constants.CaptureTProxy).Build(benchState(100), "v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := validate.Check(out.Resources); err != nil {
		t.Fatal(err)
	}
	if got := len(out.Resources["type.googleapis.com/envoy.config.listener.v3.Listener"]); got != 100 {
		t.Fatalf("listeners = %d, want 50 pods x 2", got)
	}
	if got := len(out.Selection.Arms); got != 60 {
		t.Fatalf("UDP arms = %d, want 60 (60%% of services have a UDP port)", got)
	}
}
