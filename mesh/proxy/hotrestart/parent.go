package hotrestart

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
)

// Listeners is what a parent hands over and drains: the proxy's running
// listeners.
type Listeners interface {
	// Socket returns the socket of the listener bound at k and the kind
	// of that listener; a nil RawConn means none is.
	Socket(k Key) (syscall.RawConn, string)
	// Drain makes the listeners of ks take no new work: TCP and HTTP stop
	// accepting and HTTP connections get GOAWAY, UDP stops reading, QUIC
	// stops accepting, sends GOAWAY and passes every packet that is not
	// for one of its connections to forward. What is in flight finishes.
	Drain(ks []Key, forward func(Packet) error)
	// Resume undoes Drain: the child left without taking over.
	Resume(ks []Key)
}

// Admin is the parent's admin (metrics) listener, which the child binds
// in its place.
type Admin interface {
	Shutdown() error
	// Restore binds it again when the child left without taking over.
	Restore() error
}

// Parent serves the rendezvous of one process, for the process of the
// next epoch. It serves one child at a time.
type Parent struct {
	path   string
	epoch  uint32
	ln     *net.UnixListener
	ls     Listeners
	admin  Admin
	log    *slog.Logger
	exit   chan struct{}
	once   sync.Once
	mu     sync.Mutex
	child  *conn
	closed bool
	done   chan struct{}
}

// Listen serves path for the process of epoch. A live process already
// serving path is an error (another proxy on this base id, or a parent
// whose epoch this process repeats); a stale socket file is replaced.
func Listen(path string, epoch uint32, ls Listeners, admin Admin, log *slog.Logger) (*Parent, error) {
	if log == nil {
		log = slog.Default()
	}
	if c, err := net.Dial("unixpacket", path); err == nil {
		c.Close()
		return nil, fmt.Errorf("hot restart socket %s (epoch %d) is served by a live process: another proxy uses this --base-id, or its epoch is not %d's parent", path, epoch, epoch+1)
	}
	if !strings.HasPrefix(path, "@") {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("failed to remove stale hot restart socket %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("failed to serve hot restart socket %s (epoch %d): %w", path, epoch, err)
	}
	p := &Parent{path: path, epoch: epoch, ln: ln, ls: ls, admin: admin, log: log, exit: make(chan struct{}), done: make(chan struct{})}
	go p.serve()
	return p, nil
}

// Path is the rendezvous socket's path.
func (p *Parent) Path() string { return p.path }

// Terminated is closed when a child asks this process to exit.
func (p *Parent) Terminated() <-chan struct{} { return p.exit }

// Close stops serving and closes the connection to a child, which reads
// that as this process being gone: call it last, once nothing more is
// read from a handed-over socket.
func (p *Parent) Close() error {
	p.mu.Lock()
	p.closed = true
	c := p.child
	p.mu.Unlock()
	err := p.ln.Close()
	if c != nil {
		_ = c.c.Close()
	}
	<-p.done
	return err
}

func (p *Parent) serve() {
	defer close(p.done)
	for {
		uc, err := p.ln.AcceptUnix()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			uc.Close()
			return
		}
		c := newConn(uc)
		p.child = c
		p.mu.Unlock()
		if p.serveChild(c) {
			// Kept open until Close: the child reads its closing as
			// this process being gone, and forwarded packets still
			// flow on it meanwhile.
			return
		}
		_ = c.c.Close()
		p.mu.Lock()
		p.child = nil
		p.mu.Unlock()
	}
}

// childState is what one child has done, to undo if it leaves.
type childState struct {
	handed     []Key
	drained    bool
	forward    func(Packet) error
	adminShut  bool
	terminated bool
}

// serveChild answers one child's requests until it closes or asks this
// process to exit, and reports the latter. A child that leaves otherwise
// is rolled back.
func (p *Parent) serveChild(c *conn) bool {
	var st childState
	err := p.handshake(c)
	for err == nil && !st.terminated {
		err = p.answer(c, &st)
	}
	if st.terminated {
		p.once.Do(func() { close(p.exit) })
		return true
	}
	if err != nil && !errors.Is(err, errEOF) && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		p.log.Warn("hot restart: child connection failed", "socket", p.path, "err", err)
	}
	p.rollBack(st)
	return false
}

// handshake checks that the child's epoch follows this one.
func (p *Parent) handshake(c *conn) error {
	m, err := p.read(c)
	if err != nil {
		return err
	}
	if m.Type != typeHello {
		return c.send(message{Type: typeError, Error: fmt.Sprintf("expected hello, got %q", m.Type)}, -1)
	}
	if m.Epoch != p.epoch+1 {
		e := fmt.Sprintf("epoch %d does not follow epoch %d, which serves %s", m.Epoch, p.epoch, p.path)
		_ = c.send(message{Type: typeError, Epoch: p.epoch, Error: e}, -1)
		return errors.New(e)
	}
	return c.send(message{Type: typeHello, Epoch: p.epoch}, -1)
}

func (p *Parent) read(c *conn) (message, error) {
	t, body, fd, err := c.recv()
	if err != nil {
		return message{}, err
	}
	closeFD(fd)
	if t != recControl {
		return message{}, fmt.Errorf("child sent a record of type %q", t)
	}
	return decodeControl(body)
}

func (p *Parent) answer(c *conn, st *childState) error {
	m, err := p.read(c)
	if err != nil {
		return err
	}
	switch m.Type {
	case typeSocket:
		return p.handOver(c, m, st)
	case typeAdmin:
		if p.admin != nil {
			if err := p.admin.Shutdown(); err != nil {
				return c.send(message{Type: typeError, Error: err.Error()}, -1)
			}
		}
		st.adminShut = true
		return c.send(message{Type: typeAdmin}, -1)
	case typeDrain:
		p.log.Info("hot restart: draining the listeners handed over", "sockets", len(st.handed), "child_epoch", p.epoch+1)
		st.forward = func(pk Packet) error {
			b, err := encodePacket(pk)
			if err != nil {
				return err
			}
			return c.sendRaw(b)
		}
		p.ls.Drain(st.handed, st.forward)
		st.drained = true
		return c.send(message{Type: typeDrain}, -1)
	case typeTerminate:
		p.log.Info("hot restart: exiting at the child's request", "child_epoch", p.epoch+1)
		st.terminated = true
		return nil
	default:
		return c.send(message{Type: typeError, Error: fmt.Sprintf("unknown request %q", m.Type)}, -1)
	}
}

// handOver passes the socket bound at the requested key, if any.
func (p *Parent) handOver(c *conn, m message, st *childState) error {
	if m.Key == nil {
		return c.send(message{Type: typeError, Error: "socket request names no key"}, -1)
	}
	rc, kind := p.ls.Socket(*m.Key)
	if rc == nil {
		return c.send(message{Type: typeSocket}, -1)
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = c.send(message{Type: typeSocket, Found: true, Kind: kind}, int(fd))
	}); err != nil {
		return c.send(message{Type: typeError, Error: fmt.Sprintf("socket %s: %v", m.Key, err)}, -1)
	}
	if serr == nil {
		st.handed = append(st.handed, *m.Key)
		if st.drained {
			// A listener the child added after the drain: the parent
			// drains its socket at once too.
			p.ls.Drain([]Key{*m.Key}, st.forward)
		}
	}
	return serr
}

// rollBack leaves the parent as it was before the child came.
func (p *Parent) rollBack(st childState) {
	if st.drained {
		p.log.Warn("hot restart: the child left before taking over; serving again", "socket", p.path)
		p.ls.Resume(st.handed)
	}
	if st.adminShut && p.admin != nil {
		if err := p.admin.Restore(); err != nil {
			p.log.Error("hot restart: failed to restore the admin listener", "err", err)
		}
	}
}

// UntilTerminated is ctx, ended also when a child asks p's process to
// exit.
func UntilTerminated(ctx context.Context, p *Parent) context.Context {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-p.Terminated():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx
}
