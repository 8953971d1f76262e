package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/privileged"
)

// readme is the CNI's README, from the repository root.
var readme = filepath.Join("mesh", "cni", "README.md")

// readmeBlock returns the first ```sh block after heading in the CNI's
// README.
func readmeBlock(t *testing.T, root, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, readme))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no heading %q", readme, heading)
	}
	_, rest, ok = strings.Cut(rest, "```sh\n")
	if !ok {
		t.Fatalf("%s has no sh block after %q", readme, heading)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("the sh block after %q is not closed", heading)
	}
	return block
}

// TestReadmeByHand runs mesh/cni/README.md's by-hand block as written, from the
// repository root as a reader would: it must succeed, show the divert pair,
// and leave no conf.json in the repository root.
func TestReadmeByHand(t *testing.T) {
	privileged.Require(t)
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the README block needs iproute2's ip: %v", err)
	}
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	// The block's one file; a copy left by an earlier run would hide a
	// new one.
	conf := filepath.Join(root, "conf.json")
	if _, err := os.Stat(conf); err == nil {
		t.Fatalf("%s exists before the run; remove it", conf)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", readmeBlock(t, root, "## The CNI plugin by hand"))
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		// The block names its namespace after the shell's pid; drop it if
		// the block stopped before its own ip netns del.
		ns := fmt.Sprintf("aeth-%d-conf", cmd.Process.Pid)
		if _, serr := os.Stat(filepath.Join("/run/netns", ns)); serr == nil {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	}
	if _, err := os.Stat(conf); err == nil {
		t.Errorf("the README block wrote %s into the repository root (removed again: %v)", conf, os.Remove(conf))
	}
	if err != nil {
		t.Fatalf("the README block failed: %v\n%s", err, out)
	}
	for _, want := range []string{"from all fwmark 0xae71 lookup 2791", "local default dev lo"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the README block's output lacks %q:\n%s", want, out)
		}
	}
}
