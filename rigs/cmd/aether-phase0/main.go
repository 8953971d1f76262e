// Command aether-phase0 runs proposal 038's Phase 0 rig on this machine and
// prints its table: every case with what was expected and what the
// receiver observed, controls first, then a one-line verdict.
//
//	aether-phase0 [-report DIR]
//
// With -report (or AETHER_REPORT_DIR) the result is also written as
// DIR/phase0.json. It needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN). The
// exit status is 0 only when the suite passes; 1 on a failure or a broken
// rig; 2 when the rig cannot run at all.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/phase0"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/redgreen"
)

func main() {
	report, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-phase0: %v\n", err)
		os.Exit(2)
	}
	os.Exit(run(report))
}

// parseFlags returns -report. The command takes no arguments: a directory
// given without -report would otherwise be ignored and no result written.
func parseFlags(args []string, stderr io.Writer) (string, error) {
	fs := flag.NewFlagSet("aether-phase0", flag.ContinueOnError)
	fs.SetOutput(stderr)
	report := fs.String("report", "", "directory to write phase0.json into (default $"+redgreen.EnvReportDir+"; none when both are empty)")
	if err := fs.Parse(args); err != nil {
		return "", err
	}
	if fs.NArg() > 0 {
		return "", fmt.Errorf("unexpected argument %q: give the report directory as -report %s", fs.Arg(0), fs.Arg(0))
	}
	return *report, nil
}

func run(reportDir string) int {
	if why := privileged.Missing(privileged.NetAdmin, privileged.SysAdmin); why != "" {
		fmt.Fprintf(os.Stderr, "aether-phase0: cannot run: %s\n", why)
		return 2
	}
	if removed, err := netns.Sweep(); err != nil {
		fmt.Fprintf(os.Stderr, "aether-phase0: failed to sweep stale namespaces: %v\n", err)
		return 2
	} else if len(removed) > 0 {
		fmt.Fprintf(os.Stderr, "aether-phase0: swept namespaces of dead runs: %v\n", removed)
	}

	// An interrupted run still removes its namespaces; a crash leaves them
	// to the next run's sweep.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		_ = netns.Cleanup()
		fmt.Fprintf(os.Stderr, "aether-phase0: interrupted by %v, namespaces removed\n", s)
		os.Exit(130)
	}()

	res, rigErr := phase0.Run(context.Background(), phase0.Scenarios())
	fmt.Print(res.Table())
	for _, c := range res.Cases {
		if !c.Matched {
			fmt.Printf("  %s (%s): %s\n", c.Name, c.Role, c.Reason)
		}
	}

	code := 0
	if res.Verdict != redgreen.Pass {
		code = 1
	}
	for _, err := range []error{rigErr, netns.Cleanup(), netns.LeakCheck()} {
		if err != nil {
			fmt.Fprintf(os.Stderr, "aether-phase0: %v\n", err)
			code = 1
		}
	}
	where := ""
	if reportDir == "" {
		reportDir = os.Getenv(redgreen.EnvReportDir)
	}
	if reportDir != "" {
		if err := res.Write(reportDir); err != nil {
			fmt.Fprintf(os.Stderr, "aether-phase0: %v\n", err)
			code = 1
		} else {
			where = fmt.Sprintf(" (report %s/%s.json)", reportDir, res.Suite)
		}
	}
	verdict := string(res.Verdict)
	if code != 0 && res.Verdict == redgreen.Pass {
		verdict = "FAIL (the rig did not clean up)"
	}
	fmt.Printf("aether-phase0: %s: %s%s\n", verdict, res.Reason, where)
	return code
}
