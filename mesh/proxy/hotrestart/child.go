package hotrestart

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
)

// Child is the new process's end of the rendezvous with its parent.
// Requests are answered one at a time; forwarded QUIC packets arrive
// between the answers and go to the gate that holds their socket.
type Child struct {
	path  string
	epoch uint32
	c     *conn

	req     sync.Mutex // one request in flight
	replies chan reply

	mu    sync.Mutex
	gates map[string]*Gate
	ended bool // the parent is gone: no gate is held any more
	gone  chan struct{}
	err   error
}

type reply struct {
	m  message
	fd int
}

// Connect reaches the parent of epoch-1 at path. It fails, naming the
// socket and both epochs, when no process serves path or the one that does
// is not epoch-1.
func Connect(path string, epoch uint32) (*Child, error) {
	if epoch == 0 {
		return nil, errors.New("hot restart: epoch 0 is the first process and has no parent")
	}
	uc, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("hot restart epoch %d: no parent (epoch %d) serves %s: %w", epoch, epoch-1, path, err)
	}
	c := &Child{path: path, epoch: epoch, c: newConn(uc), replies: make(chan reply), gates: map[string]*Gate{}, gone: make(chan struct{})}
	go c.read()
	m, fd, err := c.request(message{Type: typeHello, Epoch: epoch})
	closeFD(fd)
	if err == nil && m.Epoch != epoch-1 {
		err = fmt.Errorf("parent answered as epoch %d", m.Epoch)
	}
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("hot restart epoch %d: parent at %s is not epoch %d: %w", epoch, path, epoch-1, err)
	}
	return c, nil
}

// Epoch is this process's epoch.
func (c *Child) Epoch() uint32 { return c.epoch }

// read takes every record from the parent until it closes: answers go to
// the request waiting for them, packets to their gate. When the parent is
// gone, every gate reads its socket itself.
func (c *Child) read() {
	defer close(c.replies)
	var err error
	for {
		var t byte
		var body []byte
		var fd int
		t, body, fd, err = c.c.recv()
		if err != nil {
			break
		}
		if t == recPacket {
			closeFD(fd)
			c.deliver(body)
			continue
		}
		m, derr := decodeControl(body)
		if derr != nil {
			closeFD(fd)
			err = derr
			break
		}
		c.replies <- reply{m: m, fd: fd}
	}
	c.mu.Lock()
	if !errors.Is(err, errEOF) && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		c.err = err
	}
	gates := c.gates
	c.gates, c.ended = nil, true
	c.mu.Unlock()
	for _, g := range gates {
		g.release()
	}
	close(c.gone)
}

func (c *Child) deliver(body []byte) {
	p, err := decodePacket(body)
	if err != nil {
		return
	}
	c.mu.Lock()
	g := c.gates[p.Key]
	c.mu.Unlock()
	if g != nil {
		g.hand(p)
	}
}

// request sends m and waits for its answer.
func (c *Child) request(m message) (message, int, error) {
	c.req.Lock()
	defer c.req.Unlock()
	if err := c.c.send(m, -1); err != nil {
		return message{}, -1, err
	}
	r, ok := <-c.replies
	if !ok {
		return message{}, -1, fmt.Errorf("parent at %s closed before answering %s", c.path, m.Type)
	}
	if r.m.Type == typeError {
		closeFD(r.fd)
		return message{}, -1, fmt.Errorf("parent at %s refused %s: %s", c.path, m.Type, r.m.Error)
	}
	if r.m.Type != m.Type {
		closeFD(r.fd)
		return message{}, -1, fmt.Errorf("parent at %s answered %s with %s", c.path, m.Type, r.m.Type)
	}
	return r.m, r.fd, nil
}

// Socket asks for the parent's socket bound at k. It returns nil when the
// parent holds none there (or is gone), and otherwise the socket and the
// kind of listener the parent served on it.
func (c *Child) Socket(k Key) (*os.File, string, error) {
	if c.Gone() {
		return nil, "", nil
	}
	m, fd, err := c.request(message{Type: typeSocket, Key: &k})
	if err != nil {
		if c.Gone() {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("hot restart: socket %s: %w", k, err)
	}
	if !m.Found {
		closeFD(fd)
		return nil, "", nil
	}
	if fd < 0 {
		return nil, "", fmt.Errorf("hot restart: parent at %s found socket %s but passed no descriptor", c.path, k)
	}
	return os.NewFile(uintptr(fd), k.String()), m.Kind, nil
}

// Hold makes g wait for the packets the parent forwards for k and read
// nothing from its socket until the parent is gone.
func (c *Child) Hold(k Key, g *Gate) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		return
	}
	g.hold()
	c.gates[k.String()] = g
}

// ShutdownAdmin asks the parent to close its admin listener.
func (c *Child) ShutdownAdmin() error {
	if _, _, err := c.request(message{Type: typeAdmin}); err != nil {
		return fmt.Errorf("hot restart: admin shutdown: %w", err)
	}
	return nil
}

// Drain asks the parent to drain the sockets it handed over; it returns
// once the parent has stopped taking new work on them.
func (c *Child) Drain() error {
	if _, _, err := c.request(message{Type: typeDrain}); err != nil {
		return fmt.Errorf("hot restart: drain: %w", err)
	}
	return nil
}

// Terminate asks the parent to exit; Gone is closed once it has.
func (c *Child) Terminate() error {
	c.req.Lock()
	defer c.req.Unlock()
	if err := c.c.send(message{Type: typeTerminate}, -1); err != nil {
		return fmt.Errorf("hot restart: terminate: %w", err)
	}
	return nil
}

// ParentGone is closed once the parent has closed its end: it exited.
func (c *Child) ParentGone() <-chan struct{} { return c.gone }

// Gone reports whether the parent is gone.
func (c *Child) Gone() bool {
	select {
	case <-c.gone:
		return true
	default:
		return false
	}
}

// Err is why the connection to the parent failed, if it did not simply
// close; valid once ParentGone is closed.
func (c *Child) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close leaves the parent: one that had not been told to exit resumes.
func (c *Child) Close() error {
	err := c.c.c.Close()
	<-c.gone
	return err
}
