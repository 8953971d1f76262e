package passthrough

import (
	"bytes"
	"crypto/rand"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/aether-mesh/aether/mesh/proxy/sni"
	"github.com/aether-mesh/aether/mesh/proxy/sni/snitest"
)

const (
	nameA = "a.ns1.svc.cluster.local"
	nameB = "b.ns2.svc.cluster.local"
)

// TestQUICRoutesBySNI: two clients through one forwarder, each SNI at its
// own server (the servers' records are the witness), the TLS session end
// to end (the client verifies the server's own certificate).
func TestQUICRoutesBySNI(t *testing.T) {
	p := newPKI(t, nameA, nameB)
	a := newQUICServer(t, p, nameA, serverOpts{})
	b := newQUICServer(t, p, nameB, serverOpts{})
	fw := newForwarder(t, QUICOptions{}, a, b)
	for _, name := range []string{nameA, nameB, nameA} {
		c, err := dial(t, p, fw, name, clientOpts{})
		if err != nil {
			t.Fatalf("dial %s: %v", name, err)
		}
		got, err := echo(c, "ping", 10*time.Second)
		if err != nil || got != name+"|ping" {
			t.Fatalf("%s: echo = %q, %v", name, got, err)
		}
		if cs := c.ConnectionState().TLS; cs.PeerCertificates[0].Subject.CommonName != name {
			t.Errorf("%s: client verified %q", name, cs.PeerCertificates[0].Subject.CommonName)
		}
		c.CloseWithError(0, "")
	}
	for _, s := range []*echoServer{a, b} {
		recs := s.records()
		want := map[string]int{nameA: 2, nameB: 1}[s.name]
		if len(recs) != want {
			t.Errorf("server %s saw %d connections, want %d: %+v", s.name, len(recs), want, recs)
		}
		for _, r := range recs {
			if r.sni != s.name {
				t.Errorf("server %s got a connection for %q", s.name, r.sni)
			}
		}
	}
	if fw.flowsTo("cl-"+nameA) != 2 || fw.flowsTo("cl-"+nameB) != 1 {
		t.Errorf("flows counted %v / %v, want 2 / 1", fw.flowsTo("cl-"+nameA), fw.flowsTo("cl-"+nameB))
	}
}

// TestQUICUnknownSNI: an SNI no chain lists reaches no server and is
// counted; the flow is remembered as refused, not re-inspected.
func TestQUICUnknownSNI(t *testing.T) {
	p := newPKI(t, nameA, "c.ns3.svc.cluster.local")
	a := newQUICServer(t, p, nameA, serverOpts{})
	fw := newForwarder(t, QUICOptions{}, a)
	tc := p.clientTLS("c.ns3.svc.cluster.local")
	if _, err := dial(t, p, fw, "", clientOpts{tls: tc, timeout: 1500 * time.Millisecond}); err == nil {
		t.Fatal("a connection for an unknown SNI was established")
	}
	if n := fw.dropped(DropUnknownSNI); n < 2 {
		t.Errorf("dropped{unknown_sni} = %v, want the ClientHello's datagrams and retransmissions", n)
	}
	if recs := a.records(); len(recs) != 0 {
		t.Errorf("server saw %+v", recs)
	}
	if active, pending := fw.Flows(); active != 0 || pending != 1 {
		t.Errorf("flows active %d pending %d, want 0 / the one refused", active, pending)
	}
}

// TestQUICRebind: a client whose socket moves to a new port mid-connection
// keeps its connection: the forwarder finds the flow by the DCID the
// server chose. The control routes by 4-tuple only and loses it.
func TestQUICRebind(t *testing.T) {
	for _, control := range []bool{false, true} {
		name := map[bool]string{false: "by connection ID", true: "control: 4-tuple only"}[control]
		t.Run(name, func(t *testing.T) {
			p := newPKI(t, nameA)
			a := newQUICServer(t, p, nameA, serverOpts{})
			fw := newForwarderStopped(t, QUICOptions{}, a)
			fw.noCIDRouting = control
			go fw.Serve()
			rc := newRebindConn(t)
			c, err := dial(t, p, fw, nameA, clientOpts{conn: rc})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := echo(c, "before", 10*time.Second); err != nil || got != nameA+"|before" {
				t.Fatalf("before rebind: %q %v", got, err)
			}
			// quic-go moves to a CID from the server's NEW_CONNECTION_ID
			// right after the handshake; the forwarder learns it from the
			// first short header that carries it from the known address
			// (the client's first DCID, the server's SCID, then this one).
			// A rebinding before that packet cannot be followed.
			if _, err := echo(c, "again", 10*time.Second); err != nil {
				t.Fatal(err)
			}
			if !control {
				waitFor(t, "the client's current DCID learned", func() bool { return fw.event(EventCIDLearned) >= 3 })
			}
			old, now := rc.rebind(t)
			if old.String() == now.String() {
				t.Fatal("rebind kept the address")
			}
			timeout := 10 * time.Second
			if control {
				timeout = 2 * time.Second
			}
			got, err := echo(c, "after", timeout)
			if control {
				if err == nil {
					t.Fatalf("4-tuple-only forwarder kept the rebound connection: %q", got)
				}
				if fw.dropped(DropNotQUIC) == 0 {
					t.Error("the rebound client's short headers were not counted as dropped")
				}
				return
			}
			if err != nil || got != nameA+"|after" {
				t.Fatalf("after rebind: %q %v", got, err)
			}
			if fw.event(EventMigrated) < 1 {
				t.Error("migration not counted")
			}
			recs := a.records()
			if len(recs) != 3 || recs[0].remote != recs[2].remote {
				t.Errorf("server records %+v: want three streams of one connection from one address", recs)
			}
			if active, _ := fw.Flows(); active != 1 {
				t.Errorf("%d active flows, want the one", active)
			}
		})
	}
}

// TestQUICSpray: junk, plaintext, forged Initials that do not open, small
// Initials and non-Initial long headers are each dropped and counted by
// reason, creating no flow, while a valid client still gets through.
func TestQUICSpray(t *testing.T) {
	p := newPKI(t, nameA)
	a := newQUICServer(t, p, nameA, serverOpts{})
	fw := newForwarder(t, QUICOptions{}, a)
	spray, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(fw.addrPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer spray.Close()
	forged := func() []byte {
		d := make([]byte, 1200)
		rand.Read(d)
		d[0] = 0xc0 | d[0]&0x0f
		copy(d[1:], []byte{0, 0, 0, 1, 8})
		d[14] = 0                              // no SCID
		d[15] = 0                              // no token
		d[16], d[17] = 0x40|1182>>8, 1182&0xff // Length: the rest
		return d
	}
	hello, err := snitest.QUICClientHello(nameA)
	if err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		reason string
		make   func() []byte
	}{
		{DropNotQUIC, func() []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n") }},
		{DropNotQUIC, func() []byte { d := make([]byte, 60); rand.Read(d); d[0] &= 0x7f; return d }},
		{DropUndecryptable, forged},
		{DropSmallInitial, func() []byte { d := forged()[:600]; d[16], d[17] = 0x40|582>>8, 582&0xff; return d }},
		{DropNotInitial, func() []byte { d := forged(); d[0] = 0xe0; return d }}, // Handshake
		{DropVersion, func() []byte { d := forged(); copy(d[1:5], []byte{0x1a, 0x2a, 0x3a, 0x4a}); return d }},
		{DropMalformed, func() []byte {
			// Opens, but carries a STREAM frame, which no Initial may.
			dcid := make([]byte, 8)
			rand.Read(dcid)
			payload := append([]byte{0x08, 0, 4}, "junk"...)
			payload = sni.AppendCryptoFrame(payload, 0, hello[:100])
			d, _ := snitest.Pad(sni.Version1, dcid, nil, 0, payload)
			return d
		}},
	}
	const each = 200
	want := map[string]float64{}
	for _, k := range kinds {
		for i := 0; i < each; i++ {
			if _, err := spray.Write(k.make()); err != nil {
				t.Fatal(err)
			}
			want[k.reason]++
			// Pace by the counters, so the kernel drops none and the
			// counts can be exact.
			if i%50 == 49 {
				waitFor(t, k.reason+" counted", func() bool { return fw.dropped(k.reason) >= want[k.reason] })
			}
		}
	}
	c, err := dial(t, p, fw, nameA, clientOpts{})
	if err != nil {
		t.Fatalf("valid client under spray: %v", err)
	}
	if got, err := echo(c, "through", 10*time.Second); err != nil || got != nameA+"|through" {
		t.Fatalf("valid client: %q %v", got, err)
	}
	for reason, n := range want {
		if got := fw.dropped(reason); got != n {
			t.Errorf("dropped{%s} = %v, want %v", reason, got, n)
		}
	}
	if active, pending := fw.Flows(); active != 1 || pending != 0 {
		t.Errorf("flows active %d pending %d, want the valid one only", active, pending)
	}
	// Each unsupported version that filled a datagram was answered with
	// a Version Negotiation offering v1 and v2.
	spray.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1500)
	n, err := spray.Read(buf)
	if err != nil {
		t.Fatalf("no Version Negotiation: %v", err)
	}
	h, err := sni.ParseLongHeader(buf[:n])
	if err != nil || h.Type != sni.VersionNegotiation || !bytes.Contains(buf[:n], []byte{0, 0, 0, 1}) {
		t.Errorf("reply %x is not a VN offering v1 (%v)", buf[:n], err)
	}
}

// TestQUICFlowCap: with MaxFlows 1 a second connection is refused and
// counted while the first holds; once the first expires a new one gets in.
// The pending cap holds too: forged first halves of ClientHellos fill it,
// the overflow is counted, and expiry frees it.
func TestQUICFlowCap(t *testing.T) {
	p := newPKI(t, nameA)
	a := newQUICServer(t, p, nameA, serverOpts{})
	fw := newForwarder(t, QUICOptions{MaxFlows: 1, MaxPendingFlows: 4, IdleTimeout: time.Hour, PendingTimeout: time.Hour}, a)
	c1, err := dial(t, p, fw, nameA, clientOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echo(c1, "one", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(t, p, fw, nameA, clientOpts{timeout: 1500 * time.Millisecond}); err == nil {
		t.Fatal("a second flow got past MaxFlows 1")
	}
	if fw.dropped(DropFlowOverflow) == 0 {
		t.Error("flow overflow not counted")
	}
	if len(a.records()) != 1 {
		t.Errorf("server saw %d connections, want 1", len(a.records()))
	}
	// The refused flow is held (pending, as refused) until its timeout;
	// an hour on, both flows are gone.
	fw.expire(time.Now().Add(2 * time.Hour))
	if active, pending := fw.Flows(); active != 0 || pending != 0 {
		t.Fatalf("after expiry: active %d pending %d", active, pending)
	}
	if fw.event(EventExpired) != 1 {
		t.Errorf("expired = %v, want the idle flow", fw.event(EventExpired))
	}
	c1.CloseWithError(0, "")

	hello, err := snitest.QUICClientHello(nameA)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		_, dgs, err := snitest.Initials(sni.Version1, hello, 1000)
		if err != nil {
			t.Fatal(err)
		}
		// Each from its own port, the first half only: each is a pending
		// flow until it expires.
		spray, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(fw.addrPort()))
		if err != nil {
			t.Fatal(err)
		}
		defer spray.Close()
		spray.Write(dgs[0])
	}
	waitFor(t, "pending overflow counted", func() bool { return fw.dropped(DropPendingOverflow) >= 6 })
	if _, pending := fw.Flows(); pending != 4 {
		t.Errorf("pending = %d, want the cap 4", pending)
	}
	fw.expire(time.Now().Add(2 * time.Hour))
	if fw.event(EventPendingExpired) < 4 {
		t.Errorf("pending_expired = %v", fw.event(EventPendingExpired))
	}
	c3, err := dial(t, p, fw, nameA, clientOpts{})
	if err != nil {
		t.Fatalf("after expiry: %v", err)
	}
	if _, err := echo(c3, "three", 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// TestQUICVersionNegotiation: a client that offers v2 to a v1-only server
// gets the server's Version Negotiation through the forwarder and
// reconnects with v1 on the same flow.
func TestQUICVersionNegotiation(t *testing.T) {
	p := newPKI(t, nameA)
	a := newQUICServer(t, p, nameA, serverOpts{versions: []quic.Version{quic.Version1}})
	fw := newForwarder(t, QUICOptions{}, a)
	c, err := dial(t, p, fw, nameA, clientOpts{versions: []quic.Version{quic.Version2, quic.Version1}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echo(c, "vn", 10*time.Second); err != nil || got != nameA+"|vn" {
		t.Fatalf("%q %v", got, err)
	}
	if v := c.ConnectionState().Version; v != quic.Version1 {
		t.Errorf("negotiated %v, want v1", v)
	}
	if recs := a.records(); len(recs) != 1 || recs[0].version != quic.Version1 {
		t.Errorf("server records %+v", recs)
	}
}

// TestQUICRetry: a server that sends Retry; the client's second Initial
// (to the Retry's SCID) follows the same flow.
func TestQUICRetry(t *testing.T) {
	p := newPKI(t, nameA)
	a := newQUICServer(t, p, nameA, serverOpts{retry: true})
	fw := newForwarder(t, QUICOptions{}, a)
	c, err := dial(t, p, fw, nameA, clientOpts{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echo(c, "retry", 10*time.Second); err != nil || got != nameA+"|retry" {
		t.Fatalf("%q %v", got, err)
	}
	if n := fw.flowsTo("cl-" + nameA); n != 1 {
		t.Errorf("flows = %v, want the one", n)
	}
}

// reorderConn sends the 0-RTT packet quic-go coalesces into its second
// Initial datagram (the one that completes the ClientHello) once more on
// its own, ahead of that datagram: so 0-RTT reaches the forwarder while
// the flow is still pending, as a reordering network would deliver it.
// The server drops the later copy as a duplicate.
type reorderConn struct {
	net.PacketConn // not *net.UDPConn: quic-go must write through WriteTo
	n              atomic.Int32
}

func (r *reorderConn) WriteTo(b []byte, a net.Addr) (int, error) {
	if r.n.Add(1) == 2 {
		for rest := b; len(rest) > 0 && sni.IsLongHeader(rest[0]); {
			h, err := sni.ParseLongHeader(rest)
			if err != nil {
				break
			}
			if h.Type == sni.ZeroRTT {
				r.PacketConn.WriteTo(rest[:h.Len], a)
				break
			}
			rest = rest[h.Len:]
		}
	}
	return r.PacketConn.WriteTo(b, a)
}

// TestQUIC0RTT: a resumed client sends 0-RTT data; its 0-RTT datagram
// arrives while the flow is still pending (the second Initial held back)
// and is held within the bound, then reaches the server, which accepts it.
func TestQUIC0RTT(t *testing.T) {
	p := newPKI(t, nameA)
	a := newQUICServer(t, p, nameA, serverOpts{allow0: true})
	fw := newForwarder(t, QUICOptions{}, a)
	tc := p.clientTLS(nameA)
	c, err := dial(t, p, fw, nameA, clientOpts{tls: tc})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := echo(c, "first", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	// The session ticket arrives after the handshake; let it land.
	waitFor(t, "session ticket", func() bool {
		_, ok := tc.ClientSessionCache.Get(nameA)
		return ok
	})
	c.CloseWithError(0, "")
	uc, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	rc := &reorderConn{PacketConn: uc}
	c2, err := dial(t, p, fw, nameA, clientOpts{tls: tc, early: true, conn: rc})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := echo(c2, "early", 10*time.Second); err != nil || got != nameA+"|early" {
		t.Fatalf("%q %v", got, err)
	}
	recs := a.records()
	if len(recs) != 2 || !recs[1].used0RTT {
		t.Fatalf("server records %+v: want the second connection's data in 0-RTT", recs)
	}
	if rc.n.Load() < 2 || fw.event(EventHeld) != 1 {
		t.Errorf("held_while_pending = %v, want the one 0-RTT datagram sent ahead", fw.event(EventHeld))
	}
	if !strings.HasPrefix(recs[1].sni, "a.") {
		t.Errorf("sni %q", recs[1].sni)
	}
}

// TestQUICPendingBytes: a waiting flow holds its 0-RTT datagrams up to
// MaxPendingBytes and drops the rest, counted.
func TestQUICPendingBytes(t *testing.T) {
	p := newPKI(t, nameA)
	a := newQUICServer(t, p, nameA, serverOpts{})
	fw := newForwarder(t, QUICOptions{MaxPendingBytes: 4000}, a)
	hello, err := snitest.QUICClientHello(nameA)
	if err != nil {
		t.Fatal(err)
	}
	dcid, dgs, err := snitest.Initials(sni.Version1, hello, 1000)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(fw.addrPort()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write(dgs[0]) // 1200 bytes held
	zeroRTT := append([]byte{0xd0, 0, 0, 0, 1, byte(len(dcid))}, dcid...)
	zeroRTT = append(zeroRTT, 0, 0x40|1000>>8, 1000&0xff)
	zeroRTT = append(zeroRTT, make([]byte, 1000)...)
	for range 5 {
		c.Write(zeroRTT) // 1015 bytes each: two fit under 4000, three do not
	}
	waitFor(t, "the overflow counted", func() bool { return fw.dropped(DropPendingBytes) == 3 })
	if fw.event(EventHeld) != 2 {
		t.Errorf("held = %v, want 2", fw.event(EventHeld))
	}
	if _, pending := fw.Flows(); pending != 1 {
		t.Errorf("pending = %d", pending)
	}
}
