// Package bench is the side-by-side benchmark on the embedded netns
// cluster (rigs/node, the eastwest scenario, web-0 -> api): the same load
// through the direct path, the mesh (h2 between the proxies, the HTTP/3
// twins, L4 TCP and plaintext UDP on 18082) and two real peers from
// Debian's packages (HAProxy and nginx, a two-hop mTLS mesh on the same
// nodes with the mesh's own SVIDs), visited in ABBA order. h2load drives
// the HTTP rows in Istio's shape (HTTP/1.1, 1 KB payloads, 1,000 rps over 4
// connections, then a closed-loop run), iperf3 the stream rows; each
// proxy's CPU and RSS come from /proc. reports/cmd/aether-bench writes the
// report.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
	"github.com/aether-mesh/aether/rigs/results"
)

// The scenario's names the benchmark uses (fixtures/scenarios/eastwest.yaml).
const (
	namespace   = "demo"
	sourcePod   = "web-0"
	sourceSA    = "web"
	destService = "api"
	destPod     = "api-0"
	destSA      = "api"
	destPort    = 7080
	// streamService is the scenario's plaintext UDP service, re-pointed
	// at an iperf3 server (TCP and UDP on streamPort) once the cluster is
	// up, so its backend, bound at bring-up, does not hold the port.
	streamService = "dgram"
	streamPod     = "dgram-0"
	streamPort    = 5201

	trustDomain = "aether.test"
	meshDomain  = "mesh.test"
)

// The peers' ports, in the node namespaces.
var peerPorts = map[Peer][2]uint16{HAProxy: {19080, 19443}, Nginx: {19081, 19444}}

// Config is one run.
type Config struct {
	Scenario string
	// Out is the run's folder (reports/bench/<run>).
	Out string
	Run string
	// Conns and RPS are the paced load; Paced and Closed the lengths of
	// the paced and closed-loop runs of each visit, Stream of each iperf3
	// run.
	Conns, RPS     int
	Paced, Closed  time.Duration
	Stream         time.Duration
	Payload        int
	UDPLen         int
	Threads        int
	Bin            node.Binaries
	Logf           func(string, ...any)
	SkipInstall    bool
	KeepClusterDir bool
	// Verbose passes Logf to the cluster too, which narrates its bring-up.
	Verbose bool
	// Scale is the scale curves' plan, run after the rows; nil skips them.
	Scale *ScalePlan
}

// Defaults are the method's defaults: Istio's load, sized so the rows
// take about five minutes on two cores, and the scale curves about five
// more.
func Defaults() Config {
	plan := DefaultScalePlan()
	return Config{Conns: 4, RPS: 1000, Paced: 15 * time.Second, Closed: 6 * time.Second,
		Stream: 5 * time.Second, Payload: 1024, UDPLen: 1400, Threads: 2, Scale: &plan}
}

// rowSpec is one path and how to drive it.
type rowSpec struct {
	name, path string
	kind       Kind
	// transport is the agents' --mesh-transport the row needs ("" any).
	transport string
	peer      Peer
	mesh      bool
}

var rowSpecs = []rowSpec{
	{name: "direct", kind: KindHTTP, path: "web-0 -> api-0:7080, no proxy"},
	{name: "mesh-h2", kind: KindHTTP, transport: "h2", mesh: true, path: "web-0 -> api VIP:18081 -> proxy (node-a) == h2 mTLS ==> proxy (node-b) -> api-0"},
	{name: "tcp-direct", kind: KindTCP, path: "iperf3 web-0 -> dgram-0:5201"},
	{name: "tcp-mesh", kind: KindTCP, mesh: true, path: "iperf3 web-0 -> dgram VIP:18082 (L4 TCP) -> dgram-0:5201"},
	{name: "udp-direct", kind: KindUDP, path: "iperf3 -u web-0 -> dgram-0:5201"},
	{name: "udp-mesh", kind: KindUDP, mesh: true, path: "iperf3 -u web-0 -> dgram VIP:18082 (plaintext UDP) -> dgram-0:5201"},
	{name: "mesh-h3", kind: KindHTTP, transport: "auto", mesh: true, path: "web-0 -> api VIP:18081 -> proxy (node-a) == HTTP/3 twin, QUIC mTLS ==> proxy (node-b) -> api-0"},
	{name: "haproxy", kind: KindHTTP, peer: HAProxy, path: "web-0 -> HAProxy (node-a) == h2 mTLS ==> HAProxy (node-b) -> api-0"},
	{name: "nginx", kind: KindHTTP, peer: Nginx, path: "web-0 -> nginx (node-a) == HTTP/1.1 mTLS (proxy_ssl) ==> nginx (node-b) -> api-0"},
}

// proxyProc is a proxy the benchmark reads /proc for.
type proxyProc struct {
	name, node string
	pid        func() int
}

// acc accumulates a row's visits.
type acc struct {
	spec           rowSpec
	visits         int
	paced, closed  httpAcc
	streams        []StreamResult
	cpu, closedCPU map[string]*CPUSample
	rss            map[string]int64
	procs          map[string]int
	proxies        []proxyProc
	// witness is how far the row's witness counter rose, witnessSel
	// which counter it is.
	witness    float64
	witnessSel string
}

type httpAcc struct {
	lat           []timeDur
	requests, bad int
	seconds       float64
	visitP50      []float64
}

type timeDur = time.Duration

type runner struct {
	cfg     Config
	c       *node.Cluster
	src     *node.Pod
	a, b    *node.Node
	agent   func(string) []string
	current string
	payload string
	dir     string
	peers   map[Peer][]*exec.Cmd
	iperf   *exec.Cmd
}

// Run runs the benchmark and returns its report (not yet written).
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.Conns < 1 || cfg.RPS < 1 || cfg.Paced < time.Second || cfg.Closed < time.Second || cfg.Stream < time.Second {
		return nil, fmt.Errorf("bench config: conns %d, rps %d, paced %s, closed %s, stream %s: all must be positive, the durations at least 1s", cfg.Conns, cfg.RPS, cfg.Paced, cfg.Closed, cfg.Stream)
	}
	if cfg.Scale != nil {
		if err := cfg.Scale.Validate(); err != nil {
			return nil, err
		}
	}
	if !cfg.SkipInstall {
		if err := Install(ctx, Tools, cfg.Logf); err != nil {
			return nil, err
		}
	} else if m := Missing(Tools); len(m) > 0 {
		return nil, fmt.Errorf("missing %s (run without -skip-install to install them)", programs(m))
	}
	rep = &Report{Run: cfg.Run, Start: time.Now().UTC(), CPUs: runtime.NumCPU(),
		Method: Method{Generator: "h2load --h1", Conns: cfg.Conns, RPS: cfg.RPS, PacedSeconds: cfg.Paced.Seconds(),
			ClosedSeconds: cfg.Closed.Seconds(), PayloadBytes: cfg.Payload, StreamTool: "iperf3",
			StreamSeconds: cfg.Stream.Seconds(), UDPLen: cfg.UDPLen, Threads: cfg.Threads}}
	rep.Tools = Versions(ctx, Tools)
	if rep.LoadBefore, err = LoadAverage("/proc"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	dir, err := os.MkdirTemp("", "aether-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if !cfg.KeepClusterDir {
		defer os.RemoveAll(dir)
	}
	r := &runner{cfg: cfg, dir: dir, peers: map[Peer][]*exec.Cmd{}}
	r.agent = func(t string) []string {
		return []string{"--trust-domain", trustDomain, "--mesh-domain", meshDomain,
			"--ca-dir", filepath.Join(dir, "ca"), "--access-log-dir", filepath.Join(dir, "access"),
			"--upstream-cert", "per-source", "--mesh-transport", t}
	}
	if err := os.MkdirAll(filepath.Join(dir, "access"), 0o755); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	r.payload = filepath.Join(dir, "payload")
	if err := os.WriteFile(r.payload, bytes.Repeat([]byte("a"), cfg.Payload), 0o644); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	clusterLog := func(string, ...any) {}
	if cfg.Verbose {
		clusterLog = cfg.Logf
	}
	cfg.Logf("bringing up the netns cluster (%s)", filepath.Base(cfg.Scenario))
	r.current = "h2"
	r.c, err = node.Up(ctx, node.Config{Scenario: cfg.Scenario, Mode: constants.CaptureTProxy, RunDir: filepath.Join(dir, "cluster"),
		Bin: cfg.Bin, Logf: clusterLog, AgentArgs: r.agent(r.current)})
	if err != nil {
		return nil, fmt.Errorf("failed to bring up the bench cluster: %w", err)
	}
	defer func() {
		r.stopAll()
		if cerr := r.c.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	rep.Build = results.Stamp(r.c.BinaryHashes())
	if err := r.setup(ctx); err != nil {
		return nil, err
	}
	names := make([]string, len(rowSpecs))
	accs := map[string]*acc{}
	for i, s := range rowSpecs {
		names[i] = s.name
		accs[s.name] = &acc{spec: s, cpu: map[string]*CPUSample{}, closedCPU: map[string]*CPUSample{},
			rss: map[string]int64{}, procs: map[string]int{}, proxies: r.proxiesOf(s)}
	}
	if rep.Order, err = ABBA(names); err != nil {
		return nil, err
	}
	for i, name := range rep.Order {
		a := accs[name]
		cfg.Logf("[%d/%d] %s", i+1, len(rep.Order), name)
		if err := r.visit(ctx, a); err != nil {
			return nil, fmt.Errorf("row %s (visit %d of %d): %w", name, a.visits+1, len(rep.Order), err)
		}
		a.visits++
	}
	for _, s := range rowSpecs {
		rep.Rows = append(rep.Rows, accs[s.name].row(float64(cfg.RPS)))
	}
	relate(rep.Rows)
	if cfg.Scale != nil {
		if rep.Scale, err = r.scale(ctx, *cfg.Scale); err != nil {
			return nil, err
		}
	}
	rep.End = time.Now().UTC()
	if rep.LoadAfter, err = LoadAverage("/proc"); err != nil {
		return nil, err
	}
	return rep, nil
}

// setup re-points the stream service at the iperf3 server, writes the
// peers' certificates and configurations and starts the peers and iperf3.
func (r *runner) setup(ctx context.Context) error {
	c := r.c
	r.src = c.Pod(namespace, sourcePod)
	r.a, r.b = c.Node(r.src.Node), c.Node(c.Pod(namespace, destPod).Node)
	if r.src == nil || r.a == nil || r.b == nil || c.Pod(namespace, streamPod) == nil {
		return fmt.Errorf("scenario %s lacks pod %s/%s, %s or %s", r.cfg.Scenario, namespace, sourcePod, destPod, streamPod)
	}
	err := c.Update(func(sc *registry.Scenario) {
		for i := range sc.Services {
			if sc.Services[i].Name == streamService {
				sc.Services[i].Ports = []registry.ScenarioServicePort{
					{Name: "dgram", Port: streamPort, TargetPort: streamPort, Protocol: "UDP"},
					{Name: "stream", Port: streamPort, TargetPort: streamPort, Protocol: "TCP"},
				}
			}
		}
		for i := range sc.UDPRoutes {
			for j := range sc.UDPRoutes[i].Spec.Rules {
				for k := range sc.UDPRoutes[i].Spec.Rules[j].BackendRefs {
					if sc.UDPRoutes[i].Spec.Rules[j].BackendRefs[k].Name == streamService {
						p := streamPort
						sc.UDPRoutes[i].Spec.Rules[j].BackendRefs[k].Port = &p
					}
				}
			}
		}
	})
	if err != nil {
		return fmt.Errorf("failed to point %s at iperf3: %w", streamService, err)
	}
	for _, n := range []*node.Node{r.a, r.b} {
		if err := c.WaitProxyReady(ctx, n, 30*time.Second); err != nil {
			return err
		}
	}
	sp := c.Pod(namespace, streamPod)
	r.iperf = exec.Command("iperf3", "-s", "-p", fmt.Sprint(streamPort))
	if err := r.start(sp.NS, r.iperf, "iperf3-server"); err != nil {
		return err
	}
	certs, err := r.writeCerts()
	if err != nil {
		return err
	}
	dst := netip.AddrPortFrom(c.Pod(namespace, destPod).IP, destPort)
	for _, p := range []Peer{HAProxy, Nginx} {
		ports := peerPorts[p]
		sides := []struct {
			side   Side
			ns     *netns.NS
			listen netip.AddrPort
			up     netip.AddrPort
			svid   string
		}{
			{In, r.b.NS, netip.AddrPortFrom(netip.IPv4Unspecified(), ports[1]), dst, destSA},
			{Out, r.a.NS, netip.AddrPortFrom(netip.IPv4Unspecified(), ports[0]), netip.AddrPortFrom(r.b.Underlay, ports[1]), sourceSA},
		}
		for _, s := range sides {
			pc := PeerConfig{Listen: s.listen, Upstream: s.up, ServerName: xdsnames.Authority(destSA, namespace, meshDomain),
				Cert: certs[s.svid][0], Key: certs[s.svid][1], CertKey: certs[s.svid][2], Bundle: certs["bundle"][0],
				Threads: r.cfg.Threads, Dir: filepath.Join(r.dir, "peers", string(p)+"-"+string(s.side))}
			_, argv, err := WritePeer(p, s.side, pc)
			if err != nil {
				return err
			}
			cmd := exec.Command(argv[0], argv[1:]...)
			if err := r.start(s.ns, cmd, string(p)+"-"+string(s.side)); err != nil {
				return err
			}
			r.peers[p] = append(r.peers[p], cmd)
		}
	}
	// Every path answers before anything is measured: a peer that failed
	// on its configuration shows here, with its log.
	for _, s := range rowSpecs {
		if s.kind != KindHTTP || s.transport == "auto" {
			continue
		}
		if err := r.warm(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// writeCerts issues the source's and the destination's SVIDs from the
// mesh's own CA (the agents' --ca-dir) and writes them as PEM: per account
// cert, key and cert+key; "bundle" the trust bundle.
func (r *runner) writeCerts() (map[string][3]string, error) {
	ca, err := identity.LoadOrCreateCA(filepath.Join(r.dir, "ca"), identity.CAConfig{TrustDomain: trustDomain, MeshDomain: meshDomain})
	if err != nil {
		return nil, fmt.Errorf("the mesh's CA: %w", err)
	}
	dir := filepath.Join(r.dir, "certs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	out := map[string][3]string{}
	for _, sa := range []string{sourceSA, destSA} {
		svid, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: sa}, TTL: 2 * time.Hour})
		if err != nil {
			return nil, err
		}
		chain, key, err := svid.Marshal()
		if err != nil {
			return nil, err
		}
		f := [3]string{filepath.Join(dir, sa+".pem"), filepath.Join(dir, sa+"-key.pem"), filepath.Join(dir, sa+"-both.pem")}
		for i, b := range [][]byte{chain, key, append(append([]byte{}, chain...), key...)} {
			if err := os.WriteFile(f[i], b, 0o600); err != nil {
				return nil, err
			}
		}
		out[sa] = f
	}
	bundle, err := ca.Bundle().Marshal()
	if err != nil {
		return nil, err
	}
	bf := filepath.Join(dir, "bundle.pem")
	if err := os.WriteFile(bf, bundle, 0o644); err != nil {
		return nil, err
	}
	out["bundle"] = [3]string{bf}
	return out, nil
}

// start runs cmd inside ns with its output in the run dir, in its own
// process group, killed if the benchmark dies.
func (r *runner) start(ns *netns.NS, cmd *exec.Cmd, name string) error {
	lf, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := ns.Start(cmd); err != nil {
		lf.Close()
		return err
	}
	go func() { _ = cmd.Wait(); lf.Close() }()
	return nil
}

func (r *runner) logOf(name string) string {
	b, _ := os.ReadFile(filepath.Join(r.dir, name+".log"))
	return tailText(string(b), 10)
}

// stopAll stops the peers and iperf3 (their whole process groups).
func (r *runner) stopAll() {
	var cmds []*exec.Cmd
	for _, cs := range r.peers {
		cmds = append(cmds, cs...)
	}
	if r.iperf != nil {
		cmds = append(cmds, r.iperf)
	}
	for _, c := range cmds {
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
	}
	deadline := time.Now().Add(3 * time.Second)
	for _, c := range cmds {
		for c.Process != nil && syscall.Kill(c.Process.Pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		}
	}
}

// witness is the source node's proxy counter that shows a mesh row's
// traffic took the path it names: its requests routed to h2 clusters or
// to QUIC twins, its connections or datagrams on the pod's capture
// listeners. A row whose counter did not move measured some other path,
// and the run fails.
func (r *runner) witness(s rowSpec) (Selector, bool) {
	if !s.mesh {
		return Selector{}, false
	}
	out := xdsnames.OutboundListener(namespace, sourcePod)
	switch {
	case s.kind == KindTCP:
		return Selector{Metric: "aether_proxy_tcp_connections_total", Equal: map[string]string{"listener": xdsnames.TCPCaptureListener(namespace, sourcePod)}}, true
	case s.kind == KindUDP:
		return Selector{Metric: "aether_proxy_udp_downstream_rx_datagrams_total", Equal: map[string]string{"listener": xdsnames.UDPCaptureListener(namespace, sourcePod)}}, true
	case s.transport == "auto":
		return Selector{Metric: "aether_proxy_http_requests_total", Equal: map[string]string{"listener": out}, Prefix: map[string]string{"cluster": xdsnames.TwinClusterPrefix}}, true
	}
	return Selector{Metric: "aether_proxy_http_requests_total", Equal: map[string]string{"listener": out}, Prefix: map[string]string{"cluster": xdsnames.H2ClusterPrefix}}, true
}

// counter reads the witness counter from the source node's proxy.
func (r *runner) counter(ctx context.Context, sel Selector) (float64, error) {
	body, err := r.a.Get(ctx, r.a.ProxyMetrics, "/metrics")
	if err != nil {
		return 0, fmt.Errorf("node %s's proxy metrics: %w", r.a.Name, err)
	}
	return SumCounter(body, sel)
}

// witnessed runs f and checks the row's witness moved by at least want(),
// or at all when want returns 0.
func (r *runner) witnessed(ctx context.Context, a *acc, f func() error, want func() float64) error {
	sel, ok := r.witness(a.spec)
	if !ok {
		return f()
	}
	before, err := r.counter(ctx, sel)
	if err != nil {
		return err
	}
	if err := f(); err != nil {
		return err
	}
	after, err := r.counter(ctx, sel)
	if err != nil {
		return err
	}
	got, need := after-before, want()
	a.witness += got
	if got < 1 || got < need {
		return fmt.Errorf("the path was not the one measured: node %s's %s rose by %.0f, want at least %.0f", r.a.Name, sel, got, need)
	}
	a.witnessSel = sel.String()
	return nil
}

func (r *runner) proxiesOf(s rowSpec) []proxyProc {
	switch {
	case s.mesh:
		return []proxyProc{{"aether-proxy", r.a.Name, r.a.ProxyPID}, {"aether-proxy", r.b.Name, r.b.ProxyPID}}
	case s.peer != "":
		cs := r.peers[s.peer]
		// In (node-b) was started first.
		return []proxyProc{{string(s.peer), r.a.Name, func() int { return cs[1].Process.Pid }},
			{string(s.peer), r.b.Name, func() int { return cs[0].Process.Pid }}}
	}
	return nil
}

// target is the URL and authority h2load sends a row's requests to.
func (r *runner) target(s rowSpec) (string, string, error) {
	path := "/bench/" + s.name
	switch {
	case s.mesh:
		vip, err := r.c.ServiceVIP(namespace, destService)
		if err != nil {
			return "", "", err
		}
		return fmt.Sprintf("http://%s%s", netip.AddrPortFrom(vip, constants.HTTPOutboundPort), path), xdsnames.Authority(destService, namespace, meshDomain), nil
	case s.peer != "":
		gw := r.src.IP.As4()
		gw[3] = 1 // the node side of the pod's link
		return fmt.Sprintf("http://%s%s", netip.AddrPortFrom(netip.AddrFrom4(gw), peerPorts[s.peer][0]), path), "", nil
	}
	return fmt.Sprintf("http://%s%s", netip.AddrPortFrom(r.c.Pod(namespace, destPod).IP, destPort), path), "", nil
}

// ensure restarts the agents with transport t when they run another.
func (r *runner) ensure(ctx context.Context, t string) error {
	if t == "" || t == r.current {
		return nil
	}
	r.cfg.Logf("agents: --mesh-transport %s", t)
	r.c.SetAgentArgs(r.agent(t))
	for _, n := range []*node.Node{r.a, r.b} {
		if err := r.c.StopAgent(n); err != nil {
			return err
		}
		if err := r.c.StartAgent(ctx, n); err != nil {
			return err
		}
	}
	for _, n := range []*node.Node{r.a, r.b} {
		if err := r.c.WaitProxyReady(ctx, n, 30*time.Second); err != nil {
			return err
		}
	}
	r.current = t
	return nil
}

// h2load runs one h2load in the source pod and returns its summary and
// latencies.
func (r *runner) h2load(ctx context.Context, l HTTPLoad) (H2Summary, []time.Duration, error) {
	args, err := l.Args()
	if err != nil {
		return H2Summary{}, nil, err
	}
	out, err := r.inPod(ctx, "h2load", args...)
	if err != nil {
		return H2Summary{}, nil, err
	}
	sum, err := ParseH2Summary(out)
	if err != nil {
		return sum, nil, err
	}
	var lat []time.Duration
	if l.LogFile != "" {
		f, err := os.Open(l.LogFile)
		if err != nil {
			return sum, nil, fmt.Errorf("h2load log: %w", err)
		}
		lat, _, err = ParseH2Log(f)
		f.Close()
		if err != nil {
			return sum, nil, err
		}
	}
	return sum, lat, nil
}

// inPod runs a program in the source pod's netns and returns its output.
func (r *runner) inPod(ctx context.Context, prog string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, prog, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := r.src.NS.Start(cmd); err != nil {
		return "", err
	}
	if err := cmd.Wait(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w\n%s", prog, strings.Join(args, " "), err, tailText(out.String(), 10))
	}
	return out.String(), nil
}

// warm sends a few hundred requests down the row's path, so a twin is
// fetched and every connection is up before the measured runs, and fails
// when the path does not answer them all.
func (r *runner) warm(ctx context.Context, s rowSpec) error {
	url, auth, err := r.target(s)
	if err != nil {
		return err
	}
	var last error
	for attempt := 0; attempt < 20; attempt++ {
		sum, _, err := r.h2load(ctx, HTTPLoad{URL: url, Authority: auth, Conns: r.cfg.Conns, Duration: time.Second, Payload: r.payload})
		if err == nil && sum.Succeeded > 0 && sum.Succeeded == sum.Total && sum.Status2 == sum.Total {
			return nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("%d of %d requests succeeded, %d answered 2xx", sum.Succeeded, sum.Total, sum.Status2)
		}
		if ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	logs := ""
	if s.peer != "" {
		logs = fmt.Sprintf("\n%s-out log:\n%s\n%s-in log:\n%s", s.peer, r.logOf(string(s.peer)+"-out"), s.peer, r.logOf(string(s.peer)+"-in"))
	}
	return fmt.Errorf("path %s (%s) does not answer: %w%s", s.name, url, last, logs)
}

// usage reads every proxy of a row.
func (r *runner) usage(ps []proxyProc) (map[string]Usage, error) {
	out := map[string]Usage{}
	for _, p := range ps {
		u, err := ReadUsage("/proc", p.pid())
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", p.name, p.node, err)
		}
		out[p.node] = u
	}
	return out, nil
}

// measured runs f between two reads of the row's proxies and adds their
// CPU over the wall time to into.
func (r *runner) measured(a *acc, into map[string]*CPUSample, f func() error) error {
	before, err := r.usage(a.proxies)
	if err != nil {
		return err
	}
	t0 := time.Now()
	if err := f(); err != nil {
		return err
	}
	wall := time.Since(t0)
	after, err := r.usage(a.proxies)
	if err != nil {
		return err
	}
	for k, u := range after {
		s := into[k]
		if s == nil {
			s = &CPUSample{}
			into[k] = s
		}
		s.CPU += u.CPU - before[k].CPU
		s.Wall += wall
		a.rss[k] = max(a.rss[k], u.RSS)
		a.procs[k] = u.Procs
	}
	return nil
}

func (r *runner) visit(ctx context.Context, a *acc) error {
	s := a.spec
	if err := r.ensure(ctx, s.transport); err != nil {
		return err
	}
	if s.kind != KindHTTP {
		host, port := r.c.Pod(namespace, streamPod).IP.String(), streamPort
		if s.mesh {
			vip, err := r.c.ServiceVIP(namespace, streamService)
			if err != nil {
				return err
			}
			host, port = vip.String(), int(constants.ProxyL4OutboundPort)
		}
		l := StreamLoad{Host: host, Port: port, UDP: s.kind == KindUDP, Len: r.cfg.UDPLen, Duration: r.cfg.Stream}
		args, err := l.Args()
		if err != nil {
			return err
		}
		return r.witnessed(ctx, a, func() error {
			return r.measured(a, a.cpu, func() error {
				out, err := r.inPod(ctx, "iperf3", args...)
				if err != nil {
					return err
				}
				res, err := ParseIperf3([]byte(out), l.UDP)
				if err != nil {
					return err
				}
				a.streams = append(a.streams, res)
				return nil
			})
		}, func() float64 { return 0 })
	}
	if err := r.warm(ctx, s); err != nil {
		return err
	}
	url, auth, err := r.target(s)
	if err != nil {
		return err
	}
	done := a.paced.requests + a.closed.requests
	return r.witnessed(ctx, a, func() error { return r.httpRuns(ctx, a, url, auth) },
		// Every request h2load saw answered went through the proxy, on
		// the row's kind of cluster (99%: a request answered as h2load
		// stopped may miss its count).
		func() float64 { return 0.99 * float64(a.paced.requests+a.closed.requests-done) })
}

func (r *runner) httpRuns(ctx context.Context, a *acc, url, auth string) error {
	s := a.spec
	for _, run := range []struct {
		h   *httpAcc
		cpu map[string]*CPUSample
		rps int
		d   time.Duration
	}{{&a.paced, a.cpu, r.cfg.RPS, r.cfg.Paced}, {&a.closed, a.closedCPU, 0, r.cfg.Closed}} {
		log := filepath.Join(r.dir, fmt.Sprintf("h2load-%s-%d-%d.log", s.name, a.visits, run.rps))
		l := HTTPLoad{URL: url, Authority: auth, Conns: r.cfg.Conns, RPS: run.rps, Duration: run.d, Payload: r.payload, LogFile: log}
		err := r.measured(a, run.cpu, func() error {
			sum, lat, err := r.h2load(ctx, l)
			if err != nil {
				return err
			}
			run.h.requests += sum.Succeeded
			run.h.bad += sum.Total - sum.Status2
			run.h.seconds += sum.Seconds
			run.h.visitP50 = append(run.h.visitP50, Summarize(append([]time.Duration(nil), lat...)).P50)
			run.h.lat = append(run.h.lat, lat...)
			return nil
		})
		if err != nil {
			return err
		}
		_ = os.Remove(log)
	}
	return nil
}

// row pools the visits into the row's figures.
func (a *acc) row(target float64) Row {
	row := Row{Name: a.spec.name, Kind: a.spec.kind, Path: a.spec.path, Visits: a.visits}
	if a.witnessSel != "" {
		row.Witness = fmt.Sprintf("%s rose by %.0f on %s", a.witnessSel, a.witness, "the source node's proxy")
	}
	httpRun := func(h httpAcc, target float64) *HTTPRun {
		out := &HTTPRun{TargetRPS: target, Requests: h.requests, Failed: h.bad, Latency: Summarize(h.lat), VisitP50: h.visitP50}
		if h.seconds > 0 {
			out.AchievedRPS = float64(h.requests) / h.seconds
		}
		return out
	}
	if a.spec.kind == KindHTTP {
		row.Paced = httpRun(a.paced, target)
		row.Closed = httpRun(a.closed, 0)
	} else {
		st := &StreamRow{Visits: a.streams}
		for _, s := range a.streams {
			st.Mbps += s.Mbps / float64(len(a.streams))
			st.LossPercent += s.LossPercent / float64(len(a.streams))
		}
		row.Stream = st
	}
	for _, p := range a.proxies {
		pc := ProxyCost{Name: p.name, Node: p.node, RSSMiB: float64(a.rss[p.node]) / (1 << 20), Procs: a.procs[p.node]}
		if s := a.cpu[p.node]; s != nil {
			pc.VCPU = s.VCPU()
			if row.Paced != nil {
				pc.PerThousand = PerThousand(pc.VCPU, row.Paced.AchievedRPS)
			}
		}
		if s := a.closedCPU[p.node]; s != nil && row.Closed != nil {
			pc.ClosedVCPU = s.VCPU()
			pc.ClosedPerThousand = PerThousand(pc.ClosedVCPU, row.Closed.AchievedRPS)
		}
		row.Proxies = append(row.Proxies, pc)
	}
	return row
}

// relate fills what a row's figures are against the direct rows: added
// latency against direct, stream rate as a share of its protocol's direct
// row.
func relate(rows []Row) {
	var direct *Row
	stream := map[Kind]*Row{}
	for i := range rows {
		switch rows[i].Name {
		case "direct":
			direct = &rows[i]
		case "tcp-direct":
			stream[KindTCP] = &rows[i]
		case "udp-direct":
			stream[KindUDP] = &rows[i]
		}
	}
	for i := range rows {
		row := &rows[i]
		if row.Paced != nil && direct != nil && row != direct {
			d := AddedOver(row.Paced.Latency, direct.Paced.Latency)
			row.Paced.Added = &d
			c := AddedOver(row.Closed.Latency, direct.Closed.Latency)
			row.Closed.Added = &c
		}
		if row.Stream != nil {
			if d := stream[row.Kind]; d != nil && d != row && d.Stream.Mbps > 0 {
				row.Stream.OfDirect = row.Stream.Mbps / d.Stream.Mbps
			}
		}
	}
}
