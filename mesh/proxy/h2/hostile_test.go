package h2_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	agentmtls "github.com/aether-mesh/aether/mesh/agent/mtls"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/h2"
	"github.com/aether-mesh/aether/mesh/proxy/h3"
	"github.com/aether-mesh/aether/mesh/proxy/hcm"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Hostile clients on the HTTP listeners: each attack runs against a real
// listener socket in this process while a well-behaved client sends its
// requests, and the proxy's RSS and open fds are read from /proc/self.

const (
	// goodRequests is how many requests the well-behaved client sends
	// during an attack; it must keep at least 99.9 % of them.
	goodRequests = 1000
	// rssBound and fdBound bound the proxy's (this process's) growth over
	// an attack: the attacks below would cost hundreds of MiB or one fd
	// per stream if a limit did not hold. The race detector's shadow
	// memory multiplies the RSS bound by raceScale.
	rssBound = 64 << 20
	fdBound  = 64
)

// usage is this process's resident set and open fds.
type usage struct{ rss, fds int64 }

func readUsage(t testing.TB) usage {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	var u usage
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			u.rss = kb << 10
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	u.fds = int64(len(fds))
	return u
}

// checkGrowth fails when the process grew past the bounds since before,
// and logs the figures.
func checkGrowth(t *testing.T, attack string, before usage) usage {
	t.Helper()
	after := readUsage(t)
	t.Logf("%s: RSS %d MiB -> %d MiB, fds %d -> %d", attack, before.rss>>20, after.rss>>20, before.fds, after.fds)
	if d := after.rss - before.rss; d > rssBound*raceScale {
		t.Errorf("%s: RSS grew by %d MiB, past the %d MiB bound", attack, d>>20, rssBound*raceScale>>20)
	}
	if d := after.fds - before.fds; d > fdBound {
		t.Errorf("%s: open fds grew by %d, past the %d bound", attack, d, fdBound)
	}
	return after
}

// wellBehaved sends goodRequests requests, one after another, through
// sa's outbound listener and returns how many were answered 200 with the
// app's body; start is closed before the first and done after the last.
func (m *mesh) wellBehaved(sa string, start <-chan struct{}) (ok *atomic.Int64, done <-chan struct{}) {
	ok = new(atomic.Int64)
	d := make(chan struct{})
	c := &http.Client{Timeout: 10 * time.Second}
	go func() {
		defer close(d)
		defer c.CloseIdleConnections()
		<-start
		for range goodRequests {
			req, _ := http.NewRequest("GET", "http://"+m.outbound[sa].Addr().String()+"/", nil)
			req.Host = dstAuthority
			resp, err := c.Do(req)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && strings.Contains(string(b), "URI="+id(sa)) {
				ok.Add(1)
			}
		}
	}()
	return ok, d
}

// waitReleased waits until l holds no more connections than base, the
// ones it held before the attack (the pool's upstream connection to an
// inbound): the witness that the proxy let go of every attacker's
// socket. A leak hangs here and the test binary's timeout names it.
func waitReleased(l *h2.Listener, base int) {
	for l.Held() > base {
		time.Sleep(5 * time.Millisecond)
	}
}

// warm sends one request through src's outbound listener on a client of
// its own, whose connection is then closed: the listener then holds only
// what an attack opens.
func (m *mesh) warm(t *testing.T) {
	t.Helper()
	c := &http.Client{}
	m.get(t, c, "src", dstAuthority)
	c.CloseIdleConnections()
}

func checkGood(t *testing.T, attack string, ok int64) {
	t.Helper()
	t.Logf("%s: well-behaved client %d / %d", attack, ok, goodRequests)
	if ok*1000 < goodRequests*999 {
		t.Errorf("%s: the well-behaved client kept %d of %d requests, under 99.9 %%", attack, ok, goodRequests)
	}
}

// dialAttackers opens n connections to addr, each closed when the test
// ends, and has first write each its opening bytes.
func dialAttackers(t *testing.T, addr string, n int, first func(i int, c net.Conn)) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		first(i, c)
		conns[i] = c
	}
	return conns
}

// cutAttack is what an attack that is cut off is checked against once it
// ended: the listener counted each attacker under its protocol error
// reason, the app took no whole request beyond the well-behaved
// client's and passed more, and the well-behaved client's share and the
// proxy's RSS and fds are in bounds.
type cutAttack struct {
	name, listener, reason string
	attackers              int
	// seen is the app's count before the attack; passed, the requests the
	// test itself sent through on purpose.
	seen, passed int
	before       usage
}

func (m *mesh) checkCut(t *testing.T, a cutAttack, ok int64) {
	t.Helper()
	if v := m.protocolErrors(a.listener, a.reason); v != float64(a.attackers) {
		t.Errorf("%s: %s counted %v, want %d", a.name, a.reason, v, a.attackers)
	}
	if got := m.app.count() - a.seen - int(ok) - a.passed; got > 0 {
		t.Errorf("%s: the app took %d whole requests past the good client's", a.name, got)
	}
	checkGood(t, a.name, ok)
	checkGrowth(t, a.name, a.before)
}

// h2cAttacker is a raw HTTP/2 client over cleartext: the framer, with
// the server's frames read on their own goroutine.
type h2cAttacker struct {
	conn   net.Conn
	bw     *bufio.Writer
	fr     *http2.Framer
	enc    *hpack.Encoder
	hbuf   bytes.Buffer
	goaway chan *http2.GoAwayFrame
	// status is the first response status on each stream; answered
	// gets each stream's ID as its status arrives.
	mu       sync.Mutex
	status   map[uint32]string
	answered chan uint32
	closed   chan struct{}
}

func dialH2C(t *testing.T, addr string) *h2cAttacker {
	t.Helper()
	c, err := net.Dial("tcp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	a := &h2cAttacker{conn: c, bw: bufio.NewWriterSize(c, 64<<10), goaway: make(chan *http2.GoAwayFrame, 1),
		status: map[uint32]string{}, answered: make(chan uint32, 4096), closed: make(chan struct{})}
	a.enc = hpack.NewEncoder(&a.hbuf)
	a.fr = http2.NewFramer(a.bw, c)
	if _, err := a.bw.WriteString(http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := a.fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := a.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	rd := http2.NewFramer(io.Discard, c)
	dec := hpack.NewDecoder(4096, nil)
	go func() {
		defer close(a.closed)
		for {
			f, err := rd.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				select {
				case a.goaway <- f:
				default:
				}
			case *http2.HeadersFrame:
				fields, err := dec.DecodeFull(f.HeaderBlockFragment())
				if err != nil {
					return
				}
				a.mu.Lock()
				for _, hf := range fields {
					if hf.Name == ":status" {
						a.status[f.StreamID] = hf.Value
					}
				}
				a.mu.Unlock()
				select {
				case a.answered <- f.StreamID:
				default:
				}
			}
		}
	}()
	return a
}

// block encodes a GET for authority with extra fields.
func (a *h2cAttacker) block(authority string, extra ...hpack.HeaderField) []byte {
	a.hbuf.Reset()
	for _, hf := range append([]hpack.HeaderField{{Name: ":method", Value: "GET"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: authority}, {Name: ":path", Value: "/"}}, extra...) {
		_ = a.enc.WriteField(hf)
	}
	return bytes.Clone(a.hbuf.Bytes())
}

func (m *mesh) protocolErrors(listener, reason string) float64 {
	v, _ := m.metrics.Value("aether_proxy_http_downstream_protocol_errors_total", map[string]string{"listener": listener, "reason": reason})
	return v
}

// gated holds every request the listener routes at Active until opened:
// the attacker's handlers stay running, as a busy proxy's would, so that
// x/net's handler bound, not the race between a reset and a handler's
// end, decides what happens.
type gated struct {
	m       *mesh
	open    chan struct{}
	entered atomic.Int64
	in      chan struct{}
}

func (g *gated) Active(name string) *cluster.Cluster {
	if g.entered.Add(1) == h2.MaxConcurrentStreams {
		close(g.in)
	}
	<-g.open
	return g.m.Active(name)
}

// HTTP/2 rapid reset (CVE-2023-44487's shape): one h2c connection sends
// HEADERS then RST_STREAM in a loop. x/net runs at most
// MaxConcurrentStreams handlers for it and queues the rest; past four
// times that, it closes the connection with ENHANCE_YOUR_CALM, counted as
// too_many_early_resets. The attacker speaks to its own pod's outbound
// listener, whose handlers are held busy; another pod's client keeps its
// requests through the same process meanwhile.
func TestRapidResetIsCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src", "evil")
	g := &gated{m: m, open: make(chan struct{}), in: make(chan struct{})}
	spec := m.specs[m.outbound["evil"].Name()]
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// The attacker's 20,000 cancelled requests would each log a line.
	quiet := m.opts
	quiet.Log = slog.New(slog.DiscardHandler)
	evil := h2.Serve(spec, ln, g, quiet)
	t.Cleanup(func() { close(g.open); evil.Close() })
	m.get(t, http.DefaultClient, "src", dstAuthority) // warm the pool
	before := readUsage(t)

	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	a := dialH2C(t, evil.Addr().String())
	const pairs = 20000
	block := a.block(dstAuthority)
	sent := 0
	for i := range pairs {
		id := uint32(2*i + 1)
		if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndStream: true, EndHeaders: true}); err != nil {
			break
		}
		if err := a.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			break
		}
		sent++
		if i == h2.MaxConcurrentStreams {
			if err := a.bw.Flush(); err != nil {
				break
			}
			// The attacker's handlers are all running before the other
			// client starts, so its requests overlap the attack.
			<-g.in
			close(start)
		}
		if i%64 == 0 {
			if err := a.bw.Flush(); err != nil {
				break
			}
		}
	}
	_ = a.bw.Flush()
	ga := <-a.goaway
	<-done
	if ga.ErrCode != http2.ErrCodeEnhanceYourCalm {
		t.Errorf("rapid reset: GOAWAY %v, want ENHANCE_YOUR_CALM", ga.ErrCode)
	}
	<-a.closed
	if v := m.protocolErrors(evil.Name(), metrics.ProtocolEarlyResets); v != 1 {
		t.Errorf("rapid reset: %s counted %v, want 1", metrics.ProtocolEarlyResets, v)
	}
	if n := g.entered.Load(); n != h2.MaxConcurrentStreams {
		t.Errorf("rapid reset: %d of the attacker's handlers ran, want the bound %d", n, h2.MaxConcurrentStreams)
	}
	t.Logf("rapid reset: %d HEADERS+RST_STREAM pairs written before the cut, handlers run %d, GOAWAY last stream %d", sent, g.entered.Load(), ga.LastStreamID)
	checkGood(t, "rapid reset", ok.Load())
	checkGrowth(t, "rapid reset", before)
}

// A CONTINUATION flood (CVE-2024-27316's shape): one HEADERS without
// END_HEADERS, then CONTINUATION frames for ever. x/net stops decoding at
// MaxHeaderBytes and closes the connection with PROTOCOL_ERROR; the
// attacker's writes then fail. The bound on what it wrote is counted by
// frames.
func TestContinuationFloodIsCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	m.get(t, http.DefaultClient, "src", dstAuthority)
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	close(start)

	a := dialH2C(t, m.outbound["src"].Addr().String())
	// Each CONTINUATION carries a never-indexed literal of 16 KiB less
	// its framing: the decoder must account for every one.
	frag := a.block(dstAuthority)
	a.hbuf.Reset()
	_ = a.enc.WriteField(hpack.HeaderField{Name: "x-flood", Value: strings.Repeat("a", 16<<10-16), Sensitive: true})
	cont := bytes.Clone(a.hbuf.Bytes())
	if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: frag, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	const frames = 4096 // 64 MiB if nothing stops it
	written := 0
	for range frames {
		if err := a.fr.WriteContinuation(1, false, cont); err != nil {
			break
		}
		if err := a.bw.Flush(); err != nil {
			break
		}
		written++
	}
	<-done
	var ga *http2.GoAwayFrame
	select {
	case ga = <-a.goaway:
	case <-a.closed:
		// The reader ends at the connection's end; a GOAWAY read before
		// it is in the channel.
		select {
		case ga = <-a.goaway:
		default:
		}
	}
	// The proxy closes with the attacker's frames unread, so the kernel's
	// reset may discard the GOAWAY before it is read: only a GOAWAY read
	// is checked.
	if ga != nil && ga.ErrCode != http2.ErrCodeProtocol {
		t.Errorf("CONTINUATION flood: GOAWAY %v, want PROTOCOL_ERROR", ga.ErrCode)
	}
	if written == frames {
		t.Errorf("CONTINUATION flood: all %d frames (%d MiB) were taken; the connection was never cut", frames, frames*len(cont)>>20)
	}
	if v := m.protocolErrors(m.outbound["src"].Name(), metrics.ProtocolReadError); v != 1 {
		t.Errorf("CONTINUATION flood: %s counted %v, want 1", metrics.ProtocolReadError, v)
	}
	t.Logf("CONTINUATION flood: %d of %d frames written before the cut (socket buffers hold some)", written, frames)
	checkGood(t, "CONTINUATION flood", ok.Load())
	checkGrowth(t, "CONTINUATION flood", before)
}

// An HPACK bomb: one 4 KiB field entered in the dynamic table, then
// referenced by its one-byte index thousands of times in one header
// block; decoded, it is tens of MiB. x/net stops at MaxHeaderBytes and
// answers 431; the connection serves on, and the other client keeps its
// requests.
func TestHPACKBombIs431(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	m.get(t, http.DefaultClient, "src", dstAuthority)
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	close(start)

	a := dialH2C(t, m.outbound["src"].Addr().String())
	const bombs = 64
	for i := range bombs {
		a.hbuf.Reset()
		blk := a.block(dstAuthority, hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)})
		// The field just indexed is the dynamic table's first entry,
		// index 62: 0x80|62 is its one-byte reference.
		refs := bytes.Repeat([]byte{0x80 | 62}, 12000)
		blk = append(blk, refs...)
		if err := writeBlock(a, uint32(2*i+1), blk); err != nil {
			t.Fatalf("bomb %d: %v", i, err)
		}
		a.encReset()
	}
	if err := a.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	// A request after the bombs on the same connection: its answer is
	// the witness that all of them were read.
	last := uint32(2*bombs + 1)
	if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: last, BlockFragment: a.block(dstAuthority), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	<-done
	for n := range bombs + 1 {
		select {
		case <-a.answered:
		case <-a.closed:
			t.Fatalf("HPACK bomb: the connection closed with %d of %d answers", n, bombs+1)
		}
	}
	a.mu.Lock()
	for i := range bombs {
		if s := a.status[uint32(2*i+1)]; s != "431" {
			t.Errorf("HPACK bomb %d: status %s, want 431", i, s)
		}
	}
	if s := a.status[last]; s != "200" {
		t.Errorf("HPACK bomb: the request after the bombs got %s, want 200", s)
	}
	a.mu.Unlock()
	t.Logf("HPACK bomb: %d blocks of %d MiB decoded each, all 431", bombs, 12000*4032>>20)
	checkGood(t, "HPACK bomb", ok.Load())
	checkGrowth(t, "HPACK bomb", before)
}

// encReset makes the encoder forget its dynamic table as the peer's
// decoder does not: the next block indexes its field anew.
func (a *h2cAttacker) encReset() {
	a.hbuf.Reset()
	a.enc = hpack.NewEncoder(&a.hbuf)
}

// writeBlock writes one header block as HEADERS and CONTINUATION frames
// of at most 16 KiB.
func writeBlock(a *h2cAttacker, id uint32, blk []byte) error {
	const max = 16 << 10
	first := blk[:min(max, len(blk))]
	rest := blk[len(first):]
	if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: true, EndHeaders: len(rest) == 0}); err != nil {
		return err
	}
	for len(rest) > 0 {
		n := min(max, len(rest))
		if err := a.fr.WriteContinuation(id, n == len(rest), rest[:n]); err != nil {
			return err
		}
		rest = rest[n:]
	}
	return nil
}

// Oversized headers over HTTP/1.1 to the outbound listener: a 100 KiB
// header is past MaxHeaderBytes (60 KiB, Envoy's max_request_headers_kb)
// and answered 431, though under net/http's default of 1 MiB. The app
// never sees it; 50 KiB, under the limit, still reaches it.
func TestOversizedHTTP1HeadersAre431(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	m.warm(t)
	seen := m.app.count()
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	close(start)
	const attacks = 200
	big := strings.Repeat("h", 100<<10)
	refused := 0
	for i := range attacks {
		c, err := net.Dial("tcp4", m.outbound["src"].Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nX-Big: %s\r\n\r\n", dstAuthority, big)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			c.Close()
			t.Fatalf("oversized request %d: %v", i, err)
		}
		resp.Body.Close()
		c.Close()
		if resp.StatusCode == http.StatusRequestHeaderFieldsTooLarge {
			refused++
		}
	}
	<-done
	// The boundary's other side: 50 KiB of headers, under the limit, is
	// forwarded to the app.
	under, err := http.NewRequest("GET", "http://"+m.outbound["src"].Addr().String()+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	under.Host = dstAuthority
	under.Header.Set("X-Big", strings.Repeat("u", 50<<10))
	uc := &http.Client{}
	resp, err := uc.Do(under)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	uc.CloseIdleConnections()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("50 KiB of headers, under the limit: status %d, want 200", resp.StatusCode)
	}
	seen++
	// net/http holds each 431's connection for its reset-avoidance delay
	// (500 ms) after answering: the fds return once the listener holds
	// none. The peak is logged.
	t.Logf("oversized HTTP/1.1 headers: fds %d at the attack's end", readUsage(t).fds)
	waitReleased(m.outbound["src"], 0)
	if refused != attacks {
		t.Errorf("oversized HTTP/1.1 headers: %d of %d answered 431", refused, attacks)
	}
	if v := m.protocolErrors(m.outbound["src"].Name(), metrics.ProtocolHeadersTooLarge); v != attacks {
		t.Errorf("oversized HTTP/1.1 headers: %s counted %v, want %d", metrics.ProtocolHeadersTooLarge, v, attacks)
	}
	if v := m.protocolErrors(m.outbound["src"].Name(), metrics.ProtocolHeadersTimeout); v != 0 {
		t.Errorf("oversized HTTP/1.1 headers: %s counted %v, want 0", metrics.ProtocolHeadersTimeout, v)
	}
	if got := m.app.count() - seen - int(ok.Load()); got > 0 {
		t.Errorf("oversized HTTP/1.1 headers: the app saw %d requests past the good client's", got)
	}
	checkGood(t, "oversized HTTP/1.1 headers", ok.Load())
	checkGrowth(t, "oversized HTTP/1.1 headers", before)
}

// reserve serves spec again on a fresh loopback port with opts changed
// by change, in place of the listener named so in m.
func (m *mesh) reserve(t *testing.T, name string, change func(*h2.Options)) *h2.Listener {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := m.opts
	change(&o)
	l := h2.Serve(m.specs[name], ln, m, o)
	t.Cleanup(func() { l.Close() })
	return l
}

// waitClosed reads c until the proxy closes it: the witness that the
// limit cut it off. What it read is returned, and c is closed: the
// attacker's fds are this process's too.
func waitClosed(c net.Conn) string {
	b, _ := io.ReadAll(c)
	c.Close()
	return string(b)
}

// Slowloris on the plain outbound listener: 50 clients send part of a
// request's headers and then nothing, 50 more send fewer bytes than the
// HTTP/2 preface's first line. Each is closed at the request headers
// timeout, unanswered, and counted; the well-behaved client on the same
// listener keeps its requests meanwhile. The listener here has a
// 300 ms timeout in place of RequestHeadersTimeout, so that the test
// waits less; nothing is timed, each close is waited on.
func TestSlowHeadersAreCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	m.outbound["src"] = m.reserve(t, m.outbound["src"].Name(), func(o *h2.Options) { o.HeaderTimeout = 300 * time.Millisecond })
	m.warm(t)
	seen := m.app.count()
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	const attackers = 100
	conns := dialAttackers(t, m.outbound["src"].Addr().String(), attackers, func(i int, c net.Conn) {
		if i%2 == 0 {
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nX-Slow: a", dstAuthority)
		} else {
			io.WriteString(c, "GET /")
		}
	})
	close(start)
	for i, c := range conns {
		if got := waitClosed(c); got != "" {
			t.Errorf("slowloris %d: answered %q, want the connection closed unanswered", i, got)
		}
	}
	<-done
	waitReleased(m.outbound["src"], 0)
	m.checkCut(t, cutAttack{name: "slowloris", listener: m.outbound["src"].Name(), reason: metrics.ProtocolHeadersTimeout,
		attackers: attackers, seen: seen, before: before}, ok.Load())
}

// Clients that open a TCP connection to the mTLS inbound and never
// handshake: half send nothing, half the first bytes of a ClientHello.
// Each is closed at the handshake timeout and counted as
// handshake_timeout, while the well-behaved client's requests cross the
// same inbound listener. The inbound here has a 500 ms handshake timeout
// in place of the proxy's 10 s; nothing is timed.
func TestNeverHandshakingClientsAreCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	in := m.reserve(t, m.inbound.Name(), func(o *h2.Options) { o.HandshakeTimeout = 500 * time.Millisecond })
	m.clusters[xdsnames.H2Cluster("dst", ns)].SetAssignment(&cluster.Assignment{Name: xdsnames.H2Cluster("dst", ns), Endpoints: []cluster.Endpoint{{Addr: in.Addr(), Weight: 1}}})
	m.inbound = in
	m.get(t, http.DefaultClient, "src", dstAuthority)
	held := in.Held()
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	const attackers = 100
	conns := dialAttackers(t, in.Addr().String(), attackers, func(i int, c net.Conn) {
		if i%2 == 1 {
			// A TLS record header announcing a 512-byte handshake, and
			// its first bytes only.
			c.Write([]byte{0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03})
		}
	})
	close(start)
	for i, c := range conns {
		if got := waitClosed(c); got != "" {
			t.Errorf("never-handshaking client %d: answered %q, want the connection closed", i, got)
		}
	}
	<-done
	waitReleased(in, held)
	if v := m.refused(metrics.RefusedHandshakeTimeout); v != attackers {
		t.Errorf("never-handshaking clients: %s counted %v, want %d", metrics.RefusedHandshakeTimeout, v, attackers)
	}
	checkGood(t, "never-handshaking clients", ok.Load())
	checkGrowth(t, "never-handshaking clients", before)
}

// The HTTP/3 inbound states its own header limit (package h3 cannot
// import this one); both are Envoy's max_request_headers_kb.
func TestHeaderLimitsAgree(t *testing.T) {
	if h2.MaxHeaderBytes != h3.MaxHeaderBytes {
		t.Errorf("h2.MaxHeaderBytes %d, h3.MaxHeaderBytes %d: one limit for every HTTP listener", h2.MaxHeaderBytes, h3.MaxHeaderBytes)
	}
}

// serveOutboundHCM serves sa's outbound listener again, from the agent's
// resource with its connection manager changed by change, in place of
// the one newMesh served.
func (m *mesh) serveOutboundHCM(t *testing.T, sa string, change func(*hcmv3.HttpConnectionManager)) *h2.Listener {
	t.Helper()
	mc := agentmtls.Mesh{Domain: meshDomain, AccessLog: filepath.Join(m.logDir, "access.log")}
	src := agentmtls.Pod{Namespace: ns, Name: sa + "-0", ID: id(sa)}
	l, err := agentmtls.OutboundListenerFor(mc, src, []agentmtls.Route{{Service: "dst", Namespace: ns}}, agentmtls.HashableString)
	if err != nil {
		t.Fatal(err)
	}
	changeHCM(t, l, change)
	m.outbound[sa].Close()
	m.outbound[sa] = m.serve(t, l)
	return m.outbound[sa]
}

// changeHCM changes every connection manager of l's filter chains.
func changeHCM(t *testing.T, l *listenerv3.Listener, change func(*hcmv3.HttpConnectionManager)) {
	t.Helper()
	n := 0
	for _, fc := range l.GetFilterChains() {
		for _, f := range fc.GetFilters() {
			if f.GetName() != hcm.Filter {
				continue
			}
			var h hcmv3.HttpConnectionManager
			if err := f.GetTypedConfig().UnmarshalTo(&h); err != nil {
				t.Fatal(err)
			}
			change(&h)
			a, err := anypb.New(&h)
			if err != nil {
				t.Fatal(err)
			}
			f.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
			n++
		}
	}
	if n == 0 {
		t.Fatalf("listener %s: no %s filter", l.GetName(), hcm.Filter)
	}
}

// waitOpen waits until the app has no more than n connections open: each
// slow body the proxy cut held one from the inbound's pool, which must
// close with it (the well-behaved client's may stay, idle, in the pool).
// A leak hangs here and the test binary's timeout names it.
func (a *app) waitOpen(n int) {
	for a.open() > n {
		time.Sleep(5 * time.Millisecond)
	}
}

// slowBodyTimeout is the outbound listener's stream_idle_timeout in the
// slow-body tests, in place of Envoy's 5 minutes, so that the test waits
// less; nothing is timed, each cut is waited on.
const slowBodyTimeout = 300 * time.Millisecond

// slowBodyDeadline bounds how long an attacker waits for its cut: many
// times the timeout, so that without one the test fails instead of
// hanging.
const slowBodyDeadline = 20 * time.Second

// Slow bodies over HTTP/1.1 on the plain outbound listener: 100 clients
// each send a POST's headers, announcing 1000 bytes of body, then 10 of
// them, then nothing. The proxy forwards the headers and waits on the
// body as the upstream pulls it; at the listener's stream_idle_timeout
// (set in its HttpConnectionManager) each is answered 408 "stream
// timeout" and its connection closed, and counted as
// stream_idle_timeout. The app sees none whole; the well-behaved client
// on the same listener keeps its requests meanwhile.
func TestSlowHTTP1BodiesAreCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	out := m.serveOutboundHCM(t, "src", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(slowBodyTimeout) })
	m.warm(t)
	seen, appOpen := m.app.count(), m.app.open()+1
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)
	const attackers = 100
	conns := dialAttackers(t, out.Addr().String(), attackers, func(_ int, c net.Conn) {
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: 1000\r\n\r\n%s", dstAuthority, strings.Repeat("b", 10))
		_ = c.SetReadDeadline(time.Now().Add(slowBodyDeadline))
	})
	close(start)
	cut := 0
	for i, c := range conns {
		got := waitClosed(c)
		if strings.HasPrefix(got, "HTTP/1.1 408 ") && strings.HasSuffix(got, "stream timeout") {
			cut++
			continue
		}
		if i < 3 {
			t.Errorf("slow body %d: answered %q, want 408 \"stream timeout\" and the connection closed", i, got)
		}
	}
	<-done
	waitReleased(out, 0)
	t.Logf("slow HTTP/1.1 bodies: %d connections to the app open at the cut's end", m.app.open())
	m.app.waitOpen(appOpen)
	if cut != attackers {
		t.Errorf("slow HTTP/1.1 bodies: %d of %d cut with 408", cut, attackers)
	}
	m.checkCut(t, cutAttack{name: "slow HTTP/1.1 bodies", listener: out.Name(), reason: metrics.ProtocolStreamIdleTimeout,
		attackers: attackers, seen: seen, before: before}, ok.Load())
}

// Slow bodies over h2c on the plain outbound listener: one connection
// opens 100 streams, each a POST's HEADERS announcing 1000 bytes and a
// DATA frame of 10, then nothing. Each stream is answered 408 at the
// stream_idle_timeout and counted; the connection serves on (a GET on it
// after the cuts is answered 200), and the well-behaved client keeps its
// requests.
func TestSlowH2BodiesAreCutOff(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	out := m.serveOutboundHCM(t, "src", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(slowBodyTimeout) })
	m.warm(t)
	seen, appOpen := m.app.count(), m.app.open()+1
	before := readUsage(t)
	start := make(chan struct{})
	ok, done := m.wellBehaved("src", start)

	a := dialH2C(t, out.Addr().String())
	const attackers = 100
	a.hbuf.Reset()
	for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":authority", Value: dstAuthority}, {Name: ":path", Value: "/"}, {Name: "content-length", Value: "1000"}} {
		_ = a.enc.WriteField(hf)
	}
	post := bytes.Clone(a.hbuf.Bytes())
	for i := range attackers {
		id := uint32(2*i + 1)
		// The same block each time: its literals refer to no entry of
		// the dynamic table, only add to it.
		if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: post, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := a.fr.WriteData(id, false, bytes.Repeat([]byte("b"), 10)); err != nil {
			t.Fatal(err)
		}
	}
	a.encReset()
	if err := a.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	close(start)
	deadline := time.After(slowBodyDeadline)
	for n := range attackers {
		select {
		case <-a.answered:
		case <-a.closed:
			t.Fatalf("slow h2 bodies: the connection closed with %d of %d answers", n, attackers)
		case <-deadline:
			t.Fatalf("slow h2 bodies: %d of %d streams answered in %v; the rest are held", n, attackers, slowBodyDeadline)
		}
	}
	a.mu.Lock()
	cut := 0
	for i := range attackers {
		if s := a.status[uint32(2*i+1)]; s == "408" {
			cut++
		} else if i < 3 {
			t.Errorf("slow h2 body %d: status %s, want 408", i, s)
		}
	}
	a.mu.Unlock()
	// The connection serves on.
	last := uint32(2*attackers + 1)
	if err := a.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: last, BlockFragment: a.block(dstAuthority), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := a.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.answered:
	case <-a.closed:
		t.Fatal("slow h2 bodies: the connection closed before the request after the cuts was answered")
	}
	a.mu.Lock()
	if s := a.status[last]; s != "200" {
		t.Errorf("slow h2 bodies: the request after the cuts got %s, want 200", s)
	}
	a.mu.Unlock()
	<-done
	t.Logf("slow h2 bodies: %d connections to the app open at the cut's end", m.app.open())
	m.app.waitOpen(appOpen)
	if cut != attackers {
		t.Errorf("slow h2 bodies: %d of %d streams cut with 408", cut, attackers)
	}
	// The GET after the cuts is the one request of the test's own.
	m.checkCut(t, cutAttack{name: "slow h2 bodies", listener: out.Name(), reason: metrics.ProtocolStreamIdleTimeout,
		attackers: attackers, seen: seen, passed: 1, before: before}, ok.Load())
}

// A slow body the proxy never reads: a POST for an authority no route
// takes is answered 404 at once, and net/http would then wait, with no
// deadline, for the rest of its body (it reads up to 256 KiB of it so
// that the connection can serve on). The body has the stream idle
// timeout in all after the answer: each connection is closed by it.
func TestUnreadSlowBodyIsBounded(t *testing.T) {
	m := newMesh(t, meshConfig{}, "src")
	out := m.serveOutboundHCM(t, "src", func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(slowBodyTimeout) })
	const attackers = 20
	conns := dialAttackers(t, out.Addr().String(), attackers, func(_ int, c net.Conn) {
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: nobody.example\r\nContent-Length: 1000\r\n\r\n%s", strings.Repeat("b", 10))
		_ = c.SetReadDeadline(time.Now().Add(slowBodyDeadline))
	})
	for i, c := range conns {
		got := waitClosed(c)
		if !strings.HasPrefix(got, "HTTP/1.1 404 ") {
			t.Errorf("unread slow body %d: answered %q, want 404", i, got)
		}
		if strings.Count(got, "HTTP/1.1 ") != 1 {
			t.Errorf("unread slow body %d: %q, want one answer", i, got)
		}
	}
	waitReleased(out, 0)
}
