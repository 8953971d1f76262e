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
	"google.golang.org/grpc"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/handoff"
	"github.com/aether-mesh/aether/mesh/identity"
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
	cfg := parseFlags()
	logger := newLogger(cfg.verbose)
	cm, err := cfg.check()
	if err != nil {
		return err
	}
	src, err := cfg.source()
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	opts, jobs, err := cfg.options(cm, logger, reg)
	if err != nil {
		return err
	}
	a, err := agent.New(opts)
	if err != nil {
		return err
	}
	return serve(ctx, cfg, a, src, reg, logger, jobs)
}

// config is the command line.
type config struct {
	node, registryFile, kubeconfig, metricsAddr, stateDir *string
	mode, transport, handoffSock                          *string
	verbose                                               *bool
	listen                                                listFlag
	remoteExports                                         listFlag
	mt                                                    mtlsFlags
	fed                                                   federationFlags
	pf                                                    pairFlags
	ctl                                                   controlFlags
}

// parseFlags registers every flag and parses the command line.
func parseFlags() *config {
	c := &config{
		node:         flag.String("node", "", "node name; also the Envoy node id the proxy must present"),
		registryFile: flag.String("registry-file", "", "scenario file to watch as the registry source"),
		kubeconfig:   flag.String("kubeconfig", "", "use the Kubernetes registry source with this kubeconfig (instead of --registry-file)"),
		metricsAddr:  flag.String("metrics-addr", "127.0.0.1:15090", "loopback address for /metrics and /debug/config; empty disables"),
		stateDir:     flag.String("state-dir", "", "directory for last-good.json, the last published snapshot (reloaded and served on restart until the first registry read succeeds), and observed-upstreams.json, the QUIC pairs carried over a restart (an unusable one is moved aside, reported and counted)"),
		mode:         flag.String("capture-mode", "tproxy", "UDP capture mode the CNI installed: tproxy or redirect"),
		transport:    flag.String("mesh-transport", string(agent.TransportAuto), "auto: HTTP/3 over per-source QUIC twins wherever eligible; h2: the HTTP/2 floor everywhere"),
		handoffSock:  flag.String("handoff-socket", "", "unix socket aether-cni hands pods over on (its agentSocket); pods' netns paths then come only from the handoff (default with --kubeconfig: "+handoff.DefaultSocket+")"),
		verbose:      flag.Bool("v", false, "debug logging"),
	}
	c.mt.register()
	c.fed.register()
	c.pf.register()
	c.ctl.register()
	flag.Var(&c.listen, "listen", "xDS listen address, unix:///path or 127.0.0.1:port; repeatable")
	flag.Var(&c.remoteExports, "remote-export", "file of another cluster's export (its gateway, services and SPIFFE IDs), watched; its services are reached through that cluster's east-west gateway on the mTLS path; repeatable")
	flag.Parse()
	return c
}

func newLogger(verbose *bool) *slog.Logger {
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// check refuses a command line missing what the agent needs, settles the
// handoff socket and returns the capture mode.
func (c *config) check() (constants.CaptureMode, error) {
	if *c.node == "" {
		return "", errors.New("--node is required")
	}
	if len(c.listen) == 0 {
		return "", errors.New("at least one --listen address is required")
	}
	*c.handoffSock = handoffSocket(*c.handoffSock, *c.kubeconfig)
	cm, err := constants.ParseCaptureMode(*c.mode)
	if err != nil {
		return "", fmt.Errorf("--capture-mode: %w", err)
	}
	if len(c.remoteExports) > 0 && *c.mt.trustDomain == "" {
		return "", errors.New("--remote-export: a remote service is reached on the mTLS path, which needs --trust-domain and --ca-dir")
	}
	return cm, nil
}

// source is the registry source the command line names: exactly one.
func (c *config) source() (registry.Source, error) {
	switch {
	case *c.registryFile != "" && *c.kubeconfig != "":
		return nil, errors.New("--registry-file and --kubeconfig are exclusive")
	case *c.registryFile != "":
		return &registry.FileSource{Path: *c.registryFile}, nil
	case *c.kubeconfig != "":
		ks, err := kube.NewFromKubeconfig(*c.kubeconfig)
		if err != nil {
			return nil, err
		}
		return ks, nil
	default:
		return nil, errors.New("a registry source is required: --registry-file or --kubeconfig")
	}
}

// jobs are what runs beside the agent, each nil when off: the SVID
// rotator of the mTLS path, federation's bundle endpoint and fetcher, and
// the extra-roots control.
type jobs struct {
	rotated *identity.Rotator
	fed     federationJobs
	roots   *extraRoots
}

// options are the agent's options from the command line, and the jobs
// they need run.
func (c *config) options(cm constants.CaptureMode, logger *slog.Logger, reg *prometheus.Registry) (agent.Options, jobs, error) {
	opts := agent.Options{Node: *c.node, Mode: cm, StateDir: *c.stateDir, Transport: agent.MeshTransport(*c.transport), Logger: logger, Registerer: reg}
	c.ctl.apply(&opts.Controls)
	var j jobs
	var err error
	if j.rotated, err = c.mt.apply(&opts); err != nil {
		return opts, j, err
	}
	if j.fed, err = c.fed.apply(&opts, c.mt.ca, *c.mt.svidTTL, reg, logger); err != nil {
		return opts, j, err
	}
	if err := c.pf.apply(&opts); err != nil {
		return opts, j, err
	}
	if j.roots, err = c.ctl.roots(&opts, logger); err != nil {
		return opts, j, err
	}
	if opts.HTTP != nil {
		// East-west QUIC rides the mTLS path; --mesh-transport h2 turns
		// it off again (agent.New).
		opts.HTTP.EastWest = true
	}
	if opts.Controls != (agent.Controls{}) || j.roots != nil {
		logger.Warn("test-only controls are on: this agent breaks the mesh on purpose", "controls", fmt.Sprintf("%+v", opts.Controls))
	}
	return opts, j, nil
}

// serve runs a until ctx ends or a listener, the registry or a job fails:
// the handoff, the xDS listeners, /metrics, the registry watch and the
// jobs. On the way out it waits for the pair writes.
func serve(ctx context.Context, c *config, a *agent.Agent, src registry.Source, reg *prometheus.Registry, logger *slog.Logger, j jobs) error {
	// The handoff socket is bound before the xDS and debug listeners, so an
	// agent that answers on /metrics already takes the CNI's calls.
	var ho *handoff.Server
	if *c.handoffSock != "" {
		var err error
		if ho, err = handoff.Listen(*c.handoffSock, logger); err != nil {
			return err
		}
		defer ho.Close()
	}
	lis, err := listen(c.listen)
	if err != nil {
		return err
	}
	gs := a.NewGRPCServer(ctx)
	errc := make(chan error, len(lis)+4)
	for _, l := range lis {
		logger.Info("serving delta ADS", "node", *c.node, "addr", l.Addr().String())
		go func(l net.Listener) { errc <- gs.Serve(l) }(l)
	}
	if *c.metricsAddr != "" {
		addr, done, err := a.ServeDebug(ctx, *c.metricsAddr, reg)
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
	if ho != nil {
		go func() { errc <- ho.Serve(ctx) }()
		src = registry.WithHandoff(src, ho)
	}
	if len(c.remoteExports) > 0 {
		src = registry.WithExports(src, c.remoteExports, 0)
	}
	src = warnUnknownNode(src, *c.node, logger)
	if err := j.fed.run(ctx, errc, logger); err != nil {
		gs.Stop()
		return err
	}
	go func() { errc <- a.Run(ctx, src) }()
	if j.roots != nil {
		go j.roots.watch(ctx)
	}
	if j.rotated != nil {
		go func() {
			if err := j.rotated.Run(ctx); err != nil {
				errc <- err
			}
		}()
	}

	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	stopGRPC(gs)
	a.Flush()
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// listen opens every xDS listen address, or none.
func listen(specs []string) ([]net.Listener, error) {
	var lis []net.Listener
	for _, spec := range specs {
		l, err := agent.Listen(spec)
		if err != nil {
			for _, o := range lis {
				o.Close()
			}
			return nil, err
		}
		lis = append(lis, l)
	}
	return lis, nil
}

// stopGRPC stops gs gracefully, but for two seconds at most: ADS streams
// never end on their own; do not wait on them.
func stopGRPC(gs *grpc.Server) {
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		gs.Stop()
	}
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
