// Command aether-proxy is the node's Go data plane: it runs in the node
// netns ("hostNetwork"), takes its configuration from the agent over delta
// ADS, binds capture listeners into pod namespaces, and serves Prometheus
// counters on a loopback address. SIGTERM or SIGINT stops it cleanly.
//
// It hot restarts as Envoy does (ARCHITECTURE.md, "Hot restart"): a
// process started with --restart-epoch N+1 takes the listening sockets
// and the metrics address over from the running epoch N, drains it and,
// after --parent-shutdown-time, has it exit.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// DefaultConcurrency is one thread: a request crosses about a dozen
// goroutines on its way through the proxy (the listener's connection, the
// HTTP/2 server's loop and writer, the handler, the upstream transport's
// reader and writer), and with a second thread idle each hand-off wakes
// it with a futex and sets it spinning in epoll, work the request never
// needed. On one thread the woken goroutine runs next on the same one.
// "make bench" measured the choice (soak/bench/README.md).
const DefaultConcurrency = 1

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
	concurrency := fs.Int("concurrency", DefaultConcurrency, "threads running Go code at once (GOMAXPROCS), as Envoy's --concurrency sets its workers; 0 keeps the runtime's choice, one per core")
	var hr restartFlags
	hr.register(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *node == "" || *target == "" {
		return errors.New("--node and --xds are required")
	}
	if err := hr.check(); err != nil {
		return err
	}
	if *concurrency < 0 {
		return fmt.Errorf("invalid --concurrency %d: must be 0 (one per core) or more", *concurrency)
	}
	if *concurrency > 0 {
		runtime.GOMAXPROCS(*concurrency)
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
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("epoch", hr.epoch)
	parent, err := hr.connect()
	if err != nil {
		return err
	}
	if parent != nil {
		// Closed when this process ends: a parent never told to exit
		// serves on (a failed handover rolls back).
		defer parent.Close()
	}
	p := proxy.New(proxy.Options{Node: *node, XDS: *target, Mark: uint32(mark), Batch: *batch, Log: log,
		Restart: &proxy.Restart{Epoch: hr.epoch, Parent: parent, DrainTime: hr.drainTime}})

	// The Go runtime's and the process's own figures (go_goroutines,
	// process_open_fds, process_resident_memory_bytes), as the agent
	// exports them: the soak's leak gates read them.
	p.Metrics().Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	admin := &metricsServer{addr: *metricsAddr, handler: p.Metrics().Handler()}
	if parent != nil {
		if err := parent.ShutdownAdmin(); err != nil {
			return err
		}
	}
	if err := admin.Restore(); err != nil {
		return err
	}
	rendezvous, err := hr.serve(p, admin, log)
	if err != nil {
		admin.Shutdown()
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if rendezvous != nil {
		ctx = hotrestart.UntilTerminated(ctx, rendezvous)
	}
	if parent != nil {
		go func() {
			if err := proxy.TakeOver(ctx, p, parent, hr.parentShutdownTime); err != nil && ctx.Err() == nil {
				log.Error("hot restart: take-over failed; the parent serves on", "err", err)
			}
		}()
	}
	log.Info("aether-proxy started", "node", *node, "xds", *target, "metrics", *metricsAddr, "mark", fmt.Sprintf("%#x", mark), "batch", *batch, "concurrency", runtime.GOMAXPROCS(0), "hot_restart", hr.describe())
	err = p.Run(ctx)
	admin.Shutdown()
	if rendezvous != nil {
		// Last: a child reads its closing as this process being gone, and
		// then reads the QUIC sockets itself.
		_ = rendezvous.Close()
	}
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
