// Command aether-agent is the per-node control plane: it watches the
// registry, generates the node's xDS snapshot, gates it and serves it to the
// node's proxy over delta ADS.
//
//	aether-agent --node node-a --registry-file scenario.yaml \
//	    --handoff-socket /run/aether/cni.sock \
//	    --listen unix:///run/aether/agent.sock --metrics-addr 127.0.0.1:15090 \
//	    --state-dir /var/lib/aether-agent --capture-mode tproxy
//
// With --handoff-socket, a pod's netns path comes only from the CNI's
// handoff (package handoff): the agent binds capture listeners for the pods
// aether-cni handed over on that socket, and for no other, whatever the
// registry says. The Kubernetes source gives no netns paths, so with
// --kubeconfig the handoff is always on, on handoff.DefaultSocket (the
// CNI's default agentSocket) unless --handoff-socket names another.
//
// The test-only controls (--test-only-*, and the #831 modes of
// --upstream-cert) are built in only with -tags aethercontrols, as the
// rigs build the agent for the suites and soaks (controls.go); the default
// build has none, so it cannot publish a configuration past a config gate.
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
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/registry/kube"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "aether-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		node         = flag.String("node", "", "node name; also the Envoy node id the proxy must present")
		registryFile = flag.String("registry-file", "", "scenario file to watch as the registry source")
		kubeconfig   = flag.String("kubeconfig", "", "use the Kubernetes registry source with this kubeconfig (instead of --registry-file)")
		metricsAddr  = flag.String("metrics-addr", "127.0.0.1:15090", "loopback address for /metrics and /debug/config; empty disables")
		stateDir     = flag.String("state-dir", "", "directory for last-good.json, the last published snapshot (reloaded and served on restart until the first registry read succeeds), and observed-upstreams.json, the QUIC pairs carried over a restart (an unusable one is moved aside, reported and counted)")
		mode         = flag.String("capture-mode", "tproxy", "UDP capture mode the CNI installed: tproxy or redirect")
		transport    = flag.String("mesh-transport", string(agent.TransportAuto), "auto: HTTP/3 over per-source QUIC twins wherever eligible; h2: the HTTP/2 floor everywhere")
		handoffSock  = flag.String("handoff-socket", "", "unix socket aether-cni hands pods over on (its agentSocket); pods' netns paths then come only from the handoff (default with --kubeconfig: "+handoff.DefaultSocket+")")
		verbose      = flag.Bool("v", false, "debug logging")
		listen       listFlag
		mt           mtlsFlags
		pf           pairFlags
		ctl          controlFlags
	)
	mt.register()
	pf.register()
	ctl.register()
	flag.Var(&listen, "listen", "xDS listen address, unix:///path or 127.0.0.1:port; repeatable")
	flag.Parse()

	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	if *node == "" {
		return errors.New("--node is required")
	}
	if len(listen) == 0 {
		return errors.New("at least one --listen address is required")
	}
	*handoffSock = handoffSocket(*handoffSock, *kubeconfig)
	cm, err := constants.ParseCaptureMode(*mode)
	if err != nil {
		return fmt.Errorf("--capture-mode: %w", err)
	}
	var src registry.Source
	switch {
	case *registryFile != "" && *kubeconfig != "":
		return errors.New("--registry-file and --kubeconfig are exclusive")
	case *registryFile != "":
		src = &registry.FileSource{Path: *registryFile}
	case *kubeconfig != "":
		ks, err := kube.NewFromKubeconfig(*kubeconfig)
		if err != nil {
			return err
		}
		src = ks
	default:
		return errors.New("a registry source is required: --registry-file or --kubeconfig")
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	opts := agent.Options{Node: *node, Mode: cm, StateDir: *stateDir, Transport: agent.MeshTransport(*transport), Logger: logger, Registerer: reg}
	ctl.apply(&opts.Controls)
	rotated, err := mt.apply(&opts)
	if err != nil {
		return err
	}
	if err := pf.apply(&opts); err != nil {
		return err
	}
	roots, err := ctl.roots(&opts, logger)
	if err != nil {
		return err
	}
	if opts.HTTP != nil {
		// East-west QUIC rides the mTLS path; --mesh-transport h2 turns
		// it off again (agent.New).
		opts.HTTP.EastWest = true
	}
	if opts.Controls != (agent.Controls{}) || roots != nil {
		logger.Warn("test-only controls are on: this agent breaks the mesh on purpose", "controls", fmt.Sprintf("%+v", opts.Controls))
	}
	a, err := agent.New(opts)
	if err != nil {
		return err
	}

	// The handoff socket is bound before the xDS and debug listeners, so an
	// agent that answers on /metrics already takes the CNI's calls.
	var ho *handoff.Server
	if *handoffSock != "" {
		if ho, err = handoff.Listen(*handoffSock, logger); err != nil {
			return err
		}
		defer ho.Close()
	}
	var lis []net.Listener
	for _, spec := range listen {
		l, err := agent.Listen(spec)
		if err != nil {
			for _, o := range lis {
				o.Close()
			}
			return err
		}
		lis = append(lis, l)
	}
	gs := a.NewGRPCServer(ctx)
	errc := make(chan error, len(lis)+3)
	for _, l := range lis {
		logger.Info("serving delta ADS", "node", *node, "addr", l.Addr().String())
		go func(l net.Listener) { errc <- gs.Serve(l) }(l)
	}
	if *metricsAddr != "" {
		addr, done, err := a.ServeDebug(ctx, *metricsAddr, reg)
		if err != nil {
			gs.Stop()
			return err
		}
		logger.Info("serving /metrics, /debug/config and /debug/pairs", "addr", addr.String())
		go func() {
			if err := <-done; err != nil {
				errc <- err
			}
		}()
	}
	if *handoffSock != "" {
		go func() { errc <- ho.Serve(ctx) }()
		src = registry.WithHandoff(src, ho)
	}
	src = warnUnknownNode(src, *node, logger)
	go func() { errc <- a.Run(ctx, src) }()
	if roots != nil {
		go roots.watch(ctx)
	}
	if rotated != nil {
		go func() {
			if err := rotated.Run(ctx); err != nil {
				errc <- err
			}
		}()
	}

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		// ADS streams never end on their own; do not wait on them.
		gs.Stop()
	}
	a.Flush()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// handoffSocket is the handoff socket to serve: the flag's, else with the
// Kubernetes source, whose pods would otherwise have no netns path and so
// no listener, the CNI's default agentSocket.
func handoffSocket(flagValue, kubeconfig string) string {
	if flagValue == "" && kubeconfig != "" {
		return handoff.DefaultSocket
	}
	return flagValue
}
