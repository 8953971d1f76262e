package tcp

import (
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// pipe copies both ways until both directions are done. A FIN from one
// side is passed on as a CloseWrite of the other while the other direction
// keeps flowing, as Envoy's tcp_proxy half-closes; an error either way (a
// reset, a write to a closed peer) closes both, as does idle, the
// tcp_proxy idle_timeout (zero: none).
//
// Each direction is TCPConn.ReadFrom between the two sockets, which Linux
// serves with splice(2): the bytes move socket to pipe to socket inside
// the kernel, never copied through the proxy's memory, and the proxy wakes
// once per splice instead of once per read and write. So the idle timeout
// cannot be told of each byte; it asks the kernel instead (kernelActivity).
func (l *Listener) pipe(down, up *net.TCPConn, idle time.Duration) {
	abort := sync.OnceFunc(func() { _ = down.Close(); _ = up.Close() })
	if idle > 0 {
		act := kernelActivity{conns: [2]*net.TCPConn{down, up}}
		w := watchIdle(l.clock, act, idle, func() { l.stats.IdleTimeouts.Inc(); abort() })
		defer w.stop()
	}
	finish := func(dst *net.TCPConn, err error) {
		if err != nil {
			abort()
			return
		}
		_ = dst.CloseWrite()
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		n, err := up.ReadFrom(down)
		l.stats.BytesUp.Add(float64(n))
		finish(up, err)
	})
	n, err := down.ReadFrom(up)
	l.stats.BytesDown.Add(float64(n))
	finish(down, err)
	wg.Wait()
}

// idler says how long nothing has moved.
type idler interface{ since() time.Duration }

// kernelActivity is how long both sockets of a pipe have received no data,
// from the kernel's own record (TCP_INFO's tcpi_last_data_recv, in ms):
// every byte the pipe moves is first received by one of them, so this is
// the time since the last byte moved either way, splice or not.
type kernelActivity struct{ conns [2]*net.TCPConn }

func (k kernelActivity) since() time.Duration {
	least := time.Duration(-1)
	for _, c := range k.conns {
		d, err := lastDataRecv(c)
		if err != nil {
			// A socket closed under the watch: its pipe is ending, and
			// the other socket's record decides.
			continue
		}
		if least < 0 || d < least {
			least = d
		}
	}
	return max(least, 0)
}

// lastDataRecv is the time since c last received data.
func lastDataRecv(c *net.TCPConn) (time.Duration, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var info *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) { info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		return 0, err
	}
	if gerr != nil {
		return 0, gerr
	}
	return time.Duration(info.Last_data_recv) * time.Millisecond, nil
}

// idleWatch fires expire once activity has been still for idle. Its timer
// fires at most once per idle window: when bytes moved meanwhile it re-arms
// for the rest of the window instead of being reset on every read.
type idleWatch struct {
	mu      sync.Mutex
	t       timer
	stopped bool
}

func watchIdle(clk clock, act idler, idle time.Duration, expire func()) *idleWatch {
	w := &idleWatch{}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.t = clk.afterFunc(idle, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.stopped {
			return
		}
		if rest := idle - act.since(); rest > 0 {
			w.t.Reset(rest)
			return
		}
		w.stopped = true
		expire()
	})
	return w
}

func (w *idleWatch) stop() {
	w.mu.Lock()
	w.stopped = true
	w.t.Stop()
	w.mu.Unlock()
}
