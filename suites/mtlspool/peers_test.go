package mtlspool

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/suites/cluster"
)

// validPeer is the bad-peer probe with every defect removed.
func validPeer(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "node-b's QUIC inbound (handshakes by peer) and api-0's app record"}
	c, err := r.cluster(ctx, shipped)
	if err != nil {
		return obs, err
	}
	p, err := r.newProbe(c, "batch-0", "api", true)
	if err != nil {
		return obs, err
	}
	if p.certs, err = r.issue("peer-probe", time.Hour, time.Time{}); err != nil {
		return obs, err
	}
	before, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	_, perr := p.get(ctx, "/valid-peer/0", false)
	after, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return obs, err
	}
	xfcc, err := appXFCC(ctx, c, "api-0", "api", "valid-peer")
	if err != nil {
		return obs, err
	}
	d := after.since(before)
	obs.Evidence = peerServed{Err: errString(perr), Accepted: d.Accepted, Refused: d.Refused, AppXFCC: xfcc}
	obs.Summary = fmt.Sprintf("request %s; api-0's inbound accepted %s, refused %s; the app saw %s", orOK(perr), toJSON(d.Accepted), toJSON(d.Refused), toJSON(xfcc))
	return obs, c.Check(ctx)
}

// peerServed is the valid-peer case's evidence: its request's error,
// what api-0's inbound accepted by peer and refused by reason meanwhile,
// and the requests api-0's app saw by peer URI.
type peerServed struct {
	Err      string         `json:"err"`
	Accepted counters       `json:"accepted"`
	Refused  counters       `json:"refused"`
	AppXFCC  map[string]int `json:"app_xfcc"`
}

func checkValidPeer(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[peerServed](o)
	if err != nil {
		return err
	}
	perr, acc, ref, xfcc := ev.Err, ev.Accepted, ev.Refused, ev.AppXFCC
	if perr != "" || acc[spiffeID("peer-probe")] != 1 || len(ref) != 0 || xfcc[spiffeID("peer-probe")] != 1 {
		return fmt.Errorf("the valid peer was not served once and counted once: %q, accepted %s, refused %s, app %s", perr, toJSON(acc), toJSON(ref), toJSON(xfcc))
	}
	return nil
}

// badPeer is one client the inbound must refuse, and the reason it must
// count it under.
type badPeer struct {
	reason string
	setup  func(*probe) error
}

// flood sizes: datagrams of each kind sent while the valid clients run.
const (
	floodJunk       = 20000
	floodShortInits = 4000
	floodFullInits  = 1000
	validConns      = 100
	validPerConn    = 10
)

// badPeers has each bad client call api-0's inbound, then floods it
// while valid clients call it.
func badPeers(ctx context.Context, r *rig) (redgreen.Observation, error) {
	obs := redgreen.Observation{Witness: "node-b's QUIC inbound counters (refusals by reason, drops by quic-go's trigger, connections begun), api-0's app record, the valid clients' answers"}
	c, err := r.cluster(ctx, shipped)
	if err != nil {
		return obs, err
	}
	peers := []badPeer{
		{"no_client_certificate", func(*probe) error { return nil }},
		{"foreign_trust_domain", func(p *probe) (err error) { p.certs, err = foreign("bad-probe"); return }},
		{"expired", func(p *probe) (err error) {
			p.certs, err = r.issue("bad-probe", time.Hour, time.Now().Add(-2*time.Hour))
			return
		}},
		{"bad_alpn", func(p *probe) (err error) {
			p.alpn = "h2"
			p.certs, err = r.issue("bad-probe", time.Hour, time.Time{})
			return
		}},
	}
	refusals := map[string]counters{}
	dials := map[string]int{}
	for _, bp := range peers {
		p, err := r.newProbe(c, "batch-0", "api", true)
		if err != nil {
			return obs, err
		}
		if err := bp.setup(p); err != nil {
			return obs, err
		}
		before, err := settled(ctx, c, "node-b", "api-0")
		if err != nil {
			return obs, err
		}
		s, err := p.get(ctx, "/bad-peer/"+bp.reason, false)
		if err == nil {
			return obs, fmt.Errorf("the %s client was served", bp.reason)
		}
		dials[bp.reason] = s.dials
		after, err := settled(ctx, c, "node-b", "api-0")
		if err != nil {
			return obs, err
		}
		refusals[bp.reason] = after.since(before).Refused
	}
	fl, err := underFlood(ctx, r, c)
	if err != nil {
		return obs, err
	}
	badSeen, err := appXFCC(ctx, c, "api-0", "api", "bad-peer")
	if err != nil {
		return obs, err
	}
	obs.Evidence = badPeerCounts{Refusals: refusals, Handshakes: dials, Flood: fl, AppBadPeer: badSeen}
	obs.Summary = fmt.Sprintf("refusals per client %s after its handshakes %s; the app saw %s of them; flood: %s", toJSON(refusals), toJSON(dials), toJSON(badSeen), fl)
	return obs, c.Check(ctx)
}

// badPeerCounts is the bad-peers case's evidence: what api-0's inbound
// refused by reason for each bad client, named by the reason it must be
// counted under, the handshakes each client made, the flood's
// figures, and the bad clients' requests api-0's app saw by peer URI.
type badPeerCounts struct {
	Refusals   map[string]counters `json:"refusals"`
	Handshakes map[string]int      `json:"handshakes"`
	Flood      floodResult         `json:"flood"`
	AppBadPeer map[string]int      `json:"app_bad_peer"`
}

// floodResult is what the inbound counted during the flood, and how the
// valid clients fared. The row records it under its field names.
type floodResult struct {
	Junk, ShortInitials, FullInitials int
	Dropped                           counters
	// Unhandshaken are the connections begun that ended neither
	// accepted nor refused: the forged full-size Initials'.
	Unhandshaken   float64
	ValidOK, Valid int
	FirstErr       string
}

func (f floodResult) String() string {
	return fmt.Sprintf("sent %d junk datagrams, %d short and %d full-size forged Initials; quic-go dropped %s; %v connections begun never handshook; valid clients %d/%d (%.2f %%)%s",
		f.Junk, f.ShortInitials, f.FullInitials, toJSON(f.Dropped), f.Unhandshaken, f.ValidOK, f.Valid, 100*f.rate(), errSuffix(f.FirstErr))
}

func (f floodResult) rate() float64 {
	if f.Valid == 0 {
		return 0
	}
	return float64(f.ValidOK) / float64(f.Valid)
}

func errSuffix(s string) string {
	if s == "" {
		return ""
	}
	return "; first failure: " + s
}

// underFlood floods api-0's inbound from web-0 while valid clients in
// batch-0 make validConns connections of validPerConn requests each.
func underFlood(ctx context.Context, r *rig, c cluster.Cluster) (floodResult, error) {
	var fl floodResult
	web, err := pod(c, "web-0")
	if err != nil {
		return fl, err
	}
	dst, err := inboundAddr(c, "api-0")
	if err != nil {
		return fl, err
	}
	junk, err := c.DialUDP(ctx, web, dst)
	if err != nil {
		return fl, err
	}
	defer junk.Close()
	if err := setMark(junk, constants.CapturePassthroughFwMark); err != nil {
		return fl, err
	}
	certs, err := r.issue("flood-valid", time.Hour, time.Time{})
	if err != nil {
		return fl, err
	}
	before, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return fl, err
	}
	stop := make(chan struct{})
	floodDone := make(chan struct{})
	go func() {
		defer close(floodDone)
		fl.Junk, fl.ShortInitials, fl.FullInitials = sendFlood(junk, stop)
	}()
	fl.ValidOK, fl.Valid, fl.FirstErr = validClients(ctx, r, c, certs)
	close(stop)
	<-floodDone
	after, err := settled(ctx, c, "node-b", "api-0")
	if err != nil {
		return fl, err
	}
	d := after.since(before)
	fl.Dropped = d.Dropped
	var acc, ref float64
	for _, n := range d.Accepted {
		acc += n
	}
	for _, n := range d.Refused {
		ref += n
	}
	fl.Unhandshaken = d.Started - acc - ref
	return fl, nil
}

// sendFlood sends, interleaved until stop or the caps: datagrams that are
// not QUIC (first bits 00), forged Initials below the 1200-byte minimum,
// and forged full-size Initials (random connection IDs, undecryptable
// payload), each on a fresh source connection ID.
func sendFlood(conn net.Conn, stop <-chan struct{}) (junk, short, full int) {
	buf := make([]byte, 1200)
	for junk < floodJunk || short < floodShortInits || full < floodFullInits {
		select {
		case <-stop:
			return
		default:
		}
		if junk < floodJunk {
			_, _ = rand.Read(buf[:200])
			buf[0] &= 0x3f
			if _, err := conn.Write(buf[:200]); err == nil {
				junk++
			}
		}
		if short < floodShortInits && junk%5 == 0 {
			if _, err := conn.Write(forgedInitial(buf[:300])); err == nil {
				short++
			}
		}
		if full < floodFullInits && junk%20 == 0 {
			if _, err := conn.Write(forgedInitial(buf)); err == nil {
				full++
			}
		}
		if junk%50 == 0 {
			// A pace, not a wait: a flood from one pod, not a stall of the shared machine.
			time.Sleep(time.Millisecond)
		}
	}
	return
}

// forgedInitial fills b with a QUIC v1 Initial header (random 8-byte
// connection IDs, no token) and a payload no key opens.
func forgedInitial(b []byte) []byte {
	_, _ = rand.Read(b)
	b[0] = 0xc0 | b[0]&0x03
	copy(b[1:5], []byte{0, 0, 0, 1})
	b[5] = 8
	b[14] = 8
	b[23] = 0 // token length
	n := len(b) - 26
	b[24], b[25] = 0x40|byte(n>>8), byte(n)
	return b
}

// validClients makes validConns connections from batch-0 to api-0's
// inbound, several at a time, each carrying validPerConn requests, and
// counts the requests answered 200.
func validClients(ctx context.Context, r *rig, c cluster.Cluster, certs []tls.Certificate) (ok, total int, first string) {
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	conns := make(chan int, validConns)
	for i := range validConns {
		conns <- i
	}
	close(conns)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range conns {
				n, err := validConn(ctx, r, c, certs, i)
				mu.Lock()
				ok += n
				total += validPerConn
				if err != nil && first == "" {
					first = err.Error()
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return ok, total, first
}

// validConn is one valid client connection's requests.
func validConn(ctx context.Context, r *rig, c cluster.Cluster, certs []tls.Certificate, i int) (int, error) {
	p, err := r.newProbe(c, "batch-0", "api", true)
	if err != nil {
		return 0, err
	}
	p.certs = certs
	conn, err := c.DialUDP(ctx, p.from, p.dst)
	if err != nil {
		return 0, err
	}
	if err := setMark(conn, constants.CapturePassthroughFwMark); err != nil {
		conn.Close()
		return 0, err
	}
	pc := &packetConn{Conn: conn, peer: net.UDPAddrFromAddrPort(p.dst)}
	defer pc.Close()
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	tc := &tls.Config{ServerName: p.sni(), NextProtos: []string{http3.NextProtoH3}, Certificates: certs, InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error { return verifyServer(p, cs) }}
	h3 := &http3.Transport{TLSClientConfig: tc, Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
		return tr.DialEarly(ctx, pc.peer, tc, qc)
	}}
	defer h3.Close()
	ok := 0
	var first error
	for j := range validPerConn {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, fmt.Sprintf("https://api.demo.mesh.test/flood-valid/%d/%d", i, j), nil)
		resp, err := h3.RoundTrip(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %s", resp.Status)
			}
		}
		cancel()
		if err == nil {
			ok++
		} else if first == nil {
			first = fmt.Errorf("connection %d request %d: %w", i, j, err)
		}
	}
	return ok, first
}

func checkBadPeers(o redgreen.Observation) error {
	ev, err := redgreen.EvidenceOf[badPeerCounts](o)
	if err != nil {
		return err
	}
	refusals, fl, seen, dials := ev.Refusals, ev.Flood, ev.AppBadPeer, ev.Handshakes
	if len(refusals) == 0 {
		return errNothing
	}
	for reason, d := range refusals {
		if n := dials[reason]; n < 1 || d[reason] != float64(n) || len(d) != 1 {
			return fmt.Errorf("the %s client's %d handshakes were counted as %s, want each as %s", reason, n, toJSON(d), reason)
		}
	}
	if len(seen) != 0 {
		return fmt.Errorf("api-0's app saw bad peers' requests: %s", toJSON(seen))
	}
	if fl.Dropped["not_quic"] < 1 || fl.Dropped["unexpected_packet"] < 1 || fl.Unhandshaken < 1 {
		return fmt.Errorf("the flood was not counted: %s", fl)
	}
	if fl.Valid == 0 || fl.rate() < 0.999 {
		return fmt.Errorf("valid clients' success during the flood %.2f %% (%d/%d), want ≥ 99.9 %%%s", 100*fl.rate(), fl.ValidOK, fl.Valid, errSuffix(fl.FirstErr))
	}
	return nil
}
