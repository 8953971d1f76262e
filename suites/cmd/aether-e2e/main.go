// Command aether-e2e runs the suites on a kind cluster. It checks its
// prerequisites first and, when one is missing, fails and says which and
// why, rather than reporting a run that did not happen.
package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// prerequisite is one thing a kind run needs from the machine.
type prerequisite struct {
	name  string
	check func(ctx context.Context) error
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var missing []string
	for _, p := range prerequisites() {
		if err := p.check(ctx); err != nil {
			missing = append(missing, fmt.Sprintf("  - %s: %v", p.name, err))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "aether-e2e: FAIL: cannot run the suites on kind; missing:\n%s\n"+
			"The local equivalent needs none of these: `make gate` runs every suite on the embedded netns cluster.\n",
			strings.Join(missing, "\n"))
		os.Exit(1)
	}
	fmt.Fprintln(os.Stderr, "aether-e2e: FAIL: a container engine and kind are present, but this build ships no kind provider for the suites yet; nothing was run")
	os.Exit(1)
}

func prerequisites() []prerequisite {
	return []prerequisite{
		{"a container engine (docker or podman) answering", func(ctx context.Context) error {
			var errs []string
			for _, engine := range []string{"docker", "podman"} {
				path, err := exec.LookPath(engine)
				if err != nil {
					errs = append(errs, engine+" not installed")
					continue
				}
				out, err := exec.CommandContext(ctx, path, "info", "--format", "{{.ServerVersion}}").CombinedOutput()
				if err == nil {
					return nil
				}
				errs = append(errs, fmt.Sprintf("%s is installed but its engine does not answer (%s)", engine, firstLine(out, err)))
			}
			return fmt.Errorf("%s", strings.Join(errs, "; "))
		}},
		{"the kind binary", func(context.Context) error {
			if _, err := exec.LookPath("kind"); err != nil {
				return fmt.Errorf("kind is not on PATH")
			}
			return nil
		}},
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
