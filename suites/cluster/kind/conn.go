package kind

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"

	"github.com/aether-mesh/aether/rigs/images"
	"github.com/aether-mesh/aether/rigs/relay"
	"github.com/aether-mesh/aether/suites/cluster"
)

var udpRouteGVR = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1alpha2", Resource: "udproutes"}

// dialRelay runs aether-relay in the pod's backend container, through an
// exec stream, and returns a net.Conn over it: the socket lives in the
// pod's netns, where the capture rules apply.
func (k *kube) dialRelay(ctx context.Context, p cluster.Pod, network string, dst netip.AddrPort) (net.Conn, error) {
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(p.Namespace).Name(p.Name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "backend", Command: []string{images.BinDir + "/aether-relay", network, dst.String()},
			Stdin: true, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(k.cfg, http.MethodPost, req.URL())
	if err != nil {
		return nil, fmt.Errorf("failed to exec into %s/%s: %w", p.Namespace, p.Name, err)
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		err := exec.StreamWithContext(sctx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: os.Stderr})
		outW.CloseWithError(errors.Join(io.EOF, err))
	}()
	return newStreamConn(inW, outR, network == "udp", cancel, p.Namespace+"/"+p.Name, dst.String()), nil
}

// newStreamConn drives a relay that reads in and writes out.
func newStreamConn(in *io.PipeWriter, out io.Reader, udp bool, cancel context.CancelFunc, local, remote string) *streamConn {
	c := &streamConn{in: in, udp: udp, cancel: cancel, local: local, remote: remote, reads: make(chan []byte, 64), done: make(chan struct{}), closed: make(chan struct{}), rearm: make(chan struct{})}
	go c.readLoop(out)
	return c
}

// streamConn is a net.Conn over a relay's stdin and stdout. For UDP each
// Read returns one datagram; for TCP what the stream carried.
type streamConn struct {
	in            *io.PipeWriter
	udp           bool
	cancel        context.CancelFunc
	local, remote string

	reads chan []byte
	// done closes when the relay's output ends; closed when Close is
	// called, so a reader nobody drains does not block forever.
	done   chan struct{}
	closed chan struct{}

	mu       sync.Mutex
	deadline time.Time
	// rearm closes when the read deadline changes, so a Read already
	// waiting takes the new one, as net.Conn requires: quic-go's
	// Transport.Close unblocks its reader only by a deadline in the past.
	rearm   chan struct{}
	pending []byte
	err     error
	once    sync.Once
}

func (c *streamConn) readLoop(r io.Reader) {
	defer close(c.done)
	br := bufio.NewReader(r)
	for {
		var b []byte
		if c.udp {
			buf := make([]byte, relay.MaxDatagram)
			n, err := relay.ReadFrame(br, buf)
			if err != nil {
				c.fail(err)
				return
			}
			b = buf[:n]
		} else {
			buf := make([]byte, 32*1024)
			n, err := br.Read(buf)
			if err != nil {
				c.fail(err)
				return
			}
			b = buf[:n]
		}
		select {
		case c.reads <- b:
		case <-c.closed:
			return
		}
	}
}

func (c *streamConn) fail(err error) {
	c.mu.Lock()
	c.err = fmt.Errorf("relay from %s to %s ended: %w", c.local, c.remote, err)
	c.mu.Unlock()
}

func (c *streamConn) Read(p []byte) (int, error) {
	for {
		c.mu.Lock()
		if len(c.pending) > 0 {
			n := copy(p, c.pending)
			c.pending = c.pending[n:]
			c.mu.Unlock()
			return n, nil
		}
		deadline, rearm := c.deadline, c.rearm
		c.mu.Unlock()
		if !deadline.IsZero() && !time.Now().Before(deadline) {
			return 0, os.ErrDeadlineExceeded
		}
		var timeout <-chan time.Time
		var t *time.Timer
		if !deadline.IsZero() {
			t = time.NewTimer(time.Until(deadline))
			timeout = t.C
		}
		stop := func() {
			if t != nil {
				t.Stop()
			}
		}
		select {
		case b := <-c.reads:
			stop()
			n := copy(p, b)
			c.mu.Lock()
			c.pending = b[n:]
			c.mu.Unlock()
			return n, nil
		case <-c.done:
			stop()
			c.mu.Lock()
			defer c.mu.Unlock()
			return 0, c.err
		case <-c.closed:
			stop()
			return 0, net.ErrClosed
		case <-timeout:
			return 0, os.ErrDeadlineExceeded
		case <-rearm:
			stop()
		}
	}
}

// Write sends one datagram (UDP) or a run of the stream (TCP).
func (c *streamConn) Write(p []byte) (int, error) {
	select {
	case <-c.done:
		return 0, net.ErrClosed
	default:
	}
	if c.udp {
		if err := relay.WriteFrame(c.in, p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.in.Write(p)
}

func (c *streamConn) Close() error {
	c.once.Do(func() {
		close(c.closed)
		c.in.Close()
		c.cancel()
	})
	return nil
}

func (c *streamConn) LocalAddr() net.Addr  { return addr(c.local) }
func (c *streamConn) RemoteAddr() net.Addr { return addr(c.remote) }

func (c *streamConn) SetDeadline(t time.Time) error      { return c.SetReadDeadline(t) }
func (c *streamConn) SetWriteDeadline(t time.Time) error { return nil }
func (c *streamConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.deadline = t
	close(c.rearm)
	c.rearm = make(chan struct{})
	c.mu.Unlock()
	return nil
}

type addr string

func (a addr) Network() string { return "relay" }
func (a addr) String() string  { return string(a) }

// getViaPortForward fetches http://127.0.0.1:port/path inside the pod's
// netns through a port forward; for a hostNetwork pod that is the node's
// loopback, where the proxy serves its metrics.
func (k *kube) getViaPortForward(ctx context.Context, ns, pod string, port int, path string) (string, error) {
	req := k.cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("portforward")
	transport, upgrader, err := spdy.RoundTripperFor(k.cfg)
	if err != nil {
		return "", err
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, req.URL())
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return "", fmt.Errorf("failed to forward to %s/%s:%d: %w", ns, pod, port, err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		return "", fmt.Errorf("port forward to %s/%s:%d: %w", ns, pod, port, err)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		return "", fmt.Errorf("port forward to %s/%s:%d has no local port: %v", ns, pod, port, err)
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", ports[0].Local, path), nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(hreq)
	if err != nil {
		return "", fmt.Errorf("GET %s on %s/%s:%d: %w", path, ns, pod, port, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s on %s/%s:%d: %s %v", path, ns, pod, port, resp.Status, err)
	}
	return string(b), nil
}
