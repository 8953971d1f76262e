package transparent

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/netns"
	"github.com/aether-mesh/aether/rigs/privileged"
	"golang.org/x/sys/unix"
)

func TestPktinfoRoundTrip(t *testing.T) {
	for _, a := range []string{"10.96.0.10", "fd00::a"} {
		src := netip.MustParseAddr(a)
		b := PktinfoFrom(src)
		msgs, err := unix.ParseSocketControlMessage(b)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("%s: %v %d", a, err, len(msgs))
		}
		var got netip.Addr
		if src.Is4() {
			pi := (*unix.Inet4Pktinfo)(ptr(msgs[0].Data))
			got = netip.AddrFrom4(pi.Spec_dst)
		} else {
			pi := (*unix.Inet6Pktinfo)(ptr(msgs[0].Data))
			got = netip.AddrFrom16(pi.Addr)
		}
		if got != src {
			t.Errorf("pktinfo carries %s, want %s", got, src)
		}
	}
	bad := PktinfoFrom(netip.MustParseAddr("10.96.0.10"))
	(*unix.Cmsghdr)(ptr(bad)).SetLen(len(bad) + 64)
	if _, err := ParseControl(bad); err == nil {
		t.Error("a truncated control buffer parsed without error")
	}
}

// In a fresh namespace: a socket made there sees the header's destination in
// ipi_addr and the lookup port in IP_ORIGDSTADDR, and a reply sent with an
// explicit source reaches a connected client.
func TestListenInNetnsSeesDestination(t *testing.T) {
	privileged.Require(t)
	n, err := netns.Create("tsock")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = n.Delete()
		if err := netns.LeakCheck(); err != nil {
			t.Error(err)
		}
	})
	ln, err := ListenUDP(n.Path, netip.MustParseAddrPort("0.0.0.0:18082"), Options{Transparent: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl, err := DialUDP(n.Path, netip.AddrPort{}, netip.MustParseAddrPort("127.0.0.1:18082"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = ln.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64)
	k, m, err := ln.ReadDatagram(buf)
	if err != nil {
		t.Fatal(err)
	}
	if string(buf[:k]) != "ping" || m.Dst != netip.MustParseAddr("127.0.0.1") || m.OrigDst.Port() != 18082 {
		t.Fatalf("got %q %+v", buf[:k], m)
	}
	if err := ln.WriteFrom([]byte("pong"), m.Dst, m.Src); err != nil {
		t.Fatal(err)
	}
	_ = cl.SetReadDeadline(time.Now().Add(2 * time.Second))
	k, err = cl.Read(buf)
	if err != nil || string(buf[:k]) != "pong" {
		t.Fatalf("connected client got %q, %v", buf[:k], err)
	}
}

// RecvBuf and SendBuf reach the socket: the kernel reports twice the size
// set (its bookkeeping share). As root the FORCE options pass rmem_max and
// wmem_max; otherwise the size is capped at them.
func TestBufferSizes(t *testing.T) {
	const want = 3 << 20
	c, err := ListenUDP("", netip.MustParseAddrPort("127.0.0.1:0"), Options{RecvBuf: want, SendBuf: want})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		name   string
		opt    int
		sysctl string
	}{{"SO_RCVBUF", unix.SO_RCVBUF, "/proc/sys/net/core/rmem_max"}, {"SO_SNDBUF", unix.SO_SNDBUF, "/proc/sys/net/core/wmem_max"}} {
		var got int
		var gerr error
		if err := rc.Control(func(fd uintptr) { got, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, o.opt) }); err != nil || gerr != nil {
			t.Fatal(err, gerr)
		}
		limit := want
		if os.Geteuid() != 0 {
			b, err := os.ReadFile(o.sysctl)
			if err != nil {
				t.Fatal(err)
			}
			if limit, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
				t.Fatal(err)
			}
			limit = min(limit, want)
		}
		if got != 2*limit {
			t.Fatalf("%s is %d, want %d (twice %d)", o.name, got, 2*limit, limit)
		}
	}
}

// With GRO set, a client's segmented send arrives as one buffer with the
// segment size in the UDP_GRO control message; without it, as separate
// datagrams (the control: the kernel splits the send for a socket that
// did not ask for it).
func TestGROKeepsASegmentedSendWhole(t *testing.T) {
	for _, gro := range []bool{false, true} {
		c, err := ListenUDP("", netip.MustParseAddrPort("127.0.0.1:0"), Options{GRO: gro})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		client, err := DialUDP("", netip.AddrPort{}, c.LocalAddr().(*net.UDPAddr).AddrPort(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		rc, err := client.SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_UDP, unix.UDP_SEGMENT, 100) }); err != nil || serr != nil {
			t.Fatal(err, serr)
		}
		if _, err := client.Write(make([]byte, 250)); err != nil {
			t.Fatal(err)
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, meta, err := c.ReadDatagram(make([]byte, 1024))
		if err != nil {
			t.Fatal(err)
		}
		want, wantSeg := 100, 0
		if gro {
			want, wantSeg = 250, 100
		}
		if n != want || meta.SegmentSize != wantSeg {
			t.Fatalf("GRO %v: read %d bytes with segment size %d, want %d and %d", gro, n, meta.SegmentSize, want, wantSeg)
		}
	}
}
