// Command aether-proxy is the node's Go data plane: it runs in the node
// netns ("hostNetwork"), takes its configuration from the agent over delta
// ADS, binds capture listeners into pod namespaces, and serves Prometheus
// counters on a loopback address. SIGTERM or SIGINT stops it cleanly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "aether-proxy:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("aether-proxy", flag.ContinueOnError)
	node := fs.String("node", "", "Envoy node id: the node's name (required)")
	target := fs.String("xds", "", "the agent's ADS address: unix:///path or host:port (required)")
	metricsAddr := fs.String("metrics-addr", "127.0.0.1:15091", "loopback address for /metrics (the agent's default is 15090)")
	markFlag := fs.String("mark", "0", "SO_MARK on upstream egress, which leaves from the node netns; 0 sets none, and a mark the node's own rules would match is refused")
	batch := fs.Int("batch", proxy.DefaultBatch, "UDP datagrams per recvmmsg/sendmmsg (1 disables batching)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *node == "" || *target == "" {
		return errors.New("--node and --xds are required")
	}
	mark, err := parseMark(*markFlag)
	if err != nil {
		return err
	}
	host, _, err := net.SplitHostPort(*metricsAddr)
	if err != nil {
		return fmt.Errorf("invalid --metrics-addr %q: %w", *metricsAddr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("invalid --metrics-addr %q: must be a loopback address", *metricsAddr)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p := proxy.New(proxy.Options{Node: *node, XDS: *target, Mark: uint32(mark), Batch: *batch, Log: log})

	ln, err := net.Listen("tcp", *metricsAddr)
	if err != nil {
		return fmt.Errorf("failed to listen for metrics on %s: %w", *metricsAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", p.Metrics().Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log.Info("aether-proxy started", "node", *node, "xds", *target, "metrics", ln.Addr().String(), "mark", fmt.Sprintf("%#x", mark), "batch", *batch)
	err = p.Run(ctx)
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	log.Info("aether-proxy stopped")
	return err
}

// parseMark reads --mark and refuses a mark that collides with a mark the
// node netns carries (mesh/constants ForeignMarks): the proxy's upstream
// sockets live there, so kube-proxy's KUBE-FIREWALL would drop 0xae7e and
// Cilium would read it as its IPsec mark.
func parseMark(s string) (uint32, error) {
	m, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, fmt.Errorf("invalid --mark %q: %w", s, err)
	}
	use := constants.MarkUse{Name: "--mark", Mark: uint32(m), Netns: constants.NodeNetns}
	if err := constants.CheckMarkUses([]constants.MarkUse{use}, constants.ForeignMarks()); err != nil {
		return 0, fmt.Errorf("invalid --mark %q: %w", s, err)
	}
	return uint32(m), nil
}
