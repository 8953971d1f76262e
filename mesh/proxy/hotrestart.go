package proxy

import (
	"context"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
)

// Restart is a proxy's part in a hot restart (ARCHITECTURE.md, "Hot
// restart").
type Restart struct {
	// Epoch is the process's restart epoch; its QUIC connection IDs carry
	// it, so that its parent and its child tell theirs apart.
	Epoch uint32
	// Parent is the rendezvous with the process of the previous epoch,
	// whose listening sockets the proxy takes where its own listeners bind
	// the same address; nil binds every socket anew.
	Parent *hotrestart.Child
	// DrainTime is how long, once a child has taken over, the HTTP
	// connections of the drained listeners may take to finish before they
	// are closed; zero is hotrestart.DefaultDrainTime.
	DrainTime time.Duration
}

// Ready is closed once the first listener update is applied: the proxy's
// listeners are up.
func (p *Proxy) Ready() <-chan struct{} { return p.ready }

func keyOf(s *listener.Spec) hotrestart.Key {
	network := "tcp"
	if s.Socket.Protocol == corev3.SocketAddress_UDP {
		network = "udp"
	}
	return hotrestart.Key{Network: network, Addr: s.Socket.Addr, Netns: s.Socket.NetnsPath}
}

func kindOf(s *listener.Spec) string {
	switch {
	case s.UDP != nil:
		return hotrestart.KindUDP
	case s.HTTP != nil && s.HTTP.QUIC != nil:
		return hotrestart.KindQUIC
	case s.HTTP != nil:
		return hotrestart.KindHTTP
	default:
		return hotrestart.KindTCP
	}
}

// inherit asks the parent for the socket spec binds. A socket the parent
// served with another kind of listener is not taken: each kind sets its
// own options on its socket.
func (p *Proxy) inherit(s *listener.Spec) (*os.File, error) {
	r := p.opts.Restart
	if r == nil || r.Parent == nil || s.Socket.Addr.Port() == 0 {
		return nil, nil
	}
	f, kind, err := r.Parent.Socket(keyOf(s))
	if err != nil || f == nil {
		return nil, err
	}
	if kind != kindOf(s) {
		p.opts.Log.Warn("hot restart: not taking the parent's socket, which serves another kind of listener", "listener", s.Name, "socket", keyOf(s), "parent_kind", kind, "kind", kindOf(s))
		f.Close()
		return nil, nil
	}
	p.opts.Log.Info("hot restart: took the parent's socket", "listener", s.Name, "socket", keyOf(s))
	return f, nil
}

// quicRestart is a QUIC listener's gate: held for the parent's forwarded
// packets when its socket was handed over.
func (p *Proxy) quicRestart(s *listener.Spec, inherited bool) *h2.QUICRestart {
	k := keyOf(s)
	return &h2.QUICRestart{IDs: p.ids, Gate: func(c *net.UDPConn) *hotrestart.Gate {
		g := hotrestart.NewGate(c, k, p.ids)
		if inherited {
			p.opts.Restart.Parent.Hold(k, g)
		}
		return g
	}}
}

// Socket implements hotrestart.Listeners.
func (p *Proxy) Socket(k hotrestart.Key) (syscall.RawConn, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	name, r, ok := p.boundLocked(k)
	if !ok {
		return nil, ""
	}
	rc, err := r.syscallConn()
	if err != nil {
		p.opts.Log.Warn("hot restart: cannot hand over socket", "listener", name, "err", err)
		return nil, ""
	}
	return rc, kindOf(p.specs[name])
}

func (p *Proxy) boundLocked(k hotrestart.Key) (string, running, bool) {
	for name, s := range p.specs {
		if _, ok := bindOf(s); ok && keyOf(s) == k {
			r, running := p.listeners[name]
			return name, r, running
		}
	}
	return "", running{}, false
}

// Drain implements hotrestart.Listeners.
func (p *Proxy) Drain(ks []hotrestart.Key, forward func(hotrestart.Packet) error) {
	d := hotrestart.DefaultDrainTime
	if p.opts.Restart != nil && p.opts.Restart.DrainTime > 0 {
		d = p.opts.Restart.DrainTime
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drains = append(p.drains, cancel)
	for _, k := range ks {
		if name, r, ok := p.boundLocked(k); ok {
			if err := r.drain(ctx, forward); err != nil {
				p.opts.Log.Warn("hot restart: failed to drain listener", "listener", name, "err", err)
			}
		}
	}
}

// Resume implements hotrestart.Listeners.
func (p *Proxy) Resume(ks []hotrestart.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range ks {
		if name, r, ok := p.boundLocked(k); ok {
			if err := r.resume(); err != nil {
				p.opts.Log.Warn("hot restart: failed to resume listener", "listener", name, "err", err)
			}
		}
	}
}

func (r running) syscallConn() (syscall.RawConn, error) {
	switch {
	case r.u != nil:
		return r.u.SyscallConn()
	case r.t != nil:
		return r.t.SyscallConn()
	case r.h != nil:
		return r.h.SyscallConn()
	case r.q != nil:
		return r.q.SyscallConn()
	}
	return nil, fmt.Errorf("no socket")
}

func (r running) drain(ctx context.Context, forward func(hotrestart.Packet) error) error {
	switch {
	case r.u != nil:
		return r.u.Drain()
	case r.t != nil:
		return r.t.Drain()
	case r.h != nil:
		return r.h.Drain(ctx)
	case r.q != nil:
		return r.q.Drain(ctx, forward)
	}
	return nil
}

func (r running) resume() error {
	switch {
	case r.u != nil:
		return r.u.Resume()
	case r.t != nil:
		return r.t.Resume()
	case r.h != nil:
		return r.h.Resume()
	case r.q != nil:
		return r.q.Resume()
	}
	return nil
}

// TakeOver is the child's side of a hot restart once p runs: when p's
// listeners are up it has the parent drain, and after shutdownAfter (the
// parent shutdown time) it has the parent exit; it returns once the parent
// is gone. If ctx ends first, the caller closes parent and the parent,
// never told to exit, serves on.
func TakeOver(ctx context.Context, p *Proxy, parent *hotrestart.Child, shutdownAfter time.Duration) error {
	select {
	case <-p.Ready():
	case <-parent.ParentGone():
		return parentLeft(parent)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := parent.Drain(); err != nil {
		return err
	}
	p.opts.Log.Info("hot restart: listeners up, parent draining", "epoch", parent.Epoch(), "parent_shutdown_in", shutdownAfter)
	t := time.NewTimer(shutdownAfter)
	defer t.Stop()
	select {
	case <-t.C:
	case <-parent.ParentGone():
		return parentLeft(parent)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := parent.Terminate(); err != nil {
		return err
	}
	select {
	case <-parent.ParentGone():
	case <-ctx.Done():
		return ctx.Err()
	}
	p.opts.Log.Info("hot restart: parent exited", "epoch", parent.Epoch())
	return nil
}

func parentLeft(parent *hotrestart.Child) error {
	if err := parent.Err(); err != nil {
		return fmt.Errorf("hot restart: connection to the parent failed: %w", err)
	}
	return nil
}
