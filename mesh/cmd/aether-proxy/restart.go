package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy"
	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
)

// restartFlags are Envoy's hot restart flags, with durations for its
// seconds: --restart-epoch, --base-id, --socket-path, --drain-time,
// --parent-shutdown-time and --disable-hot-restart.
type restartFlags struct {
	epoch              uint32
	baseID             uint32
	socketPath         string
	drainTime          time.Duration
	parentShutdownTime time.Duration
	disable            bool
}

func (r *restartFlags) register(fs *flag.FlagSet) {
	fs.Func("restart-epoch", "hot restart epoch: 0 for the first process, N+1 to take over from the running epoch N (default 0)", func(s string) error {
		return parseUint32(s, &r.epoch)
	})
	fs.Func("base-id", "hot restart base id: proxies on one host with different base ids never meet (the rendezvous is <socket-path>_parent_<base-id*10 + epoch%3>) (default 0)", func(s string) error {
		return parseUint32(s, &r.baseID)
	})
	fs.StringVar(&r.socketPath, "socket-path", hotrestart.DefaultSocketPath, "hot restart rendezvous prefix: a file path, or @name for an abstract socket of the node netns")
	fs.DurationVar(&r.drainTime, "drain-time", hotrestart.DefaultDrainTime, "once a child took over, how long the HTTP connections of the drained listeners may take to finish before they are closed (tcp_proxy connections and UDP sessions run until this process exits)")
	fs.DurationVar(&r.parentShutdownTime, "parent-shutdown-time", hotrestart.DefaultParentShutdownTime, "how long after this process's listeners are up its parent is told to exit")
	fs.BoolVar(&r.disable, "disable-hot-restart", false, "serve no rendezvous: no later epoch can take over")
}

func (r *restartFlags) check() error {
	switch {
	case r.disable && r.epoch > 0:
		return fmt.Errorf("--restart-epoch %d needs hot restart, which --disable-hot-restart turns off", r.epoch)
	case r.drainTime <= 0:
		return fmt.Errorf("--drain-time %s: must be positive", r.drainTime)
	case r.parentShutdownTime <= 0:
		return fmt.Errorf("--parent-shutdown-time %s: must be positive", r.parentShutdownTime)
	case r.drainTime > r.parentShutdownTime:
		return fmt.Errorf("--drain-time %s exceeds --parent-shutdown-time %s: the parent would be told to exit mid-drain", r.drainTime, r.parentShutdownTime)
	}
	return nil
}

// parseUint32 reads a whole number ≥ 0 in full: fmt.Sscan took "1x" as 1
// and called -1 "expected integer".
func parseUint32(s string, v *uint32) error {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want a whole number from 0 to %d", uint32(math.MaxUint32))
	}
	*v = uint32(n)
	return nil
}

// connect reaches the parent of a restart epoch above 0.
func (r *restartFlags) connect() (*hotrestart.Child, error) {
	if r.epoch == 0 {
		return nil, nil
	}
	return hotrestart.Connect(hotrestart.SocketPath(r.socketPath, r.baseID, r.epoch-1), r.epoch)
}

// serve opens this process's rendezvous for the next epoch.
func (r *restartFlags) serve(p *proxy.Proxy, admin hotrestart.Admin, log *slog.Logger) (*hotrestart.Parent, error) {
	if r.disable {
		return nil, nil
	}
	return hotrestart.Listen(hotrestart.SocketPath(r.socketPath, r.baseID, r.epoch), r.epoch, p, admin, log)
}

func (r *restartFlags) describe() string {
	if r.disable {
		return "disabled"
	}
	return fmt.Sprintf("epoch %d on %s", r.epoch, hotrestart.SocketPath(r.socketPath, r.baseID, r.epoch))
}

// metricsServer is the admin listener a child takes over: it is shut for
// the child to bind its address, and bound again if the child leaves.
type metricsServer struct {
	addr    string
	handler http.Handler
	mu      sync.Mutex
	srv     *http.Server
}

func (m *metricsServer) Restore() error {
	ln, err := net.Listen("tcp", m.addr)
	if err != nil {
		return fmt.Errorf("failed to listen for metrics on %s: %w", m.addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.handler)
	// The address is loopback only (main refuses any other), so the
	// profiles a leak hunt needs (goroutines, heap) are served beside the
	// metrics, and so is the CPU profile a cost hunt needs: Index serves
	// only the runtime's named profiles.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	m.mu.Lock()
	m.srv = srv
	m.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
	return nil
}

func (m *metricsServer) Shutdown() error {
	m.mu.Lock()
	srv := m.srv
	m.srv = nil
	m.mu.Unlock()
	if srv == nil {
		return nil
	}
	return srv.Close()
}
