// Command aether-cni-install is the CNI DaemonSet's container: it installs
// aether-cni on its node (package mesh/cniinstall), keeps it installed
// while the pod network plugin may rewrite its conflist, and removes it on
// SIGTERM. With --check (and the same flags) it is its own readiness
// probe: ready once the node carries its entry.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/mesh/cniinstall"
	"github.com/aether-mesh/aether/mesh/constants"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "aether-cni-install: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("aether-cni-install", flag.ContinueOnError)
	binary := fs.String("binary", "/usr/local/bin/aether-cni", "the aether-cni binary to install")
	binDir := fs.String("cni-bin-dir", "/host/opt/cni/bin", "the node's CNI bin dir, as mounted")
	confDir := fs.String("cni-conf-dir", "/host/etc/cni/net.d", "the node's CNI conf dir, as mounted")
	mode := fs.String("capture-mode", string(constants.CaptureTProxy), "captureMode of the chained entry: tproxy or redirect")
	exclude := fs.String("exclude-namespaces", "kube-system", "comma-separated namespaces aether-cni leaves alone")
	every := fs.Duration("recheck", 5*time.Second, "how often the entry is checked and put back")
	check := fs.Bool("check", false, "exit 0 if the node carries this installer's entry, 1 if not (the readiness probe)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := constants.ParseCaptureMode(*mode); err != nil {
		return fmt.Errorf("--capture-mode: %w", err)
	}
	var excl []any
	for _, ns := range strings.Split(*exclude, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			excl = append(excl, ns)
		}
	}
	c := cniinstall.Config{Binary: *binary, BinDir: *binDir, ConfDir: *confDir,
		Plugin: map[string]any{"captureMode": *mode, "excludeNamespaces": excl}}
	if *check {
		return cniinstall.Installed(c)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The network plugin may write its conflist after this pod starts, or
	// rewrite it later: keep checking rather than install once.
	for {
		changed, err := cniinstall.Install(c)
		switch {
		case err != nil:
			log.Warn("aether-cni not installed yet", "err", err)
		case changed:
			log.Info("aether-cni chained", "conf-dir", *confDir, "capture-mode", *mode)
		}
		select {
		case <-ctx.Done():
			log.Info("removing aether-cni from the node")
			return cniinstall.Uninstall(c)
		case <-time.After(*every):
		}
	}
}
