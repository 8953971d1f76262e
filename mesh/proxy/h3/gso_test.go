package h3

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/aether-mesh/aether/mesh/proxy/hotrestart"
	"github.com/aether-mesh/aether/mesh/transparent"
)

// gsoOf serves HTTP/3 on server, dials it from a QUIC transport on
// client, and returns whether each end's connection sends with GSO, as
// quic-go reports it (ConnectionState.GSO).
func gsoOf(t *testing.T, server, client net.PacketConn, ids quic.ConnectionIDGenerator) (serverGSO, clientGSO bool) {
	t.Helper()
	ca := newCA(t, "aether.test")
	svid := tlsCert(issue(t, ca, "svc-b", false))
	gso := make(chan bool, 1)
	in, err := ServeInbound(server, InboundOptions{
		TLS: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{svid}}, nil
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			gso <- c.ConnectionState().GSO
			return ctx
		},
		ConnectionIDs: ids,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close() })
	tr := &quic.Transport{Conn: client}
	t.Cleanup(func() { _ = tr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, server.LocalAddr(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h3"}, ServerName: sni}, nil)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer c.CloseWithError(0, "")
	select {
	case serverGSO = <-gso:
	case <-ctx.Done():
		t.Fatal("the server never saw the connection")
	}
	return serverGSO, c.ConnectionState().GSO
}

// TestSocketsKeepGSO: the sockets the proxy gives quic-go (the inbound's,
// read through its hot restart gate, and the twins' upstream one, from
// transparent.ListenUDP) let it send with GSO, which it does only on a
// connection that offers the socket's own (a *net.UDPConn, or a type
// embedding one) whose kernel takes UDP_SEGMENT. Without GSO every QUIC
// packet of a large response is its own sendmsg. The control: the same
// sockets behind a bare net.PacketConn, where quic-go turns GSO off.
func TestSocketsKeepGSO(t *testing.T) {
	listen := func(o transparent.Options) *transparent.UDPConn {
		c, err := transparent.ListenUDP("", netip.MustParseAddrPort("127.0.0.1:0"), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	srv, cli := gsoOf(t, plainConn{listen(transparent.Options{ReuseAddr: true})}, plainConn{listen(transparent.Options{})}, nil)
	if srv || cli {
		t.Fatalf("control: GSO server %v client %v behind a bare net.PacketConn, want off: the check cannot tell", srv, cli)
	}
	srv, cli = gsoOf(t, listen(transparent.Options{ReuseAddr: true}).UDPConn, listen(transparent.Options{}).UDPConn, nil)
	if !srv || !cli {
		t.Fatalf("GSO server %v client %v on the proxy's sockets, want on for both", srv, cli)
	}
	in := listen(transparent.Options{ReuseAddr: true})
	ids := hotrestart.NewConnectionIDs(1)
	gate := hotrestart.NewGate(in.UDPConn, hotrestart.Key{Network: "udp", Addr: in.LocalAddr().(*net.UDPAddr).AddrPort()}, ids)
	if srv, _ = gsoOf(t, gate, listen(transparent.Options{}).UDPConn, ids); !srv {
		t.Fatal("GSO off on the inbound's socket read through its hot restart gate, want on")
	}
}
