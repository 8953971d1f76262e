package run

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
)

// The probe kinds of probes.jsonl: the liveness prober's call through the
// mesh (on whichever transport the agents run), and, while a network
// fault step runs, one over HTTP/2 and one over QUIC, each straight to
// the probe target's inbound across the faulted link.
const (
	ProbeMesh = "mesh"
	ProbeH2   = "h2"
	ProbeQUIC = "quic"
)

// DirectKinds are the probe kinds whose recovery each network fault is
// graded on.
var DirectKinds = []string{ProbeH2, ProbeQUIC}

// directProber makes the direct probes: a fresh connection each, from the
// prober's pod with the passthrough mark (the pod's capture lets it by,
// as it lets the proxy's own egress), presenting an SVID of the prober's
// account from the mesh's CA, and verifying the inbound as the mesh does:
// its SPIFFE identity must be the target's account.
type directProber struct {
	from     *node.Pod
	dst      netip.AddrPort
	sni      string
	url      string
	certs    []tls.Certificate
	bundle   *x509bundle.Bundle
	serverID spiffeid.ID
}

// newDirectProber issues the prober's SVID for role r from the CA the
// agents share (it exists once they run), valid for ttl.
func newDirectProber(c *node.Cluster, cfg Config, r DirectRole, caDir string, ttl time.Duration) (*directProber, error) {
	ns := cfg.Roles.Namespace
	from, to := c.Pod(ns, r.FromPod), c.Pod(ns, r.Pod)
	if from == nil || to == nil {
		return nil, fmt.Errorf("direct probes: prober %q or target %q is not a pod of %s", r.FromPod, r.Pod, cfg.Scenario)
	}
	ca, err := identity.LoadOrCreateCA(caDir, identity.CAConfig{TrustDomain: cfg.Mesh.TrustDomain, MeshDomain: cfg.Mesh.MeshDomain})
	if err != nil {
		return nil, fmt.Errorf("direct probes: the mesh's CA in %s: %w", filepath.Clean(caDir), err)
	}
	svid, err := ca.Issue(identity.Request{Account: identity.Account{Namespace: ns, ServiceAccount: r.From}, TTL: ttl})
	if err != nil {
		return nil, fmt.Errorf("direct probes: issuing the prober's SVID: %w", err)
	}
	cert := tls.Certificate{PrivateKey: svid.PrivateKey, Leaf: svid.Certificates[0]}
	for _, x := range svid.Certificates {
		cert.Certificate = append(cert.Certificate, x.Raw)
	}
	serverID, err := identity.ID(ca.TrustDomain(), identity.Account{Namespace: ns, ServiceAccount: r.Account})
	if err != nil {
		return nil, err
	}
	return &directProber{
		from: from, dst: netip.AddrPortFrom(to.IP, constants.InboundPort),
		sni:   xdsnames.SNI(r.Port, r.Service, ns, cfg.Mesh.MeshDomain),
		url:   "https://" + xdsnames.Authority(r.Service, ns, cfg.Mesh.MeshDomain) + "/probe/direct",
		certs: []tls.Certificate{cert}, bundle: ca.Bundle(), serverID: serverID,
	}, nil
}

func (d *directProber) tlsConfig(alpn string) *tls.Config {
	return &tls.Config{
		ServerName: d.sni, NextProtos: []string{alpn}, Certificates: d.certs, MinVersion: tls.VersionTLS13,
		// Verified as a mesh client does: by SPIFFE identity, which Go's
		// default verifier does not know.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			id, _, err := x509svid.Verify(cs.PeerCertificates, d.bundle)
			if err != nil {
				return err
			}
			if id != d.serverID {
				return fmt.Errorf("the inbound is %s, want %s", id, d.serverID)
			}
			return nil
		},
	}
}

func markControl(_, _ string, rc syscall.RawConn) error {
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK, int(constants.CapturePassthroughFwMark))
	}); err != nil {
		return err
	}
	return serr
}

// once makes one probe of kind k.
func (d *directProber) once(ctx context.Context, k string) Probe {
	start := time.Now()
	pb := Probe{Time: start, Kind: k}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var code int
	var err error
	switch k {
	case ProbeH2:
		code, err = d.h2(ctx)
	case ProbeQUIC:
		code, err = d.quic(ctx)
	default:
		err = fmt.Errorf("unknown probe kind %q", k)
	}
	pb.Code, pb.OK = code, err == nil && code == http.StatusOK
	if err != nil {
		pb.Error = err.Error()
	}
	pb.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	return pb
}

func (d *directProber) h2(ctx context.Context) (int, error) {
	tr := &http2.Transport{DialTLSContext: func(ctx context.Context, _, _ string, _ *tls.Config) (net.Conn, error) {
		c, err := transparent.DialTCP(ctx, d.from.NS.Path, d.dst, transparent.Options{Mark: constants.CapturePassthroughFwMark})
		if err != nil {
			return nil, err
		}
		tc := tls.Client(c, d.tlsConfig("h2"))
		if err := tc.HandshakeContext(ctx); err != nil {
			c.Close()
			return nil, err
		}
		return tc, nil
	}}
	defer tr.CloseIdleConnections()
	return get(ctx, tr, d.url)
}

func (d *directProber) quic(ctx context.Context) (int, error) {
	var pc net.PacketConn
	err := transparent.InNetns(d.from.NS.Path, func() error {
		var err error
		pc, err = (&net.ListenConfig{Control: markControl}).ListenPacket(ctx, "udp4", "0.0.0.0:0")
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("quic probe socket in %s: %w", d.from.Name, err)
	}
	defer pc.Close()
	qt := &quic.Transport{Conn: pc}
	defer qt.Close()
	peer := net.UDPAddrFromAddrPort(d.dst)
	tr := &http3.Transport{TLSClientConfig: d.tlsConfig(http3.NextProtoH3),
		Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return qt.DialEarly(ctx, peer, tc, qc)
		}}
	defer tr.Close()
	return get(ctx, tr, d.url)
}

func get(ctx context.Context, rt http.RoundTripper, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return resp.StatusCode, err
	}
	return resp.StatusCode, nil
}

// runDirect probes every kind every interval until ctx ends, recording
// each result in pr, and waits for the probes in flight.
func (pr *Prober) runDirect(ctx context.Context, d *directProber, kinds []string, interval time.Duration) {
	var wg sync.WaitGroup
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
			for _, k := range kinds {
				wg.Add(1)
				go func() {
					defer wg.Done()
					// A probe started before the step ended runs to its own
					// end: its result is the fault's to grade.
					pr.add(d.once(context.WithoutCancel(ctx), k))
				}()
			}
		}
	}
}
