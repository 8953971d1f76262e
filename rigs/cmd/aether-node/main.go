// Command aether-node brings the embedded netns cluster (rigs/node) up and
// down by hand, for a person exploring the mesh:
//
//	aether-node up [--mode tproxy|redirect|none] [--run-dir DIR] [--bin DIR] SCENARIO
//	aether-node status [--run-dir DIR] [SCENARIO]
//	aether-node down [--purge] [--run-dir DIR] [SCENARIO]
//
// "up" stays in the foreground until "down" (or Ctrl-C) and keeps its state
// in the run dir (default /run/aether-node/<scenario name>): state.json, the
// registry file the agents watch, process logs and backend records. Without
// SCENARIO or --run-dir, "status" and "down" act on the cluster that is up.
// "down" with nothing up succeeds, saying so, after sweeping what dead runs
// left, so cleanup scripts can run it unconditionally; --purge also removes
// the run dir after the teardown.
// Enter a pod with `ip netns exec <netns> …`, using the names "status" prints.
//
// "backend" is the rig's echo backend that every pod runs; it is not meant
// to be started by hand.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
)

func main() {
	err := run(os.Args[1:])
	if errors.Is(err, errUsage) {
		fmt.Fprintln(os.Stderr, "aether-node:", err)
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "aether-node:", err)
		os.Exit(1)
	}
}

// errUsage marks a command line that names no command aether-node has.
var errUsage = errors.New("see usage")

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("no command given: %w", errUsage)
	}
	switch args[0] {
	case "up":
		return up(args[1:])
	case "down":
		return down(os.Stdout, args[1:])
	case "status":
		return status(args[1:])
	case "backend":
		return backend(args[1:])
	}
	return fmt.Errorf("unknown command %q: %w", args[0], errUsage)
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: aether-node up [flags] SCENARIO | status [flags] [SCENARIO] | down [--purge] [flags] [SCENARIO]")
	os.Exit(2)
}

// runRoot holds one run dir per scenario.
var runRoot = "/run/aether-node"

// State is what "up" leaves in the run dir for "status" and "down".
type State struct {
	PID          int         `json:"pid"`
	Scenario     string      `json:"scenario"`
	Mode         string      `json:"mode"`
	RunDir       string      `json:"runDir"`
	RegistryFile string      `json:"registryFile"`
	Bridge       string      `json:"bridge"`
	Nodes        []NodeState `json:"nodes"`
	Pods         []PodState  `json:"pods"`
	// A cluster of a multi-cluster run: its entry in the clusters file
	// and its gateway address on the shared network.
	Name        string `json:"name,omitempty"`
	TrustDomain string `json:"trustDomain,omitempty"`
	MeshDomain  string `json:"meshDomain,omitempty"`
	Gateway     string `json:"gateway,omitempty"`
	ExportFile  string `json:"exportFile,omitempty"`
	// A multi-cluster run (SCENARIO is a clusters file): its clusters, in
	// file order, and the shared network's bridge namespace.
	Clusters []State `json:"clusters,omitempty"`
	WAN      string  `json:"wan,omitempty"`
}

type NodeState struct {
	Name     string `json:"name"`
	Netns    string `json:"netns"`
	Underlay string `json:"underlay"`
	// AgentMetrics and ProxyMetrics listen on the node netns's loopback.
	AgentMetrics string `json:"agentMetrics"`
	ProxyMetrics string `json:"proxyMetrics"`
	// HandoffSocket is where the node's agent takes pods from aether-cni.
	HandoffSocket string `json:"handoffSocket,omitempty"`
}

type PodState struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Node      string `json:"node"`
	IP        string `json:"ip"`
	Netns     string `json:"netns"`
	Record    string `json:"record"`
}

func runDirFor(flagDir, scenario string) string {
	if flagDir != "" {
		return flagDir
	}
	base := strings.TrimSuffix(filepath.Base(scenario), filepath.Ext(scenario))
	return filepath.Join(runRoot, base)
}

// parse reads a command's flags and its SCENARIO. up needs SCENARIO; status
// and down (mode and bin nil) find the running cluster without one. purge,
// when not nil, is down's --purge.
func parse(name string, args []string, mode, bin *string, purge *bool) (runDir, scenario string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rd := fs.String("run-dir", "", "run dir (default "+runRoot+"/<scenario name>)")
	if mode != nil {
		fs.StringVar(mode, "mode", "tproxy", "capture mode: tproxy, redirect or none (network and backends only)")
	}
	if purge != nil {
		fs.BoolVar(purge, "purge", false, "after the teardown, remove the run dir with its logs and records")
	}
	if bin != nil {
		fs.StringVar(bin, "bin", "", "dir holding ptp, static, aether-cni, aether-agent, aether-proxy (default: build them)")
	}
	if err := fs.Parse(args); err != nil {
		return "", "", err
	}
	switch {
	case fs.NArg() == 1:
		return runDirFor(*rd, fs.Arg(0)), fs.Arg(0), nil
	case fs.NArg() > 1 || name == "up":
		return "", "", fmt.Errorf("%s wants exactly one SCENARIO argument, got %d", name, fs.NArg())
	case *rd != "":
		return *rd, "", nil
	}
	runDir, err = runningCluster(runRoot)
	return runDir, "", err
}

// errNothingUp is runningCluster's answer when no cluster is recorded.
var errNothingUp = errors.New("no cluster is up")

// runningCluster finds the run dir of the cluster that is up: the one whose
// "up" is alive, or else the only one recorded (a crashed run, for down).
func runningCluster(root string) (string, error) {
	states, err := filepath.Glob(filepath.Join(root, "*", "state.json"))
	if err != nil {
		return "", fmt.Errorf("failed to look for clusters under %s: %w", root, err)
	}
	var all, live []string
	for _, p := range states {
		d := filepath.Dir(p)
		all = append(all, d)
		if s, err := readState(d); err == nil && alive(s.PID) {
			live = append(live, d)
		}
	}
	switch {
	case len(live) == 1:
		return live[0], nil
	case len(all) == 1:
		return all[0], nil
	case len(all) == 0:
		return "", fmt.Errorf("%w (no %s/*/state.json); start one with: aether-node up SCENARIO", errNothingUp, root)
	}
	return "", fmt.Errorf("%d clusters are recorded (%s), %d of them up; name one with SCENARIO or --run-dir", len(all), strings.Join(all, ", "), len(live))
}

func readState(runDir string) (*State, error) {
	p := filepath.Join(runDir, "state.json")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("no cluster recorded in %s: %w", runDir, err)
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("state file %s: %w", p, err)
	}
	return &s, nil
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// The trust and mesh domains of an aether-node cluster's mTLS path.
const (
	TrustDomain = "aether.local"
	MeshDomain  = "mesh.local"
)

func up(args []string) error {
	var mode, bin string
	runDir, scenario, err := parse("up", args, &mode, &bin, nil)
	if err != nil {
		return err
	}
	if s, err := readState(runDir); err == nil && alive(s.PID) {
		return fmt.Errorf("a cluster is already up in %s (pid %d); run aether-node down first", runDir, s.PID)
	}
	capture, err := captureMode(mode)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find this program: %w", err)
	}
	_, statErr := os.Stat(runDir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("failed to create run dir %q: %w", runDir, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The mTLS HTTP/2 path is on in every mesh: a scenario's appProtocol
	// http ports get it, with the agents' shared CA and the proxies'
	// access logs in the run dir.
	access := filepath.Join(runDir, accessDir)
	if err := os.MkdirAll(access, 0o755); err != nil {
		return fmt.Errorf("failed to create access log dir %q: %w", access, err)
	}
	data, err := os.ReadFile(scenario)
	if err != nil {
		return fmt.Errorf("failed to read scenario file %q: %w", scenario, err)
	}
	if registry.IsClustersFile(data) {
		return upClusters(ctx, scenario, mode, capture, runDir, bin, self, created)
	}
	agentArgs := meshArgs(runDir)
	c, err := node.Up(ctx, node.Config{Scenario: scenario, Mode: capture, RunDir: runDir, AgentArgs: agentArgs,
		Bin: node.Binaries{Dir: bin, Node: self}, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		if created {
			removeEmptyDirs(runDir)
		}
		return err
	}
	st := clusterState(c)
	st.PID, st.Scenario, st.Mode = os.Getpid(), scenario, mode
	return serve(ctx, &st, c.Close)
}

// serve records st in its run dir, prints it, and waits for "down" (or
// Ctrl-C) to close what is up.
func serve(ctx context.Context, st *State, close func() error) error {
	b, _ := json.MarshalIndent(st, "", "  ")
	statePath := filepath.Join(st.RunDir, "state.json")
	if err := os.WriteFile(statePath, append(b, '\n'), 0o644); err != nil {
		_ = close()
		return fmt.Errorf("failed to write %s: %w", statePath, err)
	}
	printState(os.Stdout, st, true)
	fmt.Fprintf(os.Stderr, "up; stop with: aether-node down (or: aether-node down --run-dir %s)\n", st.RunDir)
	<-ctx.Done()
	cerr := close()
	_ = os.Remove(statePath)
	return errors.Join(cerr, netns.LeakCheck())
}

// clusterState is what status and down need of a running cluster.
func clusterState(c *node.Cluster) State {
	st := State{RunDir: c.RunDir, RegistryFile: c.RegistryFile, Bridge: c.Bridge().Name,
		Name: c.Name, TrustDomain: c.TrustDomain, MeshDomain: c.MeshDomain, ExportFile: c.ExportFile}
	if _, addr := c.Gateway(); addr.IsValid() {
		st.Gateway = addr.String()
	}
	if w := c.WAN(); w != nil {
		st.WAN = w.Name
	}
	for _, n := range c.Nodes() {
		ns := NodeState{Name: n.Name, Netns: n.NS.Name, Underlay: n.Underlay.String()}
		if c.Mode != node.NoMesh {
			ns.AgentMetrics, ns.ProxyMetrics = n.AgentMetrics.String(), n.ProxyMetrics.String()
			ns.HandoffSocket = n.HandoffSocket
		}
		st.Nodes = append(st.Nodes, ns)
	}
	for _, p := range c.Pods() {
		st.Pods = append(st.Pods, PodState{Name: p.Name, Namespace: p.Namespace, Node: p.Node, IP: p.IP.String(), Netns: p.NS.Name, Record: p.Record})
	}
	return st
}

// upClusters is up for a clusters file: every cluster in its own run dir,
// runDir/<cluster name>, each with its own CA and trust domain (made by
// rigs/node) and the others' exports.
func upClusters(ctx context.Context, file, mode string, capture constants.CaptureMode, runDir, bin, self string, created bool) error {
	m, err := node.UpClusters(ctx, node.MultiConfig{Clusters: file, Mode: capture, RunDir: runDir,
		Bin: node.Binaries{Dir: bin, Node: self}, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		if created {
			removeEmptyDirs(runDir)
		}
		return err
	}
	st := State{PID: os.Getpid(), Scenario: file, Mode: mode, RunDir: runDir, WAN: m.WAN().Name}
	for _, c := range m.Clusters() {
		st.Clusters = append(st.Clusters, clusterState(c))
	}
	return serve(ctx, &st, m.Close)
}

// captureMode reads --mode. It is checked here, where "none" is a valid
// answer, so a typo is refused naming all three before anything is built.
func captureMode(flag string) (constants.CaptureMode, error) {
	switch m := constants.CaptureMode(flag); m {
	case constants.CaptureTProxy, constants.CaptureRedirect:
		return m, nil
	case "none":
		return node.NoMesh, nil
	}
	return "", fmt.Errorf("unknown --mode %q (want tproxy, redirect or none)", flag)
}

// removeEmptyDirs removes dir and the directories under it when none of
// them holds a file: a failed "up" leaves its logs, but not an empty run
// dir it made.
func removeEmptyDirs(dir string) {
	hasFile := false
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			hasFile = true
			return filepath.SkipAll
		}
		return nil
	})
	if !hasFile {
		_ = os.RemoveAll(dir)
	}
}

func printState(w io.Writer, s *State, live bool) {
	running := map[bool]string{true: "running", false: "NOT RUNNING"}[live]
	if len(s.Clusters) > 0 {
		fmt.Fprintf(w, "%d clusters of %s (capture %q), pid %d, %s\n", len(s.Clusters), s.Scenario, s.Mode, s.PID, running)
		fmt.Fprintf(w, "  shared network %s, bridge netns %s\n", node.WANPrefix, s.WAN)
		for i := range s.Clusters {
			printCluster(w, &s.Clusters[i])
		}
		return
	}
	fmt.Fprintf(w, "cluster %s (capture %q), pid %d, %s\n", s.Scenario, s.Mode, s.PID, running)
	printCluster(w, s)
}

// printCluster prints one cluster: its entry in a clusters file, if it
// is one's, its gateway, nodes and pods.
func printCluster(w io.Writer, s *State) {
	if s.Name != "" {
		fmt.Fprintf(w, "cluster %s: trust domain %s, mesh domain %s, run dir %s\n", s.Name, s.TrustDomain, s.MeshDomain, s.RunDir)
	}
	if s.Gateway != "" {
		fmt.Fprintf(w, "  gateway %s:%d", s.Gateway, constants.EastWestTunnelPort)
		if s.WAN != "" {
			fmt.Fprintf(w, " on the shared network (bridge netns %s)", s.WAN)
		}
		if s.ExportFile != "" {
			fmt.Fprintf(w, ", export %s", s.ExportFile)
		}
		fmt.Fprintln(w)
	}
	if s.Bridge != "" {
		fmt.Fprintf(w, "  bridge netns %s\n", s.Bridge)
	}
	for _, n := range s.Nodes {
		fmt.Fprintf(w, "  node %-12s netns %-32s underlay %s\n", n.Name, n.Netns, n.Underlay)
		if n.AgentMetrics != "" {
			fmt.Fprintf(w, "       metrics (inside netns %s): agent http://%s/metrics, proxy http://%s/metrics\n", n.Netns, n.AgentMetrics, n.ProxyMetrics)
		}
		if n.HandoffSocket != "" {
			fmt.Fprintf(w, "       pods handed over: curl --unix-socket %s http://agent/v1/pods\n", n.HandoffSocket)
		}
	}
	for _, p := range s.Pods {
		fmt.Fprintf(w, "  pod  %-24s node %-10s ip %-14s netns %s\n", p.Namespace+"/"+p.Name, p.Node, p.IP, p.Netns)
	}
	fmt.Fprintf(w, "  registry %s, logs %s\n", s.RegistryFile, filepath.Join(s.RunDir, "logs"))
}

func status(args []string) error {
	runDir, _, err := parse("status", args, nil, nil, nil)
	if err != nil {
		return err
	}
	s, err := readState(runDir)
	if err != nil {
		return err
	}
	live := alive(s.PID)
	printState(os.Stdout, s, live)
	missing := existing(s, false)
	if !live || len(missing) > 0 {
		return fmt.Errorf("cluster in %s is not healthy: pid %d alive=%v, missing namespaces %v", runDir, s.PID, live, missing)
	}
	return nil
}

// existing lists the namespaces of s that exist (or, with want false, those
// that do not).
func existing(s *State, want bool) []string {
	var out []string
	for i := range s.Clusters {
		out = append(out, existing(&s.Clusters[i], want)...)
	}
	var names []string
	if s.WAN != "" {
		names = append(names, s.WAN)
	}
	if s.Bridge != "" {
		names = append(names, s.Bridge)
	}
	for _, n := range s.Nodes {
		names = append(names, n.Netns)
	}
	for _, p := range s.Pods {
		names = append(names, p.Netns)
	}
	for _, n := range names {
		_, err := os.Lstat(filepath.Join(netns.BindDir, n))
		if (err == nil) == want {
			out = append(out, n)
		}
	}
	return out
}

func down(w io.Writer, args []string) error {
	var purge bool
	runDir, _, err := parse("down", args, nil, nil, &purge)
	if errors.Is(err, errNothingUp) {
		return nothingUp(w, err)
	}
	if err != nil {
		return err
	}
	s, err := readState(runDir)
	if errors.Is(err, os.ErrNotExist) {
		// A named run dir with no cluster in it: nothing to stop, and with
		// --purge its leftovers still go.
		if err := nothingUp(w, err); err != nil || !purge {
			return err
		}
		return purgeRunDir(w, runDir, nil)
	}
	if err != nil {
		return err
	}
	return stopCluster(w, s, 20*time.Second, purge)
}

// nothingUp is down with no cluster to stop: it still sweeps the
// namespaces of dead runs, and succeeds.
func nothingUp(w io.Writer, why error) error {
	fmt.Fprintf(w, "nothing to remove: %v\n", why)
	swept, err := netns.Sweep()
	if len(swept) > 0 {
		fmt.Fprintf(w, "swept %d namespace(s) of dead runs: %s\n", len(swept), strings.Join(swept, " "))
	}
	if err != nil {
		return fmt.Errorf("failed to sweep the namespaces of dead runs: %w", err)
	}
	return nil
}

// stopCluster stops s's "up" (which tears the cluster down), sweeps what a
// crashed "up" left, and says what went; with purge, a clean teardown also
// removes the run dir.
func stopCluster(w io.Writer, s *State, grace time.Duration, purge bool) error {
	before := existing(s, true)
	if alive(s.PID) {
		if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
			return fmt.Errorf("failed to signal aether-node up (pid %d): %w", s.PID, err)
		}
		deadline := time.Now().Add(grace)
		for alive(s.PID) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(s.PID) {
			return fmt.Errorf("aether-node up (pid %d) did not stop within %s", s.PID, grace)
		}
		fmt.Fprintf(w, "stopped aether-node up (pid %d) and the agents, proxies and backends it ran\n", s.PID)
	} else {
		fmt.Fprintf(w, "aether-node up (pid %d) was not running\n", s.PID)
	}
	// If "up" died without tearing down, its namespaces are now a dead
	// owner's and the sweep removes them.
	swept, serr := netns.Sweep()
	left := existing(s, true)
	var removed []string
	for _, n := range before {
		if !slices.Contains(left, n) {
			removed = append(removed, n)
		}
	}
	fmt.Fprintf(w, "removed %d namespace(s) of the cluster: %s\n", len(removed), strings.Join(removed, " "))
	if others := slices.DeleteFunc(swept, func(n string) bool { return slices.Contains(before, n) }); len(others) > 0 {
		fmt.Fprintf(w, "swept %d namespace(s) of other dead runs: %s\n", len(others), strings.Join(others, " "))
	}
	if err := os.Remove(filepath.Join(s.RunDir, "state.json")); err != nil && !errors.Is(err, os.ErrNotExist) {
		serr = errors.Join(serr, fmt.Errorf("failed to remove the cluster's state: %w", err))
	}
	if len(left) > 0 {
		serr = errors.Join(serr, fmt.Errorf("namespaces of the cluster are still there: %v", left))
	}
	if !purge || serr != nil {
		fmt.Fprintf(w, "kept logs and backend records in %s (aether-node down --purge removes them)\n", s.RunDir)
		return serr
	}
	var clusters []string
	for _, c := range s.Clusters {
		clusters = append(clusters, c.Name)
	}
	return purgeRunDir(w, s.RunDir, clusters)
}

// The run dir's subdirectories for the mTLS path: the agents' shared CA
// and the proxies' access logs.
const (
	caDir     = "ca"
	accessDir = "access"
)

// meshArgs are the agents' mTLS flags for a cluster in runDir.
func meshArgs(runDir string) []string {
	return []string{"--trust-domain", TrustDomain, "--mesh-domain", MeshDomain,
		"--ca-dir", filepath.Join(runDir, caDir), "--access-log-dir", filepath.Join(runDir, accessDir)}
}

// runDirEntries are the names "up" writes in a run dir.
var runDirEntries = []string{"state.json", "registry.yaml", "registry.yaml.tmp", "logs", "records", "previous", "cni-cache", "nodes", caDir, accessDir,
	// A cluster of a multi-cluster run: its scenario out of the clusters
	// file, and its export.
	"scenario.yaml", "export.yaml", "export.yaml.tmp"}

// purgeRunDir removes a run dir, but only one that holds nothing except
// what "up" writes there: --run-dir may name any directory, and a typo
// must not remove someone's files. A multi-cluster run's dir holds one
// such dir per cluster, named in clusters.
func purgeRunDir(w io.Writer, dir string, clusters []string) error {
	if err := checkPurge(dir, clusters); err != nil {
		return err
	}
	for _, c := range clusters {
		if err := checkPurge(filepath.Join(dir, c), nil); err != nil {
			return err
		}
	}
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(w, "no run dir %s to purge\n", dir)
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("failed to purge run dir %s: %w", dir, err)
	}
	fmt.Fprintf(w, "purged run dir %s (logs, backend records, registry file, CA, access logs)\n", dir)
	return nil
}

// checkPurge refuses a dir that holds anything "up" does not write there
// (clusters: the cluster dirs of a multi-cluster run). A missing dir
// passes.
func checkPurge(dir string, clusters []string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("failed to read run dir %s: %w", dir, err)
	}
	for _, e := range entries {
		if !slices.Contains(runDirEntries, e.Name()) && !(e.IsDir() && slices.Contains(clusters, e.Name())) {
			return fmt.Errorf("refusing to purge %s: it holds %q, which aether-node up does not write", dir, e.Name())
		}
	}
	return nil
}

func ports(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		p, err := strconv.Atoi(f)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("bad port %q", f)
		}
		out = append(out, p)
	}
	return out, nil
}

func backend(args []string) error {
	fs := flag.NewFlagSet("backend", flag.ContinueOnError)
	name := fs.String("name", "", "the name every reply carries")
	record := fs.String("record", "", "record file (JSON lines)")
	udp := fs.String("udp", "", "comma-separated UDP ports")
	tcp := fs.String("tcp", "", "comma-separated TCP ports")
	httpPorts := fs.String("http", "", "comma-separated HTTP echo ports")
	tlsPort := fs.String("tls", "", "the HTTP echo's own mTLS port: PORT,CERT,KEY,BUNDLE,TRUSTDOMAIN")
	if err := fs.Parse(args); err != nil {
		return err
	}
	h, err := ports(*httpPorts)
	if err != nil {
		return fmt.Errorf("flag --http: %w", err)
	}
	et, err := node.ParseEchoTLS(*tlsPort)
	if err != nil {
		return fmt.Errorf("flag --tls: %w", err)
	}
	u, err := ports(*udp)
	if err != nil {
		return fmt.Errorf("flag --udp: %w", err)
	}
	t, err := ports(*tcp)
	if err != nil {
		return fmt.Errorf("flag --tcp: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return node.ServeBackend(ctx, node.BackendConfig{Name: *name, Record: *record, UDP: u, TCP: t, HTTP: h, TLS: et})
}
