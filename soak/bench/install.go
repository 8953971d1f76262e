package bench

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strings"
)

// Tool is a program the benchmark runs and the Debian package it comes in.
type Tool struct{ Program, Package string }

// Tools are the programs the benchmark needs: the load generators and the
// two real peers.
var Tools = []Tool{
	{"h2load", "nghttp2-client"},
	{"iperf3", "iperf3"},
	{"haproxy", "haproxy"},
	{"nginx", "nginx-light"},
}

// policyRC is Debian's hook invoke-rc.d asks before it starts a package's
// service; exit 101 means "not allowed", so an install starts nothing in
// the root namespace.
const policyRC = "/usr/sbin/policy-rc.d"

// Missing returns the tools whose program is not on PATH.
func Missing(tools []Tool) []Tool {
	var out []Tool
	for _, t := range tools {
		if _, err := exec.LookPath(t.Program); err != nil {
			out = append(out, t)
		}
	}
	return out
}

// Install installs the packages of the missing tools with apt-get. While it
// runs, policy-rc.d forbids every service start, so haproxy's and nginx's
// packaged services never run in the root namespace; the benchmark starts
// its own instances inside the rig's node namespaces. A policy-rc.d that
// was there before is left as it was.
func Install(ctx context.Context, tools []Tool, logf func(string, ...any)) error {
	missing := Missing(tools)
	if len(missing) == 0 {
		return nil
	}
	var pkgs []string
	for _, t := range missing {
		pkgs = append(pkgs, t.Package)
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("programs %s are missing and there is no apt-get to install %s: %w", programs(missing), strings.Join(pkgs, " "), err)
	}
	_, err := os.Stat(policyRC)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.WriteFile(policyRC, []byte("#!/bin/sh\n# written by aether-bench for the length of an install\nexit 101\n"), 0o755); err != nil {
			return fmt.Errorf("failed to write %s: %w", policyRC, err)
		}
		defer os.Remove(policyRC)
	case err != nil:
		return fmt.Errorf("failed to read %s: %w", policyRC, err)
	}
	logf("installing %s (apt-get; services kept from starting by %s)", strings.Join(pkgs, " "), policyRC)
	cmd := exec.CommandContext(ctx, "apt-get", append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s: %w\n%s", strings.Join(pkgs, " "), err, tailText(string(out), 20))
	}
	if still := Missing(tools); len(still) > 0 {
		return fmt.Errorf("after apt-get install, still missing: %s", programs(still))
	}
	// Under systemd the packages also enable their units for the next
	// boot; the benchmark runs its own instances, so those are disabled
	// (and stopped, should anything have started them).
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		for _, unit := range []string{"haproxy", "nginx"} {
			if out, err := exec.CommandContext(ctx, "systemctl", "disable", "--now", unit).CombinedOutput(); err != nil {
				logf("systemctl disable --now %s: %v: %s", unit, err, strings.TrimSpace(string(out)))
			}
		}
	}
	return nil
}

// versionArgs is how each tool prints its version.
var versionArgs = map[string][]string{"h2load": {"--version"}, "iperf3": {"--version"}, "haproxy": {"-v"}, "nginx": {"-v"}}

// Versions returns each tool's version line, as the report records it.
func Versions(ctx context.Context, tools []Tool) map[string]string {
	out := map[string]string{}
	for _, t := range tools {
		b, err := exec.CommandContext(ctx, t.Program, versionArgs[t.Program]...).CombinedOutput()
		line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if err != nil {
			line = fmt.Sprintf("unknown (%v)", err)
		}
		out[t.Program] = line
	}
	return out
}

func programs(ts []Tool) string {
	var s []string
	for _, t := range ts {
		s = append(s, t.Program)
	}
	return strings.Join(s, ", ")
}

func tailText(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
