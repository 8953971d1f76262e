// Command aether-e2e runs the suites on kind. It checks its prerequisites
// first and, when one is missing, fails within seconds and says which and
// why, rather than reporting a run that did not happen. With them present
// it runs the suite packages with AETHER_CLUSTER=kind: each suite's TestMain
// (suites/provider, suites/cluster/kind) creates a kind cluster with two
// workers, builds and loads the images, installs the mesh, runs the suite,
// exports the cluster's logs and deletes it. A suite that wrote no result
// fails the run, whatever go test said.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The environment a kind run gives the suite packages (rigs/results,
// suites/cluster, suites/cluster/kind; main_test.go holds them equal). The
// names are spelled here so this command imports none of those packages:
// it must build and report a missing engine in seconds, before anything
// heavy compiles.
const (
	envReportDir    = "AETHER_REPORT_DIR"
	envProvider     = "AETHER_CLUSTER"
	envKindArtifact = "AETHER_KIND_ARTIFACTS"
)

// defaultSuites are the suites whose TestMain is suites/provider.Main, as
// the Makefile's E2E_SUITES lists them (main_test.go holds them equal).
const defaultSuites = "udproute,mtls,eastwest"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("aether-e2e", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "reports/latest/e2e", "where results (suites/), kind logs and images (kind/) go")
	suites := fs.String("suites", defaultSuites, "comma-separated suites, each a package under suites/ that must write its result")
	timeout := fs.Duration("timeout", 60*time.Minute, "go test timeout for the whole run")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	missing := checkPrerequisites(ctx, prerequisites())
	cancel()
	if len(missing) > 0 {
		fmt.Fprintf(stderr, "aether-e2e: FAIL: cannot run the suites on kind; missing:\n%s\n"+
			"Nothing was run. `make gate` runs the same suites on the embedded netns cluster, which needs none of these.\n",
			strings.Join(missing, "\n"))
		return 1
	}
	return runSuites(stdout, stderr, *out, strings.Split(*suites, ","), *timeout)
}

// prerequisite is one thing a kind run needs from the machine.
type prerequisite struct {
	name  string
	check func(ctx context.Context) error
}

func checkPrerequisites(ctx context.Context, ps []prerequisite) []string {
	var missing []string
	for _, p := range ps {
		if err := p.check(ctx); err != nil {
			missing = append(missing, fmt.Sprintf("  - %s: %v", p.name, err))
		}
	}
	return missing
}

// engines are the container engines kind's Go API drives (its node
// providers), with the command that proves the engine answers.
var engines = []struct {
	name string
	info []string
}{
	{"docker", []string{"info", "--format", "{{.ServerVersion}}"}},
	{"podman", []string{"info", "--format", "{{.Version.Version}}"}},
	{"nerdctl", []string{"info", "--format", "{{.ServerVersion}}"}},
}

func prerequisites() []prerequisite {
	return []prerequisite{
		{"a container engine kind can drive (docker, podman or nerdctl) answering", func(ctx context.Context) error {
			var errs []string
			for _, e := range engines {
				path, err := exec.LookPath(e.name)
				if err != nil {
					errs = append(errs, e.name+" not installed")
					continue
				}
				out, err := exec.CommandContext(ctx, path, e.info...).CombinedOutput()
				if err == nil {
					return nil
				}
				errs = append(errs, fmt.Sprintf("%s is installed but its engine does not answer (%s)", e.name, firstLine(out, err)))
			}
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}},
		{"the go tool, which builds the images and runs the suites", func(context.Context) error {
			if _, err := exec.LookPath("go"); err != nil {
				return fmt.Errorf("go is not on PATH")
			}
			return nil
		}},
	}
}

// runSuites runs each suite package on kind and then checks that each
// wrote its result: a run that produced none did not happen.
func runSuites(stdout, stderr io.Writer, out string, suites []string, timeout time.Duration) int {
	abs, err := filepath.Abs(out)
	if err != nil {
		fmt.Fprintf(stderr, "aether-e2e: FAIL: %v\n", err)
		return 1
	}
	resultDir, kindDir := filepath.Join(abs, "suites"), filepath.Join(abs, "kind")
	for _, d := range []string{resultDir, kindDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			fmt.Fprintf(stderr, "aether-e2e: FAIL: %v\n", err)
			return 1
		}
	}
	args := []string{"test", "-count=1", "-p=1", "-timeout=" + timeout.String(), "-v"}
	for _, s := range suites {
		args = append(args, "./suites/"+strings.TrimSpace(s)+"/")
	}
	root, err := moduleRoot()
	if err != nil {
		fmt.Fprintf(stderr, "aether-e2e: FAIL: %v\n", err)
		return 1
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.Env = append(os.Environ(), envProvider+"=kind", envKindArtifact+"="+kindDir, envReportDir+"="+resultDir)
	fmt.Fprintf(stderr, "aether-e2e: go %s (AETHER_CLUSTER=kind)\n", strings.Join(args, " "))
	runErr := cmd.Run()
	var noResult []string
	for _, s := range suites {
		if _, err := os.Stat(filepath.Join(resultDir, strings.TrimSpace(s)+".json")); err != nil {
			noResult = append(noResult, strings.TrimSpace(s))
		}
	}
	fmt.Fprintf(stderr, "aether-e2e: results in %s, kind logs in %s/<suite>/logs\n", resultDir, kindDir)
	switch {
	case len(noResult) > 0:
		fmt.Fprintf(stderr, "aether-e2e: FAIL: no result from %s: those suites did not run on kind (see the output above)\n", strings.Join(noResult, ", "))
		return 1
	case runErr != nil:
		fmt.Fprintf(stderr, "aether-e2e: FAIL: the suite packages failed on kind: %v\n", runErr)
		return 1
	}
	return 0
}

// moduleRoot is the nearest directory up from here holding a go.mod: the
// suites are run as packages of that module.
func moduleRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod above the working directory; run aether-e2e inside the repository")
		}
		d = parent
	}
}

func firstLine(out []byte, err error) string {
	s := strings.TrimSpace(string(out))
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		s = err.Error()
	}
	return s
}
