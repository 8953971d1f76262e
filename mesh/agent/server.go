package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/aether-mesh/aether/mesh/agent/pairs"
)

// Listen opens the xDS listen address: "unix:///path/to/sock" or a loopback
// "127.0.0.1:port" / "[::1]:port". The agent serves its node's proxy only, so
// anything off loopback is refused rather than exposed.
func Listen(spec string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(spec, "unix://"); ok {
		if path == "" {
			return nil, fmt.Errorf("invalid listen address %q: empty socket path", spec)
		}
		// A socket left by a killed agent would make bind fail; only a
		// socket is removed, never a regular file of the same name.
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("failed to listen on unix socket %q: %w", path, err)
		}
		return l, nil
	}
	if err := requireLoopback(spec); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", spec)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %q: %w", spec, err)
	}
	return l, nil
}

func requireLoopback(spec string) error {
	ap, err := netip.ParseAddrPort(spec)
	if err != nil {
		return fmt.Errorf("invalid listen address %q: want unix:///path or a loopback ip:port: %w", spec, err)
	}
	if !ap.Addr().IsLoopback() {
		return fmt.Errorf("invalid listen address %q: %s is not a loopback address", spec, ap.Addr())
	}
	return nil
}

// NewGRPCServer returns a gRPC server with the aggregated discovery service
// (state-of-the-world and delta) backed by the agent's snapshot cache.
func (a *Agent) NewGRPCServer(ctx context.Context) *grpc.Server {
	gs := grpc.NewServer()
	a.mu.Lock()
	a.servers++
	srv := a.servers
	a.mu.Unlock()
	xds := serverv3.NewServer(ctx, a.Cache(), serverv3.CallbackFuncs{
		DeltaStreamOpenFunc: func(_ context.Context, id int64, typ string) error {
			a.log.Debug("delta stream opened", "stream", id, "type", typ)
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discovery.DeltaDiscoveryRequest) error {
			if req.GetTypeUrl() == resource.ClusterType {
				sid := pairs.StreamID{Server: srv, Stream: id}
				a.judging.request(sid, req)
				a.cdsRequest(sid, req)
			}
			return nil
		},
		DeltaStreamClosedFunc: func(id int64, _ *core.Node) {
			sid := pairs.StreamID{Server: srv, Stream: id}
			a.judging.closed(sid)
			a.pairs.StreamClosed(sid)
		},
	})
	discovery.RegisterAggregatedDiscoveryServiceServer(gs, xds)
	return gs
}

// DebugHandler serves /metrics from reg, /debug/config, the published
// snapshot as JSON, and /debug/pairs, the recorded QUIC pairs.
func (a *Agent) DebugHandler(reg *prometheus.Registry) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/config", func(w http.ResponseWriter, _ *http.Request) {
		b, err := a.ConfigDump()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
	})
	mux.HandleFunc("/debug/pairs", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Pairs  []pairs.Status `json:"pairs"`
			Counts pairs.Counts   `json:"counts"`
		}{a.Pairs(), a.Counts()})
	})
	return mux
}

// ServeDebug serves DebugHandler on a loopback address until ctx ends.
func (a *Agent) ServeDebug(ctx context.Context, addr string, reg *prometheus.Registry) (net.Addr, <-chan error, error) {
	if err := requireLoopback(addr); err != nil {
		return nil, nil, fmt.Errorf("metrics address: %w", err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to listen for metrics on %q: %w", addr, err)
	}
	srv := &http.Server{Handler: a.DebugHandler(reg)}
	done := make(chan error, 1)
	go func() {
		err := srv.Serve(l)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return l.Addr(), done, nil
}
