package passthrough

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
)

// The gateway benchmark measures the forwarder's own CPU: the forwarder
// (or the plain relay it is compared with) runs in a child process, this
// test binary re-executed, and reports its getrusage before and after
// b.N requests, which the clients and servers in this process make and
// answer. gw-cpu-ns/op is the child's user+system CPU per request.
const benchChildEnv = "AETHER_PASSTHROUGH_BENCH_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(benchChildEnv); mode != "" {
		if err := benchChild(mode); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// benchChild serves mode on a loopback port until stdin closes, printing
// its address, then its CPU whenever asked.
func benchChild(mode string) error {
	up := StaticUpstreams{}
	var chains []FilterChain
	var first netip.AddrPort
	for i, kv := range strings.Split(os.Getenv("AETHER_BENCH_UPSTREAMS"), ";") {
		name, addr, _ := strings.Cut(kv, "=")
		a, err := netip.ParseAddrPort(addr)
		if err != nil {
			return fmt.Errorf("upstream %q: %w", kv, err)
		}
		if i == 0 {
			first = a
		}
		up["cl-"+name] = a
		chains = append(chains, FilterChain{Name: name, ServerNames: []string{name}, Cluster: "cl-" + name})
	}
	routes, err := NewRoutes(chains)
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var addr net.Addr
	switch mode {
	case "quic-passthrough", "quic-relay":
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return err
		}
		pc.SetReadBuffer(4 << 20)
		addr = pc.LocalAddr()
		if mode == "quic-relay" {
			go (&udpRelay{conn: pc, upstream: first, sessions: map[netip.AddrPort]*net.UDPConn{}}).serve()
		} else {
			q := NewQUIC(pc, routes, up, QUICOptions{Name: "bench", MaxFlows: 1 << 16, Log: quiet})
			go q.Serve()
		}
	case "tcp-passthrough", "tcp-relay":
		ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return err
		}
		addr = ln.Addr()
		if mode == "tcp-relay" {
			go tcpRelay(ln, first)
		} else {
			NewTCP(ln, routes, up, TCPOptions{Name: "bench", Log: quiet}).Serve()
		}
	default:
		return fmt.Errorf("unknown mode %q", mode)
	}
	if path := os.Getenv("AETHER_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(path + "." + mode)
		if err != nil {
			return err
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	fmt.Println("ADDR", addr)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Println("CPU", int64(cpu), ru.Maxrss)
	}
	return nil
}

// udpRelay is the baseline: a plain UDP relay of the same traffic, one
// connected upstream socket per client address, no inspection.
type udpRelay struct {
	conn     *net.UDPConn
	upstream netip.AddrPort
	mu       sync.Mutex
	sessions map[netip.AddrPort]*net.UDPConn
}

func (r *udpRelay) serve() {
	buf := make([]byte, maxDatagram)
	for {
		n, addr, err := r.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		r.mu.Lock()
		up := r.sessions[addr]
		if up == nil {
			if up, err = net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(r.upstream)); err != nil {
				r.mu.Unlock()
				continue
			}
			r.sessions[addr] = up
			go func() {
				b := make([]byte, maxDatagram)
				for {
					n, err := up.Read(b)
					if err != nil {
						return
					}
					r.conn.WriteToUDPAddrPort(b[:n], addr)
				}
			}()
		}
		r.mu.Unlock()
		up.Write(buf[:n])
	}
}

// tcpRelay is the TCP baseline: accept, dial, splice.
func tcpRelay(ln *net.TCPListener, upstream netip.AddrPort) {
	for {
		c, err := ln.AcceptTCP()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.DialTCP("tcp", nil, net.TCPAddrFromAddrPort(upstream))
			if err != nil {
				return
			}
			defer u.Close()
			splice(c, u, (*Metrics)(nil).listener("relay", "tcp"))
		}()
	}
}

type benchChildProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Scanner
	addr  string
}

func startBenchChild(b *testing.B, mode string, upstreams string) *benchChildProc {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchChildEnv+"="+mode, "AETHER_BENCH_UPSTREAMS="+upstreams)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	c := &benchChildProc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout)}
	b.Cleanup(func() { stdin.Close(); cmd.Wait() })
	if !c.out.Scan() || !strings.HasPrefix(c.out.Text(), "ADDR ") {
		b.Fatalf("child %s did not start: %q", mode, c.out.Text())
	}
	c.addr = strings.TrimPrefix(c.out.Text(), "ADDR ")
	return c
}

// cpu is the child's CPU so far and its peak RSS in KiB.
func (c *benchChildProc) cpu(b *testing.B) (time.Duration, int64) {
	b.Helper()
	io.WriteString(c.stdin, "cpu\n")
	if !c.out.Scan() {
		b.Fatal("child gone")
	}
	f := strings.Fields(c.out.Text())
	ns, _ := strconv.ParseInt(f[1], 10, 64)
	rss, _ := strconv.ParseInt(f[2], 10, 64)
	return time.Duration(ns), rss
}

// benchQUICServer echoes each stream back.
func benchQUICServer(b *testing.B, p *pki, name string) netip.AddrPort {
	pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		b.Fatal(err)
	}
	tr := &quic.Transport{Conn: pc}
	ln, err := tr.Listen(p.serverTLS(name), &quic.Config{MaxIncomingStreams: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close(); tr.Close(); pc.Close() })
	go func() {
		for {
			c, err := ln.Accept(context.Background())
			if err != nil {
				return
			}
			go func() {
				for {
					st, err := c.AcceptStream(context.Background())
					if err != nil {
						return
					}
					go func() { io.Copy(st, st); st.Close() }()
				}
			}()
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// benchTLSServer echoes each connection back.
func benchTLSServer(b *testing.B, p *pki, name string) netip.AddrPort {
	ln, err := tls.Listen("tcp", "127.0.0.1:0", p.serverTLS(name))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().(*net.TCPAddr).AddrPort()
}

// BenchmarkGateway is the gateway's CPU per request for QUIC and TCP
// passthrough against a plain relay of the same traffic, side by side:
// both run at once, each request made through one then the other, so a
// shared, busy machine loads both alike. "stream" is a 1 KiB request and
// its echo on a held connection (a stream of its own for QUIC); "conn"
// is a new connection per request, its handshake included, so the
// passthrough inspects every ClientHello. Metrics: each child's CPU per
// request (relay-cpu-ns/op, passthrough-cpu-ns/op), their ratio, and
// each child's peak RSS.
func BenchmarkGateway(b *testing.B) {
	p := newPKI(b, nameA, nameB)
	qa, qb := benchQUICServer(b, p, nameA), benchQUICServer(b, p, nameB)
	ta, tb := benchTLSServer(b, p, nameA), benchTLSServer(b, p, nameB)
	payload := make([]byte, 1024)
	for _, proto := range []string{"quic", "tcp"} {
		ups := fmt.Sprintf("%s=%s;%s=%s", nameA, qa, nameB, qb)
		if proto == "tcp" {
			ups = fmt.Sprintf("%s=%s;%s=%s", nameA, ta, nameB, tb)
		}
		for _, shape := range []string{"stream", "conn"} {
			b.Run(proto+"/"+shape, func(b *testing.B) {
				impls := []string{"relay", "passthrough"}
				children := make([]*benchChildProc, 2)
				ops := make([]func() error, 2)
				for i, impl := range impls {
					children[i] = startBenchChild(b, proto+"-"+impl, ups)
					if proto == "quic" {
						ops[i] = quicOp(b, p, children[i].addr, shape, payload)
					} else {
						ops[i] = tcpOp(b, p, children[i].addr, shape, payload)
					}
					if err := ops[i](); err != nil { // warm: the held connection, the first flow
						b.Fatalf("%s: %v", impl, err)
					}
				}
				var cpu0 [2]time.Duration
				for i, c := range children {
					cpu0[i], _ = c.cpu(b)
				}
				b.ResetTimer()
				for n := range b.N {
					for k := range 2 {
						i := (n + k) % 2 // alternate which goes first
						if err := ops[i](); err != nil {
							b.Fatalf("%s: %v", impls[i], err)
						}
					}
				}
				b.StopTimer()
				var per [2]float64
				for i, c := range children {
					cpu1, rss := c.cpu(b)
					per[i] = float64(cpu1-cpu0[i]) / float64(b.N)
					b.ReportMetric(per[i], impls[i]+"-cpu-ns/op")
					b.ReportMetric(float64(rss), impls[i]+"-maxrss-KiB")
				}
				b.ReportMetric(per[1]/per[0], "ratio")
			})
		}
	}
}

func quicOp(b *testing.B, p *pki, addr, shape string, payload []byte) func() error {
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	dialOne := func() (*quic.Conn, func(), error) {
		pc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return nil, nil, err
		}
		tr := &quic.Transport{Conn: pc}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := tr.Dial(ctx, ua, p.clientTLS(nameA), &quic.Config{})
		if err != nil {
			tr.Close()
			pc.Close()
			return nil, nil, err
		}
		return c, func() { c.CloseWithError(0, ""); tr.Close(); pc.Close() }, nil
	}
	req := func(c *quic.Conn) error {
		st, err := c.OpenStreamSync(context.Background())
		if err != nil {
			return err
		}
		st.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := st.Write(payload); err != nil {
			return err
		}
		st.Close()
		got, err := io.ReadAll(st)
		if err == nil && len(got) != len(payload) {
			err = fmt.Errorf("echo of %d bytes, sent %d", len(got), len(payload))
		}
		return err
	}
	if shape == "conn" {
		return func() error {
			c, done, err := dialOne()
			if err != nil {
				return err
			}
			defer done()
			return req(c)
		}
	}
	var held *quic.Conn
	return func() error {
		if held == nil {
			c, done, err := dialOne()
			if err != nil {
				return err
			}
			b.Cleanup(done)
			held = c
		}
		return req(held)
	}
}

func tcpOp(b *testing.B, p *pki, addr, shape string, payload []byte) func() error {
	buf := make([]byte, len(payload))
	dialOne := func() (*tls.Conn, error) {
		c, err := tls.Dial("tcp", addr, p.clientTLS(nameA))
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(time.Hour))
		return c, nil
	}
	req := func(c *tls.Conn) error {
		if _, err := c.Write(payload); err != nil {
			return err
		}
		_, err := io.ReadFull(c, buf)
		return err
	}
	if shape == "conn" {
		return func() error {
			c, err := dialOne()
			if err != nil {
				return err
			}
			defer c.Close()
			return req(c)
		}
	}
	var held *tls.Conn
	return func() error {
		if held == nil {
			c, err := dialOne()
			if err != nil {
				return err
			}
			b.Cleanup(func() { c.Close() })
			held = c
		}
		return req(held)
	}
}
