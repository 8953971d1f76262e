package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// A test backend is the program every pod of a cluster runs: it listens on
// the given UDP and TCP ports, answers each datagram (and each TCP line) with
// its own name, and appends what it received to a record file. The record is
// the suites' witness: a verdict comes from what the backend saw, never from
// what a client believes it sent.

// Record is one line of a backend's record file.
type Record struct {
	// Event is "ready" once every socket is bound, "udp" for a datagram,
	// "tcp" for a connection's first line, "http" for a request.
	Event string    `json:"event"`
	Time  time.Time `json:"time"`
	// Port is the local port that received it.
	Port int `json:"port,omitempty"`
	// Src is the sender as the backend saw it: under the mesh, the proxy's
	// upstream socket in the node netns, one per proxy session.
	Src     string `json:"src,omitempty"`
	Payload string `json:"payload,omitempty"`
	// XFCC and Peer are an HTTP request's X-Forwarded-Client-Cert and
	// the SPIFFE ID the app's own TLS handshake verified.
	XFCC string `json:"xfcc,omitempty"`
	Peer string `json:"peer,omitempty"`
	// UDP and TCP list the bound ports, on the ready line.
	UDP  []int `json:"udp,omitempty"`
	TCP  []int `json:"tcp,omitempty"`
	HTTP []int `json:"http,omitempty"`
}

// BackendConfig configures ServeBackend.
type BackendConfig struct {
	Name   string
	Record string
	UDP    []int
	TCP    []int
	// HTTP ports serve the HTTP echo (httpecho.go); TLS, when set, its
	// own mTLS port.
	HTTP []int
	TLS  *EchoTLS
}

type recorder struct {
	mu sync.Mutex
	f  *os.File
}

func (r *recorder) write(rec Record) error {
	rec.Time = time.Now().UTC()
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// One write per line, O_APPEND: a reader never sees two lines interleaved.
	if _, err := r.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("failed to append to record %q: %w", r.f.Name(), err)
	}
	return nil
}

// ServeBackend binds every port, writes the ready record, and serves until
// ctx ends. A port that cannot be bound fails the whole backend.
func ServeBackend(ctx context.Context, c BackendConfig) error {
	if c.Name == "" || c.Record == "" {
		return errors.New("backend needs a name and a record file")
	}
	f, err := os.OpenFile(c.Record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open record %q: %w", c.Record, err)
	}
	defer f.Close()
	rec := &recorder{f: f}
	reply := []byte(c.Name)

	var closers []io.Closer
	defer func() {
		for _, cl := range closers {
			cl.Close()
		}
	}()
	errc := make(chan error, len(c.UDP)+len(c.TCP)+len(c.HTTP)+1)
	stops, err := c.serveHTTP(rec, errc)
	defer func() {
		for _, stop := range stops {
			_ = stop()
		}
	}()
	if err != nil {
		return err
	}
	for _, port := range c.UDP {
		pc, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
		if err != nil {
			return fmt.Errorf("backend %s: failed to listen on udp port %d: %w", c.Name, port, err)
		}
		closers = append(closers, pc)
		go func() {
			buf := make([]byte, 65535)
			for {
				n, src, err := pc.ReadFromUDPAddrPort(buf)
				if err != nil {
					errc <- err
					return
				}
				if err := rec.write(Record{Event: "udp", Port: port, Src: src.String(), Payload: string(buf[:n])}); err != nil {
					errc <- err
					return
				}
				_, _ = pc.WriteToUDPAddrPort(reply, src)
			}
		}()
	}
	for _, port := range c.TCP {
		l, err := net.ListenTCP("tcp4", &net.TCPAddr{Port: port})
		if err != nil {
			return fmt.Errorf("backend %s: failed to listen on tcp port %d: %w", c.Name, port, err)
		}
		closers = append(closers, l)
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					errc <- err
					return
				}
				go func() {
					defer conn.Close()
					_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
					line, err := bufio.NewReader(conn).ReadString('\n')
					if err != nil && line == "" {
						return
					}
					if err := rec.write(Record{Event: "tcp", Port: port, Src: conn.RemoteAddr().String(), Payload: string(bytes.TrimRight([]byte(line), "\n"))}); err != nil {
						return
					}
					_, _ = conn.Write(append(reply, '\n'))
				}()
			}
		}()
	}
	if err := rec.write(Record{Event: "ready", UDP: c.UDP, TCP: c.TCP, HTTP: c.HTTP}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return fmt.Errorf("backend %s stopped serving: %w", c.Name, err)
	}
}

// ReadRecords parses a backend's record file. A last line still being
// written is not yet a record and is skipped.
func ReadRecords(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read backend record %q: %w", path, err)
	}
	var out []Record
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		var r Record
		if err := json.Unmarshal(b[:i], &r); err != nil {
			return nil, fmt.Errorf("backend record %q: bad line %q: %w", path, b[:i], err)
		}
		out = append(out, r)
		b = b[i+1:]
	}
	return out, nil
}
