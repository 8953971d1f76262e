// Command aether-node brings the embedded netns cluster (rigs/node) up and
// down by hand, for a person exploring the mesh:
//
//	aether-node up [--mode tproxy|redirect|none] [--run-dir DIR] [--bin DIR] SCENARIO
//	aether-node status [--run-dir DIR] SCENARIO
//	aether-node down [--run-dir DIR] SCENARIO
//
// "up" stays in the foreground until "down" (or Ctrl-C) and keeps its state
// in the run dir (default /run/aether-node/<scenario name>): state.json, the
// registry file the agents watch, process logs and backend records. Enter a
// pod with `ip netns exec <netns> …`, using the names "status" prints.
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
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/node"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "status":
		err = status(os.Args[2:])
	case "backend":
		err = backend(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "aether-node:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: aether-node up|down|status [flags] SCENARIO")
	os.Exit(2)
}

// State is what "up" leaves in the run dir for "status" and "down".
type State struct {
	PID          int         `json:"pid"`
	Scenario     string      `json:"scenario"`
	Mode         string      `json:"mode"`
	RunDir       string      `json:"runDir"`
	RegistryFile string      `json:"registryFile"`
	Nodes        []NodeState `json:"nodes"`
	Pods         []PodState  `json:"pods"`
}

type NodeState struct {
	Name     string `json:"name"`
	Netns    string `json:"netns"`
	Underlay string `json:"underlay"`
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
	return filepath.Join("/run/aether-node", base)
}

func parse(name string, args []string, mode, bin *string) (runDir, scenario string, err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	rd := fs.String("run-dir", "", "run dir (default /run/aether-node/<scenario name>)")
	if mode != nil {
		fs.StringVar(mode, "mode", "tproxy", "capture mode: tproxy, redirect or none (network and backends only)")
	}
	if bin != nil {
		fs.StringVar(bin, "bin", "", "dir holding ptp, static, aether-cni, aether-agent, aether-proxy (default: build them)")
	}
	if err := fs.Parse(args); err != nil {
		return "", "", err
	}
	if fs.NArg() != 1 {
		return "", "", fmt.Errorf("%s wants exactly one SCENARIO argument, got %d", name, fs.NArg())
	}
	return runDirFor(*rd, fs.Arg(0)), fs.Arg(0), nil
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

func up(args []string) error {
	var mode, bin string
	runDir, scenario, err := parse("up", args, &mode, &bin)
	if err != nil {
		return err
	}
	if s, err := readState(runDir); err == nil && alive(s.PID) {
		return fmt.Errorf("a cluster is already up in %s (pid %d); run aether-node down first", runDir, s.PID)
	}
	if mode == "none" {
		mode = ""
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("failed to find this program: %w", err)
	}
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		return fmt.Errorf("failed to create run dir %q: %w", runDir, err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	c, err := node.Up(ctx, node.Config{Scenario: scenario, Mode: constants.CaptureMode(mode), RunDir: runDir,
		Bin: node.Binaries{Dir: bin, Node: self}, Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }})
	if err != nil {
		return err
	}
	st := State{PID: os.Getpid(), Scenario: scenario, Mode: mode, RunDir: runDir, RegistryFile: c.RegistryFile}
	for _, n := range c.Nodes() {
		st.Nodes = append(st.Nodes, NodeState{Name: n.Name, Netns: n.NS.Name, Underlay: n.Underlay.String()})
	}
	for _, p := range c.Pods() {
		st.Pods = append(st.Pods, PodState{Name: p.Name, Namespace: p.Namespace, Node: p.Node, IP: p.IP.String(), Netns: p.NS.Name, Record: p.Record})
	}
	b, _ := json.MarshalIndent(st, "", "  ")
	statePath := filepath.Join(runDir, "state.json")
	if err := os.WriteFile(statePath, append(b, '\n'), 0o644); err != nil {
		_ = c.Close()
		return fmt.Errorf("failed to write %s: %w", statePath, err)
	}
	printState(&st, true)
	fmt.Fprintf(os.Stderr, "up; stop with: aether-node down --run-dir %s %s\n", runDir, scenario)
	<-ctx.Done()
	cerr := c.Close()
	_ = os.Remove(statePath)
	return errors.Join(cerr, netns.LeakCheck())
}

func printState(s *State, live bool) {
	fmt.Printf("cluster %s (capture %q), pid %d, %s\n", s.Scenario, s.Mode, s.PID, map[bool]string{true: "running", false: "NOT RUNNING"}[live])
	for _, n := range s.Nodes {
		fmt.Printf("  node %-12s netns %-32s underlay %s\n", n.Name, n.Netns, n.Underlay)
	}
	for _, p := range s.Pods {
		fmt.Printf("  pod  %-24s node %-10s ip %-14s netns %s\n", p.Namespace+"/"+p.Name, p.Node, p.IP, p.Netns)
	}
	fmt.Printf("  registry %s, logs %s\n", s.RegistryFile, filepath.Join(s.RunDir, "logs"))
}

func status(args []string) error {
	runDir, _, err := parse("status", args, nil, nil)
	if err != nil {
		return err
	}
	s, err := readState(runDir)
	if err != nil {
		return err
	}
	live := alive(s.PID)
	printState(s, live)
	var missing []string
	for _, n := range s.Nodes {
		if _, err := os.Stat(filepath.Join(netns.BindDir, n.Netns)); err != nil {
			missing = append(missing, n.Netns)
		}
	}
	for _, p := range s.Pods {
		if _, err := os.Stat(filepath.Join(netns.BindDir, p.Netns)); err != nil {
			missing = append(missing, p.Netns)
		}
	}
	if !live || len(missing) > 0 {
		return fmt.Errorf("cluster in %s is not healthy: pid %d alive=%v, missing namespaces %v", runDir, s.PID, live, missing)
	}
	return nil
}

func down(args []string) error {
	runDir, _, err := parse("down", args, nil, nil)
	if err != nil {
		return err
	}
	s, err := readState(runDir)
	if err != nil {
		return err
	}
	if alive(s.PID) {
		if err := syscall.Kill(s.PID, syscall.SIGTERM); err != nil {
			return fmt.Errorf("failed to signal aether-node up (pid %d): %w", s.PID, err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for alive(s.PID) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if alive(s.PID) {
			return fmt.Errorf("aether-node up (pid %d) did not stop within 20s", s.PID)
		}
	}
	// If "up" died without tearing down, its namespaces are now a dead
	// owner's and the sweep removes them.
	removed, err := netns.Sweep()
	if len(removed) > 0 {
		fmt.Printf("swept %d namespace(s) left by pid %d\n", len(removed), s.PID)
	}
	_ = os.Remove(filepath.Join(runDir, "state.json"))
	return err
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
	if err := fs.Parse(args); err != nil {
		return err
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
	return node.ServeBackend(ctx, node.BackendConfig{Name: *name, Record: *record, UDP: u, TCP: t})
}
