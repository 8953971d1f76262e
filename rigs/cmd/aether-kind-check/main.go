// Command aether-kind-check asks the container engine whether it can host
// kind's node containers (rigs/kind/envcheck), building its probe image
// first if the engine lacks it, and prints the checks with their evidence.
// It exits 0 when kind's own node flags pass every check, 1 when they do
// not, and 2 when the check itself could not run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/aether-mesh/aether/rigs/kind/envcheck"
	"github.com/aether-mesh/aether/rigs/kind/rootfs"
)

func main() {
	work := flag.String("work-dir", rootfs.WorkDir(), "where the probe's root filesystem is built (removed afterwards)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: aether-kind-check [-work-dir DIR]\n\n"+
			"Starts a container with kind's node flags and checks systemd, /dev/kmsg, cgroups,\n"+
			"nftables and a nested container in it. Needs root and a container engine.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "aether-kind-check: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	img, err := rootfs.Build(ctx, envcheck.ProbeSpec(), *work, say)
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-kind-check: %v\n", err)
		os.Exit(2)
	}
	r, err := envcheck.Run(ctx, envcheck.Options{Image: img, Say: say})
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-kind-check: %v\n", err)
		os.Exit(2)
	}
	fmt.Print(r.Table())
	if !r.HostsKind() {
		os.Exit(1)
	}
}
