package proxy_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/agent/pairs"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/ondemand"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// pairRig is node-a's agent on a state dir and socket that outlive it, so
// that it can be restarted under a running proxy.
type pairRig struct {
	t        *testing.T
	sock     string
	stateDir string
	st       *registry.State
	a        *agent.Agent
	reg      *prometheus.Registry
	stop     func()
}

func newPairRig(t *testing.T) *pairRig {
	data, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "scenarios", "two-udp-services.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := registry.ParseScenario("two-udp-services.yaml", data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range st.Pods {
		st.Pods[i].NetnsPath = ""
	}
	// A second local pod, of another account, keeps the node's
	// dependency set while client-0 is away: only the pair's source
	// leaves, not every cluster.
	keeper := st.Pods[slices.IndexFunc(st.Pods, func(p registry.Pod) bool { return p.Name == "client-0" })]
	keeper.Name, keeper.ServiceAccount, keeper.IP = "keeper-0", "backend", netip.MustParseAddr("10.244.1.11")
	st.Pods = append(st.Pods, keeper)
	dir := t.TempDir()
	return &pairRig{t: t, sock: filepath.Join(dir, "xds.sock"), stateDir: filepath.Join(dir, "state"), st: st}
}

// start runs a fresh agent process-alike: a new Agent on the state dir,
// serving the socket; the previous one is stopped first.
func (r *pairRig) start(ctl agent.Controls) { r.startWindow(ctl, 0) }

// startWindow is start with a fetch window (0: the default).
func (r *pairRig) startWindow(ctl agent.Controls, window time.Duration) {
	r.t.Helper()
	if r.stop != nil {
		r.stop()
		r.a.Flush()
	}
	r.reg = prometheus.NewRegistry()
	a, err := agent.New(agent.Options{Node: "node-a", Mode: constants.CaptureTProxy, StateDir: r.stateDir,
		Logger: quietLog(), Registerer: r.reg, Controls: ctl, PairFetchWindow: window})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(a.Flush)
	if err := a.Apply(r.st); err != nil {
		r.t.Fatal(err)
	}
	lis, err := agent.Listen("unix://" + r.sock)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gs := a.NewGRPCServer(ctx)
	go func() { _ = gs.Serve(lis) }()
	r.a, r.stop = a, func() { gs.Stop(); cancel() }
	r.t.Cleanup(r.stop)
}

// gauge reads an unlabelled agent gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("agent gauge %s not found", name)
	return 0
}

func (r *pairRig) apply(st *registry.State) {
	r.t.Helper()
	if err := r.a.Apply(st); err != nil {
		r.t.Fatal(err)
	}
}

func (r *pairRig) pair(twin string) *pairs.Status {
	for _, p := range r.a.Pairs() {
		if p.Twin == twin {
			return &p
		}
	}
	return nil
}

func withoutClient(st *registry.State) *registry.State {
	next := *st
	next.Pods = slices.DeleteFunc(slices.Clone(st.Pods), func(p registry.Pod) bool { return p.Name == "client-0" })
	return &next
}

func runPairProxy(t *testing.T, target string) *proxy.Proxy {
	p := proxy.New(proxy.Options{Node: "node-a", XDS: target, Log: quietLog()})
	p.OnDemand().Timeout = 300 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	<-p.ListenersRequested()
	return p
}

// TestPairLifecycleAgainstTheProxy runs the pair rules against the real
// proxy's on-demand CDS. A twin fetched on demand is persisted; a
// restarted agent carries it over and the proxy's fresh stream
// re-subscribes it (evidence: subscribed). Its source leaving withdraws
// the twin and leaves the pair dormant; its return puts the twin back in
// the proxy with no request, and the next request finds it at once.
// Control (pre-#1036, the pair dropped on removal): after the return the
// proxy never asks again, since it holds the subscription, and the
// request waits out the on-demand timeout (503 NC at the router).
func TestPairLifecycleAgainstTheProxy(t *testing.T) {
	twin := xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "client", SANamespace: "demo"})
	for _, c := range []struct {
		name string
		ctl  agent.Controls
	}{{"subject", agent.Controls{}}, {"control: drop on removal", agent.Controls{DropPairOnRemoval: true}}} {
		t.Run(c.name, func(t *testing.T) {
			r := newPairRig(t)
			r.start(c.ctl)
			p := runPairProxy(t, "unix://"+r.sock)
			ctx := context.Background()
			if err := p.OnDemand().Await(ctx, twin); err != nil {
				t.Fatalf("Await(%s) = %v", twin, err)
			}

			r.start(c.ctl) // the agent restarts under the proxy
			waitFor(t, "the fresh stream to re-subscribe "+twin, func() bool {
				s := r.pair(twin)
				return s != nil && s.Evidence == pairs.EvidenceSubscribed
			})
			if p.Active(twin) == nil {
				t.Fatalf("%s lost across the agent restart", twin)
			}

			r.apply(withoutClient(r.st))
			waitFor(t, twin+" withdrawn from the proxy", func() bool { return p.Active(twin) == nil })
			r.apply(r.st)
			if c.ctl.DropPairOnRemoval {
				if s := r.pair(twin); s != nil {
					t.Fatalf("control kept the pair: %+v", s)
				}
				if err := p.OnDemand().Await(ctx, twin); !errors.Is(err, ondemand.ErrTimeout) {
					t.Fatalf("control: Await(%s) after the return = %v, want ErrTimeout (the proxy does not ask again)", twin, err)
				}
				return
			}
			waitFor(t, twin+" back in the proxy with no request", func() bool { return p.Active(twin) != nil })
			if err := p.OnDemand().Await(ctx, twin); err != nil {
				t.Fatalf("Await(%s) after the return = %v", twin, err)
			}
			if s := r.pair(twin); s == nil || s.State != pairs.Live {
				t.Fatalf("pair after the return = %+v, want live", s)
			}
			if n := counter(t, r.reg, "aether_agent_pairs_admitted_total", "", ""); n != 0 {
				t.Fatalf("restarted agent admitted %v pairs, want 0: carried over, re-subscribed, republished", n)
			}
		})
	}
}

// TestFetchWindowAgainstTheProxy: an agent restarted under a proxy that
// re-subscribes its twin keeps the pair past the fetch window, and the
// next request finds the twin. Control (the pre-#1073 rule, which counts
// only fetches since start): the re-subscribed twin is pruned at the
// window's end, the proxy, still subscribed, never asks again, and the
// request waits out the on-demand timeout (503 NC at the router); a twin
// first fetched after the restart is kept.
func TestFetchWindowAgainstTheProxy(t *testing.T) {
	twin := xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "client", SANamespace: "demo"})
	fetched := xdsnames.TwinCluster(xdsnames.Twin{Service: "svc-a", Namespace: "demo", SA: "backend", SANamespace: "demo"})
	for _, c := range []struct {
		name string
		ctl  agent.Controls
	}{{"subject", agent.Controls{}}, {"control: prune unfetched since start", agent.Controls{PruneUnfetchedSinceStart: true}}} {
		t.Run(c.name, func(t *testing.T) {
			r := newPairRig(t)
			r.start(c.ctl)
			p := runPairProxy(t, "unix://"+r.sock)
			ctx := context.Background()
			if err := p.OnDemand().Await(ctx, twin); err != nil {
				t.Fatalf("Await(%s) = %v", twin, err)
			}
			r.startWindow(c.ctl, time.Second)
			waitFor(t, "the fresh stream to re-subscribe "+twin, func() bool {
				s := r.pair(twin)
				return s != nil && s.Evidence == pairs.EvidenceSubscribed
			})
			if err := p.OnDemand().Await(ctx, fetched); err != nil {
				t.Fatalf("Await(%s) = %v", fetched, err)
			}
			waitFor(t, "the fetch window to end", func() bool {
				return gauge(t, r.reg, "aether_agent_pairs_fetch_window_open") == 0
			})
			if c.ctl.PruneUnfetchedSinceStart {
				waitFor(t, twin+" withdrawn from the proxy", func() bool { return p.Active(twin) == nil })
				if err := p.OnDemand().Await(ctx, twin); !errors.Is(err, ondemand.ErrTimeout) || r.pair(twin) != nil {
					t.Fatalf("control: Await(%s) = %v, pair %+v; want ErrTimeout and the pair pruned", twin, err, r.pair(twin))
				}
				if r.pair(fetched) == nil || p.Active(fetched) == nil {
					t.Fatalf("control pruned %s, fetched since start", fetched)
				}
				return
			}
			if err := p.OnDemand().Await(ctx, twin); err != nil || r.pair(twin) == nil {
				t.Fatalf("Await(%s) after the window = %v, pair %+v; want found and kept", twin, err, r.pair(twin))
			}
		})
	}
}

// TestLastPodLeavesAndReturns: when a node's last pod leaves, every EDS
// cluster goes and the proxy unsubscribes their load assignments; when a
// pod returns, the clusters come back and warm again. Before, the names
// stayed subscribed with nothing left to hold them: the returned
// assignments were dropped for want of a cluster, and the clusters, whose
// names counted as subscribed already, sent no request and never warmed.
func TestLastPodLeavesAndReturns(t *testing.T) {
	const base = "udp:svc-a.demo"
	r := newPairRig(t)
	r.start(agent.Controls{})
	p := runPairProxy(t, "unix://"+r.sock)
	waitFor(t, base+" active", func() bool { return p.Active(base) != nil })

	empty := *r.st
	empty.Pods = slices.DeleteFunc(slices.Clone(r.st.Pods), func(p registry.Pod) bool { return p.Node == "node-a" })
	r.apply(&empty)
	waitFor(t, base+" gone with the node's last pod", func() bool { return p.Active(base) == nil })

	r.apply(r.st)
	waitFor(t, base+" active again once a pod returns", func() bool { return p.Active(base) != nil })
}
