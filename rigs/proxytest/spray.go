package proxytest

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/aether-mesh/aether/mesh/cni"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
)

// AddPod adds another client pod: its own netns on a veth (link on the
// node side) with addr, the node side at gw, a default route and the real
// tproxy capture rules. It is removed at test cleanup, before the rig's
// leak check.
func (r *Rig) AddPod(t testing.TB, tag, link string, addr, gw netip.Prefix) *netns.NS {
	t.Helper()
	pod, err := netns.Create(tag)
	if err != nil {
		t.Fatalf("rig: %s netns: %v", tag, err)
	}
	t.Cleanup(func() {
		if err := pod.Delete(); err != nil {
			t.Errorf("rig: failed to delete %s: %v", pod.Name, err)
		}
	})
	steps := []struct {
		what string
		fn   func() error
	}{
		{"veth", func() error { return netns.Veth(r.Node, link, pod, "eth0") }},
		{"node side address", func() error { return netns.AddAddr(r.Node, link, gw) }},
		{"pod address", func() error { return netns.AddAddr(pod, "eth0", addr) }},
		{"default route", func() error {
			return netns.AddRoute(pod, netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: gw.Addr(), Dev: "eth0"})
		}},
		{"capture rules", func() error {
			rs, err := cni.Build(constants.CaptureTProxy, cni.Pod{Addrs: []netip.Prefix{addr}}, cni.Options{})
			if err != nil {
				return err
			}
			return (&cni.Installer{NetnsPath: pod.Path}).Install(rs)
		}},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			t.Fatalf("rig: %s %s: %v", tag, s.what, err)
		}
	}
	return pod
}

// Sprayer sends UDP datagrams with any source port from inside a pod
// through a raw socket (IP_HDRINCL). The packets take the pod's output
// path, capture rules included, exactly as a socket's would, without one
// socket per source port.
type Sprayer struct {
	fd int
}

// NewSprayer opens the raw socket in the namespace at netnsPath.
func NewSprayer(t testing.TB, netnsPath string) *Sprayer {
	t.Helper()
	s := &Sprayer{fd: -1}
	err := transparent.InNetns(netnsPath, func() error {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW)
		s.fd = fd
		return err
	})
	if err != nil {
		t.Fatalf("sprayer: raw socket in %s: %v", netnsPath, err)
	}
	t.Cleanup(func() { _ = unix.Close(s.fd) })
	return s
}

// Send sends payload from src to dst. The kernel fills in the IP
// checksum and total length; the UDP checksum is left 0 (none), which
// IPv4 allows.
func (s *Sprayer) Send(src, dst netip.AddrPort, payload []byte) error {
	pkt := make([]byte, 28+len(payload))
	pkt[0] = 0x45
	pkt[8] = 64
	pkt[9] = unix.IPPROTO_UDP
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	copy(pkt[12:16], s4[:])
	copy(pkt[16:20], d4[:])
	binary.BigEndian.PutUint16(pkt[20:], src.Port())
	binary.BigEndian.PutUint16(pkt[22:], dst.Port())
	binary.BigEndian.PutUint16(pkt[24:], uint16(8+len(payload)))
	copy(pkt[28:], payload)
	sa := &unix.SockaddrInet4{Addr: d4}
	for {
		err := unix.Sendto(s.fd, pkt, 0, sa)
		// A full device queue is back-pressure, not loss: wait and resend.
		if err == unix.ENOBUFS || err == unix.EAGAIN {
			continue
		}
		if err != nil {
			return fmt.Errorf("sprayer: send %s -> %s: %w", src, dst, err)
		}
		return nil
	}
}

// UDPStats reads the Udp line of /proc/net/snmp inside the namespace at
// netnsPath: InDatagrams, RcvbufErrors and the rest, by name. It reads
// thread-self, since /proc/net follows the thread group leader's netns,
// not the calling thread's.
func UDPStats(netnsPath string) (map[string]int64, error) {
	var out map[string]int64
	err := transparent.InNetns(netnsPath, func() error {
		f, err := os.Open("/proc/thread-self/net/snmp")
		if err != nil {
			return err
		}
		defer f.Close()
		var names []string
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != "Udp:" {
				continue
			}
			if names == nil {
				names = fields[1:]
				continue
			}
			out = map[string]int64{}
			for i, v := range fields[1:] {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return fmt.Errorf("Udp %s: %w", names[i], err)
				}
				out[names[i]] = n
			}
			return nil
		}
		if err := sc.Err(); err != nil {
			return err
		}
		return fmt.Errorf("no Udp counters")
	})
	if err != nil {
		return nil, fmt.Errorf("failed to read /proc/net/snmp in netns %q: %w", netnsPath, err)
	}
	return out, nil
}
