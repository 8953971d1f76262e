package main

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/registry"
)

type updates []registry.Update

func (u updates) Watch(context.Context) <-chan registry.Update {
	ch := make(chan registry.Update, len(u))
	for _, x := range u {
		ch <- x
	}
	close(ch)
	return ch
}

func nodes(names ...string) registry.Update {
	st := &registry.State{}
	for _, n := range names {
		st.Nodes = append(st.Nodes, registry.Node{Name: n})
	}
	return registry.Update{State: st}
}

// A node the registry does not list is warned about once per change of
// that condition, naming the node and the nodes the registry knows; every
// update is still passed on.
func TestUnknownNodeIsWarnedOncePerChange(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	src := updates{
		nodes("node-a", "node-b"), // unknown from the start
		nodes("node-a", "node-b"), // still: no second warning
		{Err: context.Canceled},   // an error says nothing about nodes
		nodes("node-a", "node-x"), // listed now
		nodes("node-x"),
		nodes("node-a"), // gone again: warned again
	}
	n := 0
	for range warnUnknownNode(src, "node-x", log).Watch(context.Background()) {
		n++
	}
	if n != len(src) {
		t.Fatalf("%d updates passed on, want %d", n, len(src))
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var warns []string
	for _, l := range lines {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	if len(warns) != 2 {
		t.Fatalf("%d warnings, want 2 (at the start and when node-x left again); log:\n%s", len(warns), logs.String())
	}
	for i, want := range []string{"registry_nodes=node-a,node-b", "registry_nodes=node-a"} {
		if !strings.Contains(warns[i], "node=node-x") || !strings.HasSuffix(warns[i], want) {
			t.Errorf("warning %d = %q, want it to name node-x and end in %q", i, warns[i], want)
		}
	}
	if !strings.Contains(logs.String(), "level=INFO msg=\"the registry lists this node again\" node=node-x") {
		t.Errorf("no note when node-x was listed; log:\n%s", logs.String())
	}
}

// Through the real binary: a --node the scenario does not list is named in
// a warning beside the nodes it does list.
func TestAgentWarnsOfANodeTheRegistryDoesNotList(t *testing.T) {
	dir := t.TempDir()
	cmd := agentCmd(t, "--node", "node-x",
		"--registry-file", "../../../fixtures/scenarios/udproute.yaml",
		"--listen", "unix://"+filepath.Join(dir, "xds.sock"),
		"--metrics-addr", "")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "level=WARN") && strings.Contains(sc.Text(), "node=node-x") {
				found <- sc.Text()
				return
			}
		}
		close(found)
	}()
	// The agent logs the warning with its first registry read; an agent
	// that never does is stopped after a bound far above that, which ends
	// its log.
	stop := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
	defer stop.Stop()
	line, ok := <-found
	if !ok {
		t.Fatal("the agent ended its log without warning that node-x is not in the registry")
	}
	if !strings.HasSuffix(line, "registry_nodes=node-a") {
		t.Errorf("the warning does not name the registry's nodes: %s", line)
	}
}
