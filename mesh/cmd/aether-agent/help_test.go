package main

import (
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// testOnlyFlags are the controls an aether-agent built with -tags
// aethercontrols carries, and the default build must not.
var testOnlyFlags = []string{
	"test-only-drop-pair-on-removal",
	"test-only-extra-roots",
	"test-only-gateway-first-service",
	"test-only-prune-unfetched-since-start",
	"test-only-quic-inbound-wildcard",
	"test-only-quic-resumption",
	"test-only-refuse-twin",
	"test-only-svid-omit-dns-sans",
	"test-only-twin-pool-per-downstream",
	"test-only-twin-shared-cert",
	"test-only-twin-shares-base-eds",
	"test-only-unanswered-refusals",
}

// buildAgent builds this package into a temporary directory, with tags.
func buildAgent(t *testing.T, tags ...string) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "aether-agent")
	args := []string{"build", "-o", bin}
	if len(tags) > 0 {
		args = append(args, "-tags", strings.Join(tags, ","))
	}
	out, err := exec.Command(goTool, append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

var flagLineRe = regexp.MustCompile(`(?m)^  -(\S+)`)

// flagsOf is every flag bin -h lists.
func flagsOf(t *testing.T, bin string) []string {
	t.Helper()
	out, _ := exec.Command(bin, "-h").CombinedOutput() // -h exits 0 or 2
	var flags []string
	for _, m := range flagLineRe.FindAllStringSubmatch(string(out), -1) {
		flags = append(flags, m[1])
	}
	if !slices.Contains(flags, "node") {
		t.Fatalf("%s -h lists no --node: not a usage\n%s", bin, out)
	}
	return flags
}

// The controls are out of the product: a default build of aether-agent
// lists no test-only flag, refuses one given anyway and refuses the #831
// controls of --upstream-cert; the build the rigs make (-tags
// aethercontrols) lists every control.
func TestControlsOnlyInTheTaggedBuild(t *testing.T) {
	def, tagged := buildAgent(t), buildAgent(t, "aethercontrols")

	for _, f := range flagsOf(t, def) {
		if strings.HasPrefix(f, "test-only") {
			t.Errorf("a default aether-agent lists --%s", f)
		}
	}
	var got []string
	for _, f := range flagsOf(t, tagged) {
		if strings.HasPrefix(f, "test-only") {
			got = append(got, f)
		}
	}
	if !slices.Equal(got, testOnlyFlags) {
		t.Errorf("aether-agent -tags aethercontrols lists test-only flags %v, want %v", got, testOnlyFlags)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--test-only-quic-resumption"}, "flag provided but not defined: -test-only-quic-resumption"},
		{[]string{"--trust-domain", "aether.test", "--ca-dir", t.TempDir(), "--upstream-cert", "static"},
			`--upstream-cert: "static" is a #831 control, built only into aether-agent -tags aethercontrols`},
	} {
		args := append([]string{"--node", "node-a", "--registry-file", "../../../fixtures/scenarios/two-udp-services.yaml",
			"--listen", "unix://" + filepath.Join(t.TempDir(), "agent.sock"), "--metrics-addr", ""}, c.args...)
		// An agent that accepts the arguments runs on: it is stopped, and
		// fails the case, rather than hanging the test.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		out, err := exec.CommandContext(ctx, def, args...).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("default aether-agent %v = %v, output %s; want a failure saying %q", c.args, err, out, c.want)
		}
	}
}
