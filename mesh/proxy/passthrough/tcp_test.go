package passthrough

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// tlsServer is a TLS echo server that records the SNI of each connection;
// with no name it is a plain TCP echo (a default chain's upstream).
type tlsServer struct {
	name string
	ln   net.Listener
	mu   sync.Mutex
	seen []string
}

func newTLSServer(t testing.TB, p *pki, name string) *tlsServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tlsServer{name: name, ln: ln}
	if name != "" {
		s.ln = tls.NewListener(ln, p.serverTLS(name))
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := s.ln.Accept()
			if err != nil {
				return
			}
			go s.serve(c)
		}
	}()
	return s
}

func (s *tlsServer) serve(c net.Conn) {
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	sni := ""
	if tc, ok := c.(*tls.Conn); ok {
		sni = tc.ConnectionState().ServerName
	}
	s.mu.Lock()
	s.seen = append(s.seen, sni)
	s.mu.Unlock()
	io.WriteString(c, s.name+"|"+line)
}

func (s *tlsServer) records() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.seen...)
}

type tcpForwarder struct {
	*TCP
	m *Metrics
}

func newTCPForwarder(t testing.TB, o TCPOptions, fallback *tlsServer, servers ...*tlsServer) *tcpForwarder {
	t.Helper()
	var chains []FilterChain
	up := StaticUpstreams{}
	for _, s := range servers {
		chains = append(chains, FilterChain{Name: s.name, ServerNames: []string{s.name}, Cluster: "cl-" + s.name})
		up["cl-"+s.name] = netipAddr(s.ln.Addr())
	}
	if fallback != nil {
		chains = append(chains, FilterChain{Name: "default", Cluster: "cl-default"})
		up["cl-default"] = netipAddr(fallback.ln.Addr())
	}
	routes, err := NewRoutes(chains)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	o.Metrics = NewMetrics(prometheus.NewRegistry())
	if o.Name == "" {
		o.Name = "tcp-18009"
	}
	f := &tcpForwarder{TCP: NewTCP(ln, routes, up, o), m: o.Metrics}
	f.Serve()
	t.Cleanup(func() { f.Close() })
	return f
}

func netipAddr(a net.Addr) netip.AddrPort { return a.(*net.TCPAddr).AddrPort() }

func (f *tcpForwarder) dropped(reason string) float64 {
	return testutil.ToFloat64(f.m.dropped.WithLabelValues(f.opts.Name, "tcp", reason))
}

func (f *tcpForwarder) event(ev string) float64 {
	return testutil.ToFloat64(f.m.events.WithLabelValues(f.opts.Name, "tcp", ev))
}

// splitConn writes in chunks of n bytes, each its own segment (NoDelay),
// so the ClientHello reaches the forwarder in pieces.
type splitConn struct {
	*net.TCPConn
	n int
}

func (c splitConn) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		k := min(c.n, len(b)-done)
		m, err := c.TCPConn.Write(b[done : done+k])
		done += m
		if err != nil {
			return done, err
		}
		time.Sleep(time.Millisecond) // let each chunk leave alone
	}
	return done, nil
}

func tlsRequest(t testing.TB, p *pki, f *tcpForwarder, name string, split int) (string, error) {
	t.Helper()
	c, err := net.DialTCP("tcp", nil, f.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetNoDelay(true)
	var raw net.Conn = c
	if split > 0 {
		raw = splitConn{c, split}
	}
	tc := tls.Client(raw, p.clientTLS(name))
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(tc, "ping\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(tc)
	return string(b), err
}

func TestTCPRoutesBySNI(t *testing.T) {
	p := newPKI(t, nameA, nameB)
	a, b := newTLSServer(t, p, nameA), newTLSServer(t, p, nameB)
	f := newTCPForwarder(t, TCPOptions{}, nil, a, b)
	for _, tc := range []struct {
		name  string
		split int
	}{{nameA, 0}, {nameB, 0}, {nameB, 40}, {nameA, 7}} {
		got, err := tlsRequest(t, p, f, tc.name, tc.split)
		if err != nil || got != tc.name+"|ping\n" {
			t.Fatalf("%s split %d: %q %v", tc.name, tc.split, got, err)
		}
	}
	for _, s := range []*tlsServer{a, b} {
		recs := s.records()
		if len(recs) != 2 || recs[0] != s.name || recs[1] != s.name {
			t.Errorf("server %s saw %q, want its own name twice", s.name, recs)
		}
	}
}

func TestTCPRefusals(t *testing.T) {
	p := newPKI(t, nameA, "c.ns3.svc.cluster.local")
	a := newTLSServer(t, p, nameA)
	t.Run("unknown SNI", func(t *testing.T) {
		f := newTCPForwarder(t, TCPOptions{}, nil, a)
		if _, err := tlsRequest(t, p, f, "c.ns3.svc.cluster.local", 0); err == nil {
			t.Fatal("unknown SNI got through")
		}
		waitFor(t, "refusal counted", func() bool { return f.dropped(DropUnknownSNI) == 1 })
	})
	t.Run("ClientHello too large", func(t *testing.T) {
		f := newTCPForwarder(t, TCPOptions{MaxClientHello: 256}, nil, a)
		if _, err := tlsRequest(t, p, f, nameA, 0); err == nil {
			t.Fatal("oversized ClientHello got through")
		}
		waitFor(t, "too large counted", func() bool { return f.dropped(DropTooLarge) == 1 })
	})
	t.Run("slow client closed at the deadline", func(t *testing.T) {
		f := newTCPForwarder(t, TCPOptions{InspectTimeout: 200 * time.Millisecond}, nil, a)
		c, err := net.Dial("tcp", f.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write([]byte{22, 3, 1, 2, 0, 1}) // a ClientHello's start, and then nothing
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Fatalf("read %d, %v: want the forwarder's close", n, err)
		}
		if f.dropped(DropTimeout) != 1 {
			t.Errorf("client_hello_timeout = %v", f.dropped(DropTimeout))
		}
	})
	if recs := a.records(); len(recs) != 0 {
		t.Errorf("server saw %q", recs)
	}
}

// TestTCPPlaintext: a stream that is not TLS has no server name: the
// default chain takes it, as tls_inspector lets it through; with no
// default chain it is refused.
func TestTCPPlaintext(t *testing.T) {
	p := newPKI(t, nameA)
	a := newTLSServer(t, p, nameA)
	plain := newTLSServer(t, p, "")
	for _, withDefault := range []bool{true, false} {
		var fb *tlsServer
		if withDefault {
			fb = plain
		}
		f := newTCPForwarder(t, TCPOptions{}, fb, a)
		c, err := net.Dial("tcp", f.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "hello plaintext\n")
		b, _ := io.ReadAll(c)
		c.Close()
		if withDefault && string(b) != "|hello plaintext\n" {
			t.Errorf("default chain: got %q", b)
		}
		if !withDefault {
			if len(b) != 0 {
				t.Errorf("no default chain: got %q", b)
			}
			waitFor(t, "refusal counted", func() bool { return f.dropped(DropUnknownSNI) == 1 })
		}
		if f.event(EventNoSNI) != 1 {
			t.Errorf("sni_not_found = %v", f.event(EventNoSNI))
		}
	}
	if recs := a.records(); len(recs) != 0 || len(plain.records()) != 1 {
		t.Errorf("TLS server saw %q, plain server %q", recs, plain.records())
	}
}

func TestRoutes(t *testing.T) {
	r, err := NewRoutes([]FilterChain{
		{Name: "exact", ServerNames: []string{"a.b.example", "Other.Example."}, Cluster: "exact"},
		{Name: "wide", ServerNames: []string{"*.example"}, Cluster: "wide"},
		{Name: "narrow", ServerNames: []string{"*.b.example"}, Cluster: "narrow"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"a.b.example": "exact", "other.example": "exact", "x.b.example": "narrow",
		"y.x.b.example": "narrow", "z.example": "wide", "example": "", "": "", "b.example": "wide",
	} {
		c, ok := r.Match(name)
		if (want == "") == ok || c.Cluster != want {
			t.Errorf("Match(%q) = %q %v, want %q", name, c.Cluster, ok, want)
		}
	}
	withDefault, err := NewRoutes([]FilterChain{{Name: "d", Cluster: "d"}})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := withDefault.Match(""); !ok || c.Cluster != "d" {
		t.Errorf("default chain: %+v %v", c, ok)
	}
	for _, bad := range [][]FilterChain{
		{{Name: "x", ServerNames: []string{"a"}, Cluster: "1"}, {Name: "y", ServerNames: []string{"A."}, Cluster: "2"}},
		{{Name: "x", Cluster: "1"}, {Name: "y", Cluster: "2"}},
		{{Name: "x", ServerNames: []string{"a.*.b"}, Cluster: "1"}},
		{{Name: "x", ServerNames: []string{"a"}}},
	} {
		if _, err := NewRoutes(bad); err == nil || !strings.Contains(err.Error(), "\"x\"") {
			t.Errorf("NewRoutes(%+v) = %v, want an error naming the chain", bad, err)
		}
	}
}
