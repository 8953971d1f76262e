// Package transparent holds the kernel-facing half of the capture path: the
// IP_TRANSPARENT sockets that receive mark-and-divert traffic with its header
// intact, created inside a pod's network namespace, and the IP_PKTINFO
// plumbing that lets a reply leave from the address the client dialled.
//
// The facts it relies on are in ARCHITECTURE.md ("The data path"): ipi_addr
// carries the pre-divert destination (the ClusterIP); a reply must carry
// ipi_spec_dst = that address and leave from the bound port, or a connected
// client drops it; without IP_TRANSPARENT that send fails with ENETUNREACH;
// and a socket's netns is fixed at socket(), so it can be created on a thread
// inside the pod netns and read from anywhere.
package transparent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// Options are the socket options a capture socket gets before bind.
type Options struct {
	// Transparent sets IP_TRANSPARENT (IPV6_TRANSPARENT). It is what lets a
	// reply leave from a non-local source address.
	Transparent bool
	// Mark sets SO_MARK on every packet the socket sends. Only a socket in
	// a pod netns should carry CapturePassthroughFwMark (capture there reads
	// it and lets the proxy's own egress pass); in the node netns the
	// node's rules read marks instead (constants.PassthroughMark).
	Mark uint32
	// ReuseAddr sets SO_REUSEADDR, so a listener can be rebound while an old
	// one drains.
	ReuseAddr bool
	// GRO sets UDP_GRO: the kernel queues a segmented (UDP_SEGMENT) send
	// as one buffer of back-to-back segments, with their size in a
	// control message (Meta.SegmentSize), instead of one per datagram.
	GRO bool
	// RecvBuf, when non-zero, sizes the socket's receive buffer in bytes:
	// SO_RCVBUFFORCE, which passes net.core.rmem_max with CAP_NET_ADMIN,
	// else SO_RCVBUF, which the kernel caps at it.
	RecvBuf int
	// From, when set, is a socket already bound to the address (a hot
	// restart's previous process handed it over): ListenUDP and ListenTCP
	// adopt it, with these options set on it, instead of binding anew.
	// It is closed either way; the listener holds its own descriptor.
	From *os.File
}

// InNetns runs fn on an OS thread inside the namespace at path; an empty
// path runs fn in place. Sockets created inside fn belong to that namespace
// for their lifetime.
func InNetns(path string, fn func() error) error {
	if path == "" {
		return fn()
	}
	err := ns.WithNetNSPath(path, func(ns.NetNS) error { return fn() })
	if err != nil {
		return fmt.Errorf("in netns %q: %w", path, err)
	}
	return nil
}

func control(network string, o Options, recv bool) func(string, string, syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			set := func(level, opt, v int, name string) {
				if serr == nil {
					if err := unix.SetsockoptInt(int(fd), level, opt, v); err != nil {
						serr = fmt.Errorf("failed to set %s: %w", name, err)
					}
				}
			}
			v6 := network == "udp6" || network == "tcp6"
			if o.ReuseAddr {
				set(unix.SOL_SOCKET, unix.SO_REUSEADDR, 1, "SO_REUSEADDR")
			}
			if o.RecvBuf != 0 {
				setRecvBuf(fd, o.RecvBuf, &serr)
			}
			if o.GRO {
				set(unix.SOL_UDP, unix.UDP_GRO, 1, "UDP_GRO")
			}
			if o.Mark != 0 {
				set(unix.SOL_SOCKET, unix.SO_MARK, int(o.Mark), "SO_MARK")
			}
			if o.Transparent {
				if v6 {
					set(unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1, "IPV6_TRANSPARENT")
				} else {
					set(unix.SOL_IP, unix.IP_TRANSPARENT, 1, "IP_TRANSPARENT")
				}
			}
			if recv {
				if v6 {
					set(unix.SOL_IPV6, unix.IPV6_RECVPKTINFO, 1, "IPV6_RECVPKTINFO")
					set(unix.SOL_IPV6, unix.IPV6_RECVORIGDSTADDR, 1, "IPV6_RECVORIGDSTADDR")
				} else {
					set(unix.SOL_IP, unix.IP_PKTINFO, 1, "IP_PKTINFO")
					set(unix.SOL_IP, unix.IP_RECVORIGDSTADDR, 1, "IP_RECVORIGDSTADDR")
				}
			}
		})
		if err != nil {
			return err
		}
		return serr
	}
}

// setRecvBuf sets the receive buffer with SO_RCVBUFFORCE and falls back
// to SO_RCVBUF when the process may not force (EPERM).
func setRecvBuf(fd uintptr, v int, serr *error) {
	if *serr != nil {
		return
	}
	err := unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, v)
	if errors.Is(err, unix.EPERM) {
		err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, v)
	}
	if err != nil {
		*serr = fmt.Errorf("failed to set SO_RCVBUF to %d: %w", v, err)
	}
}

// UDPConn is a datagram capture socket.
type UDPConn struct {
	*net.UDPConn
	v6 bool
}

// ListenUDP creates a UDP socket in the namespace at netnsPath (empty: the
// caller's), sets o plus IP_PKTINFO and IP_RECVORIGDSTADDR, and binds addr.
func ListenUDP(netnsPath string, addr netip.AddrPort, o Options) (*UDPConn, error) {
	network := "udp4"
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		network = "udp6"
	}
	if o.From != nil {
		c, err := adoptUDP(network, addr, o)
		if err != nil {
			return nil, fmt.Errorf("failed to adopt udp %s (netns %q): %w", addr, netnsPath, err)
		}
		return &UDPConn{UDPConn: c, v6: network == "udp6"}, nil
	}
	var pc net.PacketConn
	err := InNetns(netnsPath, func() error {
		lc := net.ListenConfig{Control: control(network, o, true)}
		var err error
		pc, err = lc.ListenPacket(context.Background(), network, addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to listen on udp %s (netns %q): %w", addr, netnsPath, err)
	}
	return &UDPConn{UDPConn: pc.(*net.UDPConn), v6: network == "udp6"}, nil
}

// adoptUDP takes o.From as a UDP socket bound to addr, with o set on it.
func adoptUDP(network string, addr netip.AddrPort, o Options) (*net.UDPConn, error) {
	defer o.From.Close()
	pc, err := net.FilePacketConn(o.From)
	if err != nil {
		return nil, err
	}
	c, ok := pc.(*net.UDPConn)
	if !ok {
		pc.Close()
		return nil, fmt.Errorf("handed-over socket is %T, not UDP", pc)
	}
	if err := checkAdopted(c, c.LocalAddr(), network, addr, o, true); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// adoptTCP takes o.From as a TCP listening socket bound to addr.
func adoptTCP(network string, addr netip.AddrPort, o Options) (*net.TCPListener, error) {
	defer o.From.Close()
	fl, err := net.FileListener(o.From)
	if err != nil {
		return nil, err
	}
	l, ok := fl.(*net.TCPListener)
	if !ok {
		fl.Close()
		return nil, fmt.Errorf("handed-over socket is %T, not a TCP listener", fl)
	}
	if err := checkAdopted(l, l.Addr(), network, addr, o, false); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// checkAdopted refuses a socket bound elsewhere than addr and sets o on it.
func checkAdopted(c syscall.Conn, local net.Addr, network string, addr netip.AddrPort, o Options, recv bool) error {
	var got netip.AddrPort
	switch a := local.(type) {
	case *net.UDPAddr:
		got = a.AddrPort()
	case *net.TCPAddr:
		got = a.AddrPort()
	}
	if got.Addr().Unmap() != addr.Addr().Unmap() || got.Port() != addr.Port() {
		return fmt.Errorf("handed-over socket is bound to %s, not %s", local, addr)
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	return control(network, o, recv)(network, addr.String(), rc)
}

// DialUDP creates a UDP socket in the namespace at netnsPath and connects it
// to raddr, optionally bound to laddr. A connected socket drops any reply
// whose source is not raddr: it is the client the REPLY case needs.
func DialUDP(netnsPath string, laddr, raddr netip.AddrPort, o Options) (*net.UDPConn, error) {
	network := "udp4"
	if raddr.Addr().Is6() && !raddr.Addr().Is4In6() {
		network = "udp6"
	}
	var c net.Conn
	err := InNetns(netnsPath, func() error {
		d := net.Dialer{Control: control(network, o, false)}
		if laddr.IsValid() {
			d.LocalAddr = net.UDPAddrFromAddrPort(laddr)
		}
		var err error
		c, err = d.Dial(network, raddr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to dial udp %s (netns %q): %w", raddr, netnsPath, err)
	}
	return c.(*net.UDPConn), nil
}

// ListenTCP creates a TCP listener in the namespace at netnsPath with o set
// before bind. Under mark-and-divert an accepted connection's local address
// is the original destination (the ClusterIP and dialled port).
func ListenTCP(netnsPath string, addr netip.AddrPort, o Options) (*net.TCPListener, error) {
	network := "tcp4"
	if addr.Addr().Is6() && !addr.Addr().Is4In6() {
		network = "tcp6"
	}
	if o.From != nil {
		l, err := adoptTCP(network, addr, o)
		if err != nil {
			return nil, fmt.Errorf("failed to adopt tcp %s (netns %q): %w", addr, netnsPath, err)
		}
		return l, nil
	}
	var l net.Listener
	err := InNetns(netnsPath, func() error {
		lc := net.ListenConfig{Control: control(network, o, false)}
		var err error
		l, err = lc.Listen(context.Background(), network, addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to listen on tcp %s (netns %q): %w", addr, netnsPath, err)
	}
	return l.(*net.TCPListener), nil
}

// DialTCP connects to raddr from the namespace at netnsPath with o set
// before connect (for example the passthrough mark on the proxy's egress).
func DialTCP(ctx context.Context, netnsPath string, raddr netip.AddrPort, o Options) (*net.TCPConn, error) {
	network := "tcp4"
	if raddr.Addr().Is6() && !raddr.Addr().Is4In6() {
		network = "tcp6"
	}
	var c net.Conn
	err := InNetns(netnsPath, func() error {
		d := net.Dialer{Control: control(network, o, false)}
		var err error
		c, err = d.DialContext(ctx, network, raddr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("failed to dial tcp %s (netns %q): %w", raddr, netnsPath, err)
	}
	return c.(*net.TCPConn), nil
}

// Meta is what the kernel said about a received datagram.
type Meta struct {
	// Src is the sender.
	Src netip.AddrPort
	// Dst is ipi_addr (ipi6_addr): the destination in the IP header as
	// delivered. Under mark-and-divert it is the ClusterIP; under REDIRECT
	// it is the rewritten address.
	Dst netip.Addr
	// OrigDst is IP_ORIGDSTADDR: the destination the socket lookup used,
	// with its port. Invalid when the kernel sent none.
	OrigDst netip.AddrPort
	// IfIndex is the arrival interface.
	IfIndex int
	// SegmentSize is UDP_GRO's segment size: the buffer holds datagrams
	// of this size back to back, the last possibly shorter. Zero: one
	// datagram.
	SegmentSize int
}

// ControlLen is the out-of-band buffer size ReadDatagram needs.
var ControlLen = unix.CmsgSpace(unix.SizeofInet6Pktinfo) + unix.CmsgSpace(unix.SizeofSockaddrInet6) + unix.CmsgSpace(4)

// ReadDatagram reads one datagram into b and parses its control messages.
func (c *UDPConn) ReadDatagram(b []byte) (int, Meta, error) {
	oob := make([]byte, ControlLen)
	n, oobn, _, src, err := c.ReadMsgUDPAddrPort(b, oob)
	if err != nil {
		return 0, Meta{}, err
	}
	m, err := ParseControl(oob[:oobn])
	m.Src = src
	return n, m, err
}

// ParseControl decodes IP_PKTINFO/IPV6_PKTINFO and IP_ORIGDSTADDR/
// IPV6_ORIGDSTADDR, and UDP_GRO, from a received control buffer.
func ParseControl(oob []byte) (Meta, error) {
	var m Meta
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return m, fmt.Errorf("failed to parse control messages: %w", err)
	}
	for _, msg := range msgs {
		switch {
		case msg.Header.Level == unix.SOL_IP && msg.Header.Type == unix.IP_PKTINFO && len(msg.Data) >= unix.SizeofInet4Pktinfo:
			pi := (*unix.Inet4Pktinfo)(ptr(msg.Data))
			m.Dst = netip.AddrFrom4(pi.Addr)
			m.IfIndex = int(pi.Ifindex)
		case msg.Header.Level == unix.SOL_IPV6 && msg.Header.Type == unix.IPV6_PKTINFO && len(msg.Data) >= unix.SizeofInet6Pktinfo:
			pi := (*unix.Inet6Pktinfo)(ptr(msg.Data))
			m.Dst = netip.AddrFrom16(pi.Addr)
			m.IfIndex = int(pi.Ifindex)
		case msg.Header.Level == unix.SOL_IP && msg.Header.Type == unix.IP_ORIGDSTADDR && len(msg.Data) >= unix.SizeofSockaddrInet4:
			sa := (*unix.RawSockaddrInet4)(ptr(msg.Data))
			m.OrigDst = netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), binary.BigEndian.Uint16(msg.Data[2:4]))
		case msg.Header.Level == unix.SOL_IPV6 && msg.Header.Type == unix.IPV6_ORIGDSTADDR && len(msg.Data) >= unix.SizeofSockaddrInet6:
			sa := (*unix.RawSockaddrInet6)(ptr(msg.Data))
			m.OrigDst = netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), binary.BigEndian.Uint16(msg.Data[2:4]))
		case msg.Header.Level == unix.SOL_UDP && msg.Header.Type == unix.UDP_GRO && len(msg.Data) >= 4:
			m.SegmentSize = int(*(*int32)(ptr(msg.Data)))
		}
	}
	return m, nil
}

// PktinfoFrom builds the control message that makes a reply leave from src:
// IP_PKTINFO with ipi_spec_dst = src (IPV6_PKTINFO with ipi6_addr = src).
func PktinfoFrom(src netip.Addr) []byte {
	if src.Is4() || src.Is4In6() {
		b := make([]byte, unix.CmsgSpace(unix.SizeofInet4Pktinfo))
		h := (*unix.Cmsghdr)(ptr(b))
		h.Level, h.Type = unix.SOL_IP, unix.IP_PKTINFO
		h.SetLen(unix.CmsgLen(unix.SizeofInet4Pktinfo))
		pi := (*unix.Inet4Pktinfo)(ptr(b[unix.CmsgLen(0):]))
		pi.Spec_dst = src.Unmap().As4()
		return b
	}
	b := make([]byte, unix.CmsgSpace(unix.SizeofInet6Pktinfo))
	h := (*unix.Cmsghdr)(ptr(b))
	h.Level, h.Type = unix.SOL_IPV6, unix.IPV6_PKTINFO
	h.SetLen(unix.CmsgLen(unix.SizeofInet6Pktinfo))
	pi := (*unix.Inet6Pktinfo)(ptr(b[unix.CmsgLen(0):]))
	pi.Addr = src.As16()
	return b
}

// WriteFrom sends b to dst with source address src, from the socket's bound
// port. The socket must be transparent when src is not local (a ClusterIP).
func (c *UDPConn) WriteFrom(b []byte, src netip.Addr, dst netip.AddrPort) error {
	var oob []byte
	if src.IsValid() {
		oob = PktinfoFrom(src)
	}
	_, _, err := c.WriteMsgUDPAddrPort(b, oob, dst)
	if err != nil {
		return fmt.Errorf("failed to send %d bytes from %s to %s: %w", len(b), src, dst, err)
	}
	return nil
}
