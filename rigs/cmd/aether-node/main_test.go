package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/wait"
)

func writeState(t *testing.T, s State) {
	t.Helper()
	if err := os.MkdirAll(s.RunDir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.RunDir, "state.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

func TestStatusPrintsEachNodesAddresses(t *testing.T) {
	s := &State{Scenario: "x.yaml", RunDir: "/r", Nodes: []NodeState{
		{Name: "n1", Netns: "aeth-1-n1", AgentMetrics: "127.0.0.1:15090", ProxyMetrics: "127.0.0.1:15091", HandoffSocket: "/r/nodes/n1/cni.sock"},
		{Name: "n2", Netns: "aeth-1-n2", AgentMetrics: "127.0.0.1:25090", ProxyMetrics: "127.0.0.1:25091"},
	}}
	var out bytes.Buffer
	printState(&out, s, true)
	for _, want := range []string{
		"inside netns aeth-1-n1): agent http://127.0.0.1:15090/metrics, proxy http://127.0.0.1:15091/metrics",
		"inside netns aeth-1-n2): agent http://127.0.0.1:25090/metrics, proxy http://127.0.0.1:25091/metrics",
		"curl --unix-socket /r/nodes/n1/cni.sock http://agent/v1/pods",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// status and down without SCENARIO act on the cluster that is up: the one
// whose "up" is alive, else the only one recorded; several are an error
// that lists them.
func TestRunningClusterIsFoundWithoutAScenario(t *testing.T) {
	root := t.TempDir()
	if _, err := runningCluster(root); err == nil || !strings.Contains(err.Error(), "no cluster is up") {
		t.Fatalf("with nothing recorded: %v", err)
	}
	stale := State{PID: deadPID(t), RunDir: filepath.Join(root, "stale")}
	writeState(t, stale)
	if got, err := runningCluster(root); err != nil || got != stale.RunDir {
		t.Fatalf("with one crashed run: %q, %v; want %s", got, err, stale.RunDir)
	}
	up := State{PID: os.Getpid(), RunDir: filepath.Join(root, "up")}
	writeState(t, up)
	if got, err := runningCluster(root); err != nil || got != up.RunDir {
		t.Fatalf("with one live and one crashed run: %q, %v; want %s", got, err, up.RunDir)
	}
	other := State{PID: os.Getppid(), RunDir: filepath.Join(root, "other")}
	writeState(t, other)
	_, err := runningCluster(root)
	if err == nil || !strings.Contains(err.Error(), up.RunDir) || !strings.Contains(err.Error(), other.RunDir) {
		t.Fatalf("with two live runs: %v; want an error naming both", err)
	}

	runRoot = root
	t.Cleanup(func() { runRoot = "/run/aether-node" })
	if err := os.Remove(filepath.Join(other.RunDir, "state.json")); err != nil {
		t.Fatal(err)
	}
	if dir, _, err := parse("down", nil, nil, nil, nil); err != nil || dir != up.RunDir {
		t.Fatalf("down without SCENARIO chose %q, %v; want %s", dir, err, up.RunDir)
	}
	var mode, bin string
	if _, _, err := parse("up", nil, &mode, &bin, nil); err == nil {
		t.Fatal("up without SCENARIO was accepted")
	}
}

// A failed up (here: an unknown capture mode) leaves no run dir it made.
func TestFailedUpLeavesNoRunDir(t *testing.T) {
	runDir := filepath.Join(t.TempDir(), "udproute")
	err := up([]string{"--mode", "ebpf", "--run-dir", runDir, "../../../fixtures/scenarios/udproute.yaml"})
	if err == nil || !strings.Contains(err.Error(), "ebpf") {
		t.Fatalf("up with mode ebpf: %v", err)
	}
	if _, serr := os.Stat(runDir); serr == nil {
		t.Fatalf("failed up left %s", runDir)
	}
	// A run dir the user made beforehand is theirs: it stays.
	if err := os.Mkdir(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := up([]string{"--mode", "ebpf", "--run-dir", runDir, "../../../fixtures/scenarios/udproute.yaml"}); err == nil {
		t.Fatal("up with mode ebpf succeeded")
	}
	if _, serr := os.Stat(runDir); serr != nil {
		t.Fatalf("failed up removed the run dir the user made: %v", serr)
	}
}

// envFakeUp makes the test binary play an "up": it makes a namespace, writes
// its state and tears the namespace down on SIGTERM.
const envFakeUp = "AETHER_NODE_TEST_FAKE_UP"

// envFakeMulti makes the fake up a multi-cluster run's.
const envFakeMulti = "AETHER_NODE_TEST_FAKE_MULTI"

func TestMain(m *testing.M) {
	if dir := os.Getenv(envFakeUp); dir != "" {
		os.Exit(fakeUp(dir))
	}
	os.Exit(m.Run())
}

func fakeUp(runDir string) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	br, err := netns.Create("fake-bridge")
	if err != nil {
		return 1
	}
	ns, err := netns.Create("fake-node")
	if err != nil {
		return 1
	}
	st := State{PID: os.Getpid(), RunDir: runDir, Bridge: br.Name, Nodes: []NodeState{{Name: "n1", Netns: ns.Name}}}
	if os.Getenv(envFakeMulti) != "" {
		// Two clusters on a shared network, as a clusters file's up.
		wan, err := netns.Create("fake-wan")
		if err != nil {
			return 1
		}
		br2, err := netns.Create("fake-bridge2")
		if err != nil {
			return 1
		}
		ns2, err := netns.Create("fake-node2")
		if err != nil {
			return 1
		}
		c1, c2 := st, State{RunDir: filepath.Join(runDir, "c2"), Bridge: br2.Name, Name: "c2", Nodes: []NodeState{{Name: "n2", Netns: ns2.Name}}}
		c1.Name, c1.RunDir, c1.PID = "c1", filepath.Join(runDir, "c1"), 0
		for _, d := range []string{c1.RunDir, c2.RunDir} {
			if err := os.MkdirAll(filepath.Join(d, "logs"), 0o755); err != nil {
				return 1
			}
			if err := os.WriteFile(filepath.Join(d, "export.yaml"), nil, 0o644); err != nil {
				return 1
			}
		}
		st = State{PID: os.Getpid(), RunDir: runDir, WAN: wan.Name, Clusters: []State{c1, c2}}
	}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(runDir, "state.json"), b, 0o644); err != nil {
		return 1
	}
	<-sig
	if err := netns.Cleanup(); err != nil {
		return 1
	}
	return 0
}

// fakeCluster starts a fake up in runDir and returns its state once
// written; the process is killed at cleanup if down did not stop it.
func fakeCluster(t *testing.T, runDir string, env ...string) *State {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), envFakeUp+"="+runDir), env...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-done })
	var s *State
	if _, err := wait.Until(context.Background(), 30*time.Second, 20*time.Millisecond, func() (bool, error) {
		s, _ = readState(runDir)
		return s != nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if s == nil {
		t.Fatal("the fake up wrote no state")
	}
	return s
}

// down says what it stopped and which of the cluster's namespaces went.
func TestDownSaysWhatItRemoved(t *testing.T) {
	privileged.Require(t)
	runDir := t.TempDir()
	s := fakeCluster(t, runDir)
	var out bytes.Buffer
	if err := stopCluster(&out, s, 20*time.Second, false); err != nil {
		t.Fatalf("down: %v\n%s", err, out.String())
	}
	removed := s.Bridge + " " + s.Nodes[0].Netns
	for _, want := range []string{"stopped aether-node up (pid ", "removed 2 namespace(s) of the cluster: " + removed, "kept logs and backend records in " + runDir} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("down did not say %q:\n%s", want, out.String())
		}
	}
	for _, name := range []string{s.Bridge, s.Nodes[0].Netns} {
		if _, err := os.Lstat(filepath.Join(netns.BindDir, name)); err == nil {
			t.Errorf("%s survived down", name)
		}
	}
}

// --mode accepts the three modes the usage names and refuses a typo
// naming all three; "none" is the rig's network without the mesh.
func TestCaptureModeNamesEveryMode(t *testing.T) {
	for flag, want := range map[string]string{"tproxy": "tproxy", "redirect": "redirect", "none": ""} {
		if m, err := captureMode(flag); err != nil || string(m) != want {
			t.Errorf("--mode %s: got %q, %v", flag, m, err)
		}
	}
	if _, err := captureMode("tprox"); err == nil || err.Error() != `unknown --mode "tprox" (want tproxy, redirect or none)` {
		t.Errorf("--mode tprox: got %v", err)
	}
}

// down with nothing up succeeds, saying so, so a cleanup script can always
// run it; it still sweeps what dead runs left.
func TestDownWithNothingUpSucceeds(t *testing.T) {
	privileged.Require(t)
	runRoot = t.TempDir()
	t.Cleanup(func() { runRoot = "/run/aether-node" })
	var out bytes.Buffer
	if err := down(&out, nil); err != nil {
		t.Fatalf("down with nothing up: %v\n%s", err, out.String())
	}
	if !strings.HasPrefix(out.String(), "nothing to remove: no cluster is up") {
		t.Fatalf("down with nothing up said:\n%s", out.String())
	}
	out.Reset()
	if err := down(&out, []string{"--run-dir", filepath.Join(runRoot, "never-up")}); err != nil {
		t.Fatalf("down of a run dir with nothing in it: %v\n%s", err, out.String())
	}
}

// down --purge removes the run dir after the teardown, and only a dir that
// holds nothing but what up writes: its logs and records, and the CA and
// access log dirs it gives the agents.
func TestDownPurgeRemovesTheRunDir(t *testing.T) {
	privileged.Require(t)
	runDir := filepath.Join(t.TempDir(), "run")
	dirs := []string{filepath.Join(runDir, "logs"), filepath.Join(runDir, "records")}
	args := meshArgs(runDir)
	for i, a := range args {
		if a == "--ca-dir" || a == "--access-log-dir" {
			dirs = append(dirs, args[i+1])
		}
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(runDir, "records", "default~a.jsonl"), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeCluster(t, runDir)
	var out bytes.Buffer
	if err := down(&out, []string{"--purge", "--run-dir", runDir}); err != nil {
		t.Fatalf("down --purge: %v\n%s", err, out.String())
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("down --purge left %s (stat: %v):\n%s", runDir, err, out.String())
	}
	if !strings.Contains(out.String(), "purged run dir "+runDir) {
		t.Errorf("down --purge did not say it purged:\n%s", out.String())
	}

	mine := t.TempDir()
	if err := os.WriteFile(filepath.Join(mine, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := down(&out, []string{"--purge", "--run-dir", mine}); err == nil || !strings.Contains(err.Error(), `"notes.txt"`) {
		t.Fatalf("down --purge of a dir holding other files: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mine, "notes.txt")); err != nil {
		t.Fatalf("down --purge removed a file it does not own: %v", err)
	}
}

// A misspelt command is named, not answered with the usage line alone.
func TestRunNamesAnUnknownCommand(t *testing.T) {
	err := run([]string{"upp", "fixtures/scenarios/mtls.yaml"})
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), `unknown command "upp"`) {
		t.Fatalf("run(upp) = %v, want a usage error naming \"upp\"", err)
	}
	if err := run(nil); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "no command") {
		t.Fatalf("run() = %v, want a usage error saying no command was given", err)
	}
}

// status of a multi-cluster run shows each cluster: its name, trust
// domain, gateway address, nodes and pods.
func TestStatusShowsEachCluster(t *testing.T) {
	s := &State{Scenario: "multicluster.yaml", RunDir: "/r", WAN: "aeth-1-m1~wan", Clusters: []State{
		{Name: "cluster-1", TrustDomain: "cluster-1.aether.test", MeshDomain: "one.mesh.test", RunDir: "/r/cluster-1", Gateway: "172.30.0.10",
			ExportFile: "/r/cluster-1/export.yaml", Nodes: []NodeState{{Name: "c1-gw", Netns: "aeth-1-c1~c1-gw", Underlay: "10.243.0.2"}},
			Pods: []PodState{{Name: "web-0", Namespace: "demo", Node: "c1-a", IP: "10.244.1.10", Netns: "aeth-1-c1~c1-a~demo~web-0"}}},
		{Name: "cluster-2", TrustDomain: "cluster-2.aether.test", MeshDomain: "two.mesh.test", RunDir: "/r/cluster-2", Gateway: "172.30.0.20",
			Nodes: []NodeState{{Name: "c2-b", Netns: "aeth-1-c2~c2-b", Underlay: "10.243.1.1"}}},
	}}
	var out bytes.Buffer
	printState(&out, s, true)
	for _, want := range []string{
		"2 clusters of multicluster.yaml",
		"shared network 172.30.0.0/24, bridge netns aeth-1-m1~wan",
		"cluster cluster-1: trust domain cluster-1.aether.test, mesh domain one.mesh.test",
		"gateway 172.30.0.10:18009, export /r/cluster-1/export.yaml",
		"cluster cluster-2: trust domain cluster-2.aether.test",
		"gateway 172.30.0.20:18009",
		"underlay 10.243.1.1",
		"demo/web-0",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, out.String())
		}
	}
}

// down of a multi-cluster run removes every cluster's namespaces and the
// shared network's, and --purge its cluster dirs.
func TestDownRemovesEveryCluster(t *testing.T) {
	privileged.Require(t)
	runDir := filepath.Join(t.TempDir(), "multi")
	if err := os.MkdirAll(runDir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := fakeCluster(t, runDir, envFakeMulti+"=1")
	all := existing(s, true)
	if len(all) != 5 {
		t.Fatalf("the fake run has namespaces %v, want 5 (wan, two bridges, two nodes)", all)
	}
	var out bytes.Buffer
	if err := down(&out, []string{"--purge", "--run-dir", runDir}); err != nil {
		t.Fatalf("down: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "removed 5 namespace(s) of the cluster") {
		t.Errorf("down did not say it removed all five:\n%s", out.String())
	}
	for _, name := range all {
		if _, err := os.Lstat(filepath.Join(netns.BindDir, name)); err == nil {
			t.Errorf("%s survived down", name)
		}
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("down --purge left %s (stat: %v):\n%s", runDir, err, out.String())
	}
}
