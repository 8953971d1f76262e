package mtlspool

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/suites/cluster"
)

func spiffeID(sa string) string { return "spiffe://" + trustDomain + "/ns/" + namespace + "/sa/" + sa }

// issue is an SVID of account sa from the mesh's CA, issued at at (zero:
// now) for ttl: the suite's own clients are the mesh's peers.
func (r *rig) issue(sa string, ttl time.Duration, at time.Time) ([]tls.Certificate, error) {
	s, err := r.ca.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: sa}, TTL: ttl, IssuedAt: at})
	if err != nil {
		return nil, err
	}
	return tlsCerts(s), nil
}

func tlsCerts(s *x509svid.SVID) []tls.Certificate {
	c := tls.Certificate{PrivateKey: s.PrivateKey, Leaf: s.Certificates[0]}
	for _, x := range s.Certificates {
		c.Certificate = append(c.Certificate, x.Raw)
	}
	return []tls.Certificate{c}
}

// foreign is an SVID of sa from a CA of another trust domain.
func foreign(sa string) ([]tls.Certificate, error) {
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: "elsewhere.test", MeshDomain: meshDomain})
	if err != nil {
		return nil, err
	}
	s, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: namespace, ServiceAccount: sa}, TTL: time.Hour})
	if err != nil {
		return nil, err
	}
	return tlsCerts(s), nil
}

// seen is what the probe's own verification of the server found: its
// SPIFFE identity checked first, then its DNS SANs against the SNI, as a
// QUIC client of the mesh does (Q5).
type seen struct {
	identityErr, nameErr error
	serial               string
	notBefore            time.Time
	resumed, used0RTT    bool
	// dials are the connections the client opened for the request:
	// http3.Transport opens a second one when its early connection fails
	// the handshake, and the server counts each.
	dials int
}

// probe is the suite's own HTTP/3 client: quic-go's, in pod from's
// netns, dialling dst's inbound with the SNI of service svc. marked puts
// it on the proxy's own mark, so the pod's capture leaves it alone.
type probe struct {
	c      cluster.Cluster
	from   cluster.Pod
	dst    netip.AddrPort
	svc    string
	certs  []tls.Certificate
	alpn   string
	bundle *x509bundle.Bundle
	marked bool
	// cache keeps session tickets across connections.
	cache tls.ClientSessionCache
}

func (p *probe) sni() string { return xdsnames.SNI(8080, p.svc, namespace, meshDomain) }

// get makes one request for path on a fresh connection and says what the
// probe saw of the server. zeroRTT sends it as 0-RTT when a ticket allows.
func (p *probe) get(ctx context.Context, path string, zeroRTT bool) (seen, error) {
	var s seen
	var mu sync.Mutex
	conn, err := p.c.DialUDP(ctx, p.from, p.dst)
	if err != nil {
		return s, err
	}
	if p.marked {
		if err := setMark(conn, constants.CapturePassthroughFwMark); err != nil {
			conn.Close()
			return s, err
		}
	}
	pc := &packetConn{Conn: conn, peer: net.UDPAddrFromAddrPort(p.dst)}
	defer pc.Close()
	tr := &quic.Transport{Conn: pc}
	defer tr.Close()
	alpn := p.alpn
	if alpn == "" {
		alpn = http3.NextProtoH3
	}
	tc := &tls.Config{
		ServerName: p.sni(), NextProtos: []string{alpn}, Certificates: p.certs, ClientSessionCache: p.cache,
		// Verified below, identity first and then the name; Go's
		// default verifier knows neither SPIFFE nor the order.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			mu.Lock()
			defer mu.Unlock()
			if len(cs.PeerCertificates) > 0 {
				leaf := cs.PeerCertificates[0]
				s.serial, s.notBefore = leaf.SerialNumber.Text(16), leaf.NotBefore
			}
			s.resumed = cs.DidResume
			s.identityErr, s.nameErr = p.check(cs)
			if s.identityErr != nil {
				return s.identityErr
			}
			return s.nameErr
		},
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if alpn != http3.NextProtoH3 {
		s.dials = 1
		qc, err := tr.Dial(ctx, pc.peer, tc, nil)
		if err == nil {
			_ = qc.CloseWithError(0, "")
			return s, fmt.Errorf("a handshake offering ALPN %q completed", alpn)
		}
		return s, err
	}
	var qconn *quic.Conn
	h3 := &http3.Transport{
		TLSClientConfig: tc, QUICConfig: &quic.Config{Allow0RTT: zeroRTT},
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			c, err := tr.DialEarly(ctx, pc.peer, tc, qc)
			mu.Lock()
			qconn = c
			s.dials++
			mu.Unlock()
			return c, err
		},
	}
	defer h3.Close()
	method := http.MethodGet
	if zeroRTT {
		method = http3.MethodGet0RTT
	}
	req, err := http.NewRequestWithContext(ctx, method, "https://"+xdsnames.Authority(p.svc, namespace, meshDomain)+path, nil)
	if err != nil {
		return s, err
	}
	resp, err := h3.RoundTrip(req)
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %s", resp.Status)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if qconn != nil {
		// Known once the handshake is done: whether the server took the
		// 0-RTT data.
		s.used0RTT = qconn.ConnectionState().Used0RTT
	}
	return s, err
}

// check verifies the server as a QUIC client of the mesh does (Q5): its
// SPIFFE identity against the bundle, which must be svc's account, then
// the leaf's DNS SANs against the SNI.
func (p *probe) check(cs tls.ConnectionState) (identityErr, nameErr error) {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the server presented no certificate"), nil
	}
	id, _, err := x509svid.Verify(cs.PeerCertificates, p.bundle)
	if err == nil && id.String() != spiffeID(p.svc) {
		err = fmt.Errorf("the server is %s, want %s", id, spiffeID(p.svc))
	}
	if err != nil {
		return err, nil
	}
	return nil, cs.PeerCertificates[0].VerifyHostname(p.sni())
}

// verifyServer is check as one verdict.
func verifyServer(p *probe, cs tls.ConnectionState) error {
	idErr, nameErr := p.check(cs)
	if idErr != nil {
		return idErr
	}
	return nameErr
}

// setMark sets SO_MARK on conn's socket.
func setMark(conn net.Conn, mark uint32) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("%T has no socket to mark", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := raw.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(mark)) }); err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("SO_MARK %#x: %w", mark, serr)
	}
	return nil
}

// packetConn lets a QUIC transport use a pod's connected UDP socket:
// every datagram goes to, and comes from, its one peer.
type packetConn struct {
	net.Conn
	peer *net.UDPAddr
}

func (c *packetConn) ReadFrom(b []byte) (int, net.Addr, error) {
	n, err := c.Read(b)
	return n, c.peer, err
}

func (c *packetConn) WriteTo(b []byte, _ net.Addr) (int, error) { return c.Write(b) }
