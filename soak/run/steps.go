package run

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/soak/manifest"
)

// Span is one step as it ran: its tick-aligned start and end, and what
// happened.
type Span struct {
	Step
	Name   string    `json:"name"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Detail string    `json:"detail,omitempty"`
	// Ran is a network fault step's fault as it ran.
	Ran *FaultRun `json:"fault_run,omitempty"`
}

// FaultRun is a network fault as it ran: on which links, when it went on
// and came off, and what it did.
type FaultRun struct {
	Links   []string  `json:"links"`
	Applied time.Time `json:"applied"`
	Removed time.Time `json:"removed"`
	What    string    `json:"what"`
}

// clock is the run's tick grid.
type clock struct {
	start time.Time
	tick  time.Duration
}

// next is the first tick at or after t.
func (c clock) next(t time.Time) time.Time {
	d := t.Sub(c.start)
	k := (d + c.tick - 1) / c.tick
	return c.start.Add(k * c.tick)
}

// sleepUntil waits for t or the end of ctx.
func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// executor runs a schedule's steps on the cluster.
type executor struct {
	c       *node.Cluster
	clk     clock
	mesh    MeshNames
	args    func(transport string) []string
	load    *Load
	sampler *Sampler
	churn   *node.Pod
	churnTo string
	// prober records the network fault steps' direct probes, made every
	// probeEvery by direct's prober for the faulted node.
	prober     *Prober
	probeEvery time.Duration
	direct     func(node string) (*directProber, error)
	// prevEnd is where the last step ended: the next one starts there.
	prevEnd time.Time
}

// run executes one step from where the last one ended (the first from
// the next tick), so the steps tile the soak with no graded gap between
// them; a timed step ends exactly Length later, any other at the first
// tick after it is done.
func (e *executor) run(ctx context.Context, s Step, name string) (Span, error) {
	start := e.prevEnd
	if start.IsZero() {
		start = e.clk.next(time.Now())
	}
	if err := sleepUntil(ctx, start); err != nil {
		return Span{}, err
	}
	sp, err := e.do(ctx, s, name, start)
	e.prevEnd = sp.End
	return sp, err
}

func (e *executor) do(ctx context.Context, s Step, name string, start time.Time) (Span, error) {
	sp := Span{Step: s, Name: name, Start: start}
	var err error
	switch s.Kind {
	case Warmup, Measure:
		sp.End = start.Add(s.Length)
		return sp, sleepUntil(ctx, sp.End)
	case Switch:
		sp.Detail, err = e.restartAgents(ctx, e.c.Nodes(), s.Protocol)
	case AgentRestart:
		sp.Detail, err = e.restartAgents(ctx, []*node.Node{e.c.Node(s.Node)}, "")
	case ProxyHotRestart:
		sp.Detail, err = e.hotRestartProxy(ctx, e.c.Node(s.Node), false)
	case AgentInHotRestart:
		sp.Detail, err = e.hotRestartProxy(ctx, e.c.Node(s.Node), true)
	case PodChurn:
		sp.Detail, err = e.churnPod(ctx)
	case NetemFault, LinkFlap, Partition:
		return e.networkFault(ctx, sp)
	default:
		err = fmt.Errorf("unknown step %q", s.Kind)
	}
	if err != nil {
		return sp, fmt.Errorf("step %s (%s): %w", name, s.Kind, err)
	}
	sp.End = e.clk.next(time.Now().Add(time.Nanosecond))
	return sp, sleepUntil(ctx, sp.End)
}

// transport maps a window's protocol to the agents' --mesh-transport.
func transport(protocol string) string {
	if protocol == manifest.H3 {
		return "auto"
	}
	return "h2"
}

// restartAgents stops and starts the nodes' agents; with protocol set they
// come back with its --mesh-transport. It returns once every proxy serves
// the restarted agent's listeners.
func (e *executor) restartAgents(ctx context.Context, nodes []*node.Node, protocol string) (string, error) {
	began := time.Now()
	if protocol != "" {
		e.c.SetAgentArgs(e.args(transport(protocol)))
	}
	for _, n := range nodes {
		if err := e.c.StopAgent(n); err != nil {
			return "", err
		}
		if err := e.c.StartAgent(ctx, n); err != nil {
			return "", err
		}
	}
	for _, n := range nodes {
		if err := e.c.WaitProxyReady(ctx, n, 30*time.Second); err != nil {
			return "", err
		}
	}
	what := "agent restart"
	if protocol != "" {
		what = "agents restarted with --mesh-transport " + transport(protocol)
	}
	return fmt.Sprintf("%s on %s in %s", what, names(nodes), time.Since(began).Round(time.Millisecond)), nil
}

// hotRestartProxy hot-restarts node n's proxy; with agentToo, the node's
// agent is down when the handover starts and comes back half a second
// into it, while the new epoch waits for its configuration.
func (e *executor) hotRestartProxy(ctx context.Context, n *node.Node, agentToo bool) (string, error) {
	began := time.Now()
	old := n.ProxyPID()
	e.sampler.Replaced(old)
	if agentToo {
		if err := e.c.StopAgent(n); err != nil {
			return "", err
		}
	}
	done := make(chan error, 1)
	go func() { done <- e.c.HotRestartProxy(ctx, n) }()
	var agentErr error
	if agentToo {
		if agentErr = sleepUntil(ctx, time.Now().Add(500*time.Millisecond)); agentErr == nil {
			agentErr = e.c.StartAgent(ctx, n)
		}
	}
	if err := <-done; err != nil {
		return "", fmt.Errorf("hot restart of node %s's proxy: %w", n.Name, err)
	}
	if agentErr != nil {
		return "", agentErr
	}
	e.sampler.SetPID(n.Name, n.ProxyPID())
	what := "proxy hot restart"
	if agentToo {
		what += " with the agent restarting inside it"
	}
	return fmt.Sprintf("%s on %s (pid %d -> %d) in %s", what, n.Name, old, n.ProxyPID(), time.Since(began).Round(time.Millisecond)), nil
}

// churnFirstCalls is how many calls the churned pod makes before it
// leaves and after it returns.
const churnFirstCalls = 5

// churnPod takes the churn pod off its node (CNI DEL: its account leaves
// the node, the agent drops its pairs), brings it back (CNI ADD) and has it
// call its service again: those first calls need a new twin. Every call
// goes into the load generator's results.
func (e *executor) churnPod(ctx context.Context) (string, error) {
	p := e.churn
	if err := e.calls(ctx, p, e.churnTo, "before"); err != nil {
		return "", err
	}
	if err := e.c.DelPod(ctx, p); err != nil {
		return "", err
	}
	n := e.c.Node(p.Node)
	if err := e.c.WaitProxyReady(ctx, n, 30*time.Second); err != nil {
		return "", err
	}
	// Long enough for the agent to act on the pod's departure.
	if err := sleepUntil(ctx, time.Now().Add(2*time.Second)); err != nil {
		return "", err
	}
	if err := e.c.AddPod(ctx, p); err != nil {
		return "", err
	}
	if err := e.c.WaitProxyReady(ctx, n, 30*time.Second); err != nil {
		return "", err
	}
	if err := e.calls(ctx, p, e.churnTo, "after"); err != nil {
		return "", err
	}
	return fmt.Sprintf("pod %s/%s (account leaves node %s) removed and added back; %d calls to %s before and %d after", p.Namespace, p.Name, p.Node, churnFirstCalls, e.churnTo, churnFirstCalls), nil
}

// calls sends churnFirstCalls sequential requests from p to svc and
// records them as load-generator results.
func (e *executor) calls(ctx context.Context, p *node.Pod, svc, tag string) error {
	url, _, err := meshURL(e.c, p.Namespace, svc, "/churn/"+tag)
	if err != nil {
		return err
	}
	client := podClient(p, probeTimeout, false)
	for i := 0; i < churnFirstCalls; i++ {
		r := &vegeta.Result{Attack: "churn-" + p.Name, Seq: uint64(i), Method: http.MethodGet, URL: url, Timestamp: time.Now()}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Host = xdsnames.Authority(svc, p.Namespace, e.mesh.MeshDomain)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r.Code = uint16(resp.StatusCode)
		} else {
			r.Error = err.Error()
		}
		r.Latency = time.Since(r.Timestamp)
		e.load.Record(r)
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

func names(nodes []*node.Node) string {
	s := ""
	for i, n := range nodes {
		if i > 0 {
			s += ", "
		}
		s += n.Name
	}
	return s
}

// networkFault runs a network fault step: the direct probes start with
// it, the fault holds from its start for Hold, and the step runs on for
// Allowance after, so it ends on the tick grid at start+Hold+Allowance
// whatever the links took to change.
func (e *executor) networkFault(ctx context.Context, sp Span) (Span, error) {
	n := e.c.Node(sp.Node)
	if n == nil || sp.Fault.Hold <= 0 {
		return sp, fmt.Errorf("step %s (%s): no node %q or no fault", sp.Name, sp.Kind, sp.Node)
	}
	d, err := e.direct(n.Name)
	if err != nil {
		return sp, fmt.Errorf("step %s (%s): %w", sp.Name, sp.Kind, err)
	}
	pctx, stop := context.WithCancel(ctx)
	probed := make(chan struct{})
	go func() { e.prober.runDirect(pctx, d, DirectKinds, e.probeEvery); close(probed) }()
	defer func() { stop(); <-probed }()
	links := nodeLink(e.c, n)
	what, ft, err := holdFault(ctx, sp.Step, links, sp.Start)
	fr := &FaultRun{What: what, Applied: ft.Applied, Removed: ft.Removed}
	for _, l := range links {
		fr.Links = append(fr.Links, l.String())
	}
	sp.Ran = fr
	f := sp.Fault
	sp.Detail = fmt.Sprintf("%s on node %s's link (%s) for %s (on %s after the step began, off %s after its declared end); %s allowed to recover",
		what, n.Name, strings.Join(fr.Links, ", "), f.Hold, ft.Applied.Sub(sp.Start).Round(time.Millisecond),
		ft.Removed.Sub(sp.Start.Add(f.Hold)).Round(time.Millisecond), f.Allowance)
	if err != nil {
		return sp, fmt.Errorf("step %s (%s): %w", sp.Name, sp.Kind, err)
	}
	sp.End = sp.Start.Add(f.Hold + f.Allowance)
	return sp, sleepUntil(ctx, sp.End)
}
