package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/rigs/results"
	"github.com/aether-mesh/aether/suites/cluster"
	"github.com/aether-mesh/aether/suites/cluster/kind"
)

func TestEnvironmentNamesMatchTheirPackages(t *testing.T) {
	for got, want := range map[string]string{envReportDir: results.EnvReportDir, envProvider: cluster.EnvProvider,
		envKindArtifact: kind.EnvArtifacts, "kind": cluster.Kind} {
		if got != want {
			t.Errorf("aether-e2e sets %q where the package reads %q", got, want)
		}
	}
}

// Without a container engine the run stops at the prerequisite check,
// names each engine and why it does not count, says nothing ran and points
// at `make gate`.
func TestNoContainerEngineFailsBeforeRunningAnything(t *testing.T) {
	bin := t.TempDir()
	// A docker CLI whose daemon is not running, as on a machine with the
	// client installed but no engine.
	fake := "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	code := run([]string{"-out", out}, &stdout, &stderr)
	msg := stderr.String()
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s", code, msg)
	}
	for _, want := range []string{
		"cannot run the suites on kind; missing:",
		"docker is installed but its engine does not answer (Cannot connect to the Docker daemon",
		"podman not installed",
		"nerdctl not installed",
		"go is not on PATH",
		"Nothing was run.",
		"`make gate` runs the same suites on the embedded netns cluster",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("output lacks %q:\n%s", want, msg)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("a run that did not happen printed to stdout: %q", stdout.String())
	}
	for _, d := range []string{"suites", "kind"} {
		if _, err := os.Stat(filepath.Join(out, d)); !os.IsNotExist(err) {
			t.Errorf("a run that did not happen made %s in %s", d, out)
		}
	}
}

// A suite package that passes but writes no result did not run on kind,
// and the run says so instead of passing.
func TestASuiteWithoutAResultFailsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go test on a package")
	}
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	// suites/cluster's own tests pass and write no suite result.
	code := runSuites(&stdout, &stderr, out, []string{"cluster"}, 0)
	if code != 1 || !strings.Contains(stderr.String(), "FAIL: no result from cluster") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "ok") && !strings.Contains(stdout.String(), "PASS") {
		t.Fatalf("the package itself should have passed:\n%s\n%s", stdout.String(), stderr.String())
	}
}

// Every suite that runs on a cluster provider (its TestMain is
// suites/provider.Main) is one make e2e runs, by the Makefile's
// E2E_SUITES and by this command's default; and each one listed does.
func TestE2ESuitesAreTheProviderSuites(t *testing.T) {
	dirs, err := filepath.Glob("../../*/*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var onProvider []string
	for _, f := range dirs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("provider.Main(m, ")) {
			onProvider = append(onProvider, filepath.Base(filepath.Dir(f)))
		}
	}
	slices.Sort(onProvider)
	onProvider = slices.Compact(onProvider)
	mk, err := os.ReadFile("../../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var makefile string
	for _, line := range strings.Split(string(mk), "\n") {
		if v, ok := strings.CutPrefix(line, "E2E_SUITES ?= "); ok {
			makefile = v
		}
	}
	for name, list := range map[string]string{"the Makefile's E2E_SUITES": makefile, "aether-e2e's -suites default": defaultSuites} {
		got := strings.Split(list, ",")
		slices.Sort(got)
		if !slices.Equal(got, onProvider) {
			t.Errorf("%s is %q; the suites on a cluster provider are %q", name, list, onProvider)
		}
	}
}
