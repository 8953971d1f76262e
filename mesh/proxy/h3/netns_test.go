package h3

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// sources records where each datagram a socket reads came from, as the
// kernel reports it: the client's witness of the reply's source address.
type sources struct {
	net.PacketConn
	mu   sync.Mutex
	seen map[string]int
}

func (s *sources) ReadFrom(b []byte) (int, net.Addr, error) {
	n, addr, err := s.PacketConn.ReadFrom(b)
	if err == nil {
		s.mu.Lock()
		s.seen[addr.String()]++
		s.mu.Unlock()
	}
	return n, addr, err
}

func (s *sources) from() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.seen))
	for k, v := range s.seen {
		out[k] = v
	}
	return out
}

// plainConn hides the *net.UDPConn behind a bare net.PacketConn, so
// quic-go can read no control messages: the control that shows what its
// own IP_PKTINFO handling is for.
type plainConn struct{ net.PacketConn }

// TestInboundAnswersFromTheDialledAddress runs the HTTP/3 inbound on the
// socket the proxy makes in a pod netns (transparent, bound to
// 0.0.0.0:18008) and calls it from a backend pod at the pod's second
// address. quic-go reads IP_PKTINFO itself on such a socket, so every
// reply leaves from the address dialled. The control runs the same server
// on a socket quic-go cannot read control messages from: its replies
// leave from the address the route picks, the pod's first.
func TestInboundAnswersFromTheDialledAddress(t *testing.T) {
	privileged.Require(t)
	p := newPKI(t)
	rig := proxytest.NewRig(t, 1)
	dialled := netip.MustParsePrefix("10.244.1.3/24")
	if err := netns.AddAddr(rig.Pod, "eth0", dialled); err != nil {
		t.Fatal(err)
	}
	target := netip.AddrPortFrom(dialled.Addr(), constants.InboundPort)
	for _, c := range []struct {
		name       string
		hide       bool
		wantSource netip.Addr
	}{
		{"control: no control messages", true, proxytest.PodAddr.Addr()},
		{"subject: quic-go on the transparent socket", false, dialled.Addr()},
	} {
		t.Run(c.name, func(t *testing.T) {
			sock, err := transparent.ListenUDP(rig.Pod.Path, netip.AddrPortFrom(netip.IPv4Unspecified(), constants.InboundPort), transparent.Options{Transparent: true})
			if err != nil {
				t.Fatal(err)
			}
			defer sock.Close()
			var conn net.PacketConn = sock.UDPConn
			if c.hide {
				conn = plainConn{sock.UDPConn}
			}
			peers := make(chan string, 4)
			in, err := ServeInbound(conn, InboundOptions{
				TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
					return &tls.Config{Certificates: []tls.Certificate{tlsCert(p.server)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.roots}, nil
				},
				Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					peers <- r.TLS.PeerCertificates[0].URIs[0].String() + " from " + r.RemoteAddr
					_, _ = io.WriteString(w, "ok")
				}),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close()

			var pc net.PacketConn
			if err := transparent.InNetns(rig.Back.Path, func() error {
				var err error
				pc, err = net.ListenPacket("udp4", "0.0.0.0:0")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			rec := &sources{PacketConn: pc, seen: map[string]int{}}
			tr := &quic.Transport{Conn: rec}
			defer tr.Close()
			client := &http3.Transport{
				TLSClientConfig: &tls.Config{RootCAs: p.roots, ServerName: "backend.demo.mesh.local", Certificates: []tls.Certificate{tlsCert(p.client)}},
				Dial: func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
					return tr.DialEarly(ctx, net.UDPAddrFromAddrPort(target), tc, qc)
				},
			}
			defer client.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+target.String()+"/", nil)
			resp, rtErr := client.RoundTrip(req)
			if rtErr == nil {
				_, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			want := netip.AddrPortFrom(c.wantSource, constants.InboundPort).String()
			got := rec.from()
			if got[want] == 0 {
				t.Fatalf("replies came from %v (request err %v), want some from %s", got, rtErr, want)
			}
			if c.hide {
				return
			}
			if len(got) != 1 || rtErr != nil {
				t.Fatalf("replies came from %v (request err %v), want all from %s", got, rtErr, want)
			}
			if seen := <-peers; seen != clientID+" from "+proxytest.BackendAddr(0).String()+":"+portOf(pc) {
				t.Fatalf("server saw %q", seen)
			}
		})
	}
}

func portOf(pc net.PacketConn) string {
	_, port, _ := net.SplitHostPort(pc.LocalAddr().String())
	return port
}
