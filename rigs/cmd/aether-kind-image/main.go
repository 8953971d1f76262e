// Command aether-kind-image builds the kind node image offline
// (rigs/kind/nodeimage) and prints its reference on stdout; progress goes
// to stderr, one line per component with its time or its cache hit.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/aether-mesh/aether/rigs/kind/nodeimage"
	"github.com/aether-mesh/aether/rigs/kind/rootfs"
	"github.com/aether-mesh/aether/rigs/node"
)

func main() {
	cache := flag.String("cache", nodeimage.DefaultCache(), "where built programs are kept between runs")
	work := flag.String("work-dir", rootfs.WorkDir(), "where trees and build contexts are made (removed afterwards)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: aether-kind-image [-cache DIR] [-work-dir DIR]\n\n"+
			"Builds the kind node image from Debian packages and Go modules; needs root, debootstrap,\n"+
			"libseccomp-dev and a container engine. A second run with the same inputs rebuilds nothing.\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "aether-kind-image: unexpected argument %q\n", flag.Arg(0))
		flag.Usage()
		os.Exit(2)
	}
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-kind-image: %v\n", err)
		os.Exit(2)
	}
	root, err := node.ModuleRoot(wd)
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-kind-image: run it inside the repository: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	say := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	ref, err := nodeimage.Build(ctx, nodeimage.Options{Root: root, Cache: *cache, WorkDir: *work, Say: say})
	if err != nil {
		fmt.Fprintf(os.Stderr, "aether-kind-image: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(ref)
}
