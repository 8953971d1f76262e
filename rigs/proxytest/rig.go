package proxytest

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"

	"github.com/aether-mesh/aether/mesh/cni"
	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/rigs/netns"
)

// Addresses of the rig. Pods are in 10.244.0.0/16 and ClusterIPs in
// 10.96.0.0/16, both only inside the rig's namespaces.
var (
	PodAddr      = netip.MustParsePrefix("10.244.1.2/24")
	NodePodSide  = netip.MustParsePrefix("10.244.1.1/24")
	NodeBackSide = netip.MustParsePrefix("10.244.2.1/24")
)

// BackendAddr is the i-th backend pod's address (i from 0).
func BackendAddr(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 244, 2, byte(2 + i)}) }

// VIP is the i-th ClusterIP.
func VIP(i int) netip.Addr { return netip.AddrFrom4([4]byte{10, 96, byte(i / 250), byte(10 + i%250)}) }

// Rig is a node netns (where the proxy's upstream sockets live), a client
// pod netns joined to it by a veth with the real tproxy capture rules from
// mesh/cni, and a backend netns holding every backend pod address.
type Rig struct {
	Node, Pod, Back *netns.NS
}

// NewRig builds the topology; everything is removed at test cleanup and a
// leak check runs after.
func NewRig(t testing.TB, backends int) *Rig {
	t.Helper()
	r := &Rig{}
	var err error
	fail := func(what string, err error) {
		t.Helper()
		t.Fatalf("rig: %s: %v", what, err)
	}
	t.Cleanup(func() {
		for _, n := range []*netns.NS{r.Pod, r.Back, r.Node} {
			if n != nil {
				if err := n.Delete(); err != nil {
					t.Errorf("rig: failed to delete %s: %v", n.Name, err)
				}
			}
		}
		if err := netns.LeakCheck(); err != nil {
			t.Error(err)
		}
	})
	if r.Node, err = netns.Create("pxnode"); err != nil {
		fail("node netns", err)
	}
	if r.Pod, err = netns.Create("pxpod"); err != nil {
		fail("pod netns", err)
	}
	if r.Back, err = netns.Create("pxback"); err != nil {
		fail("backend netns", err)
	}
	steps := []struct {
		what string
		fn   func() error
	}{
		{"pod veth", func() error { return netns.Veth(r.Node, "vpod", r.Pod, "eth0") }},
		{"backend veth", func() error { return netns.Veth(r.Node, "vback", r.Back, "eth0") }},
		{"node pod-side address", func() error { return netns.AddAddr(r.Node, "vpod", NodePodSide) }},
		{"node backend-side address", func() error { return netns.AddAddr(r.Node, "vback", NodeBackSide) }},
		{"pod address", func() error { return netns.AddAddr(r.Pod, "eth0", PodAddr) }},
		{"backend addresses", func() error {
			for i := range backends {
				if err := netns.AddAddr(r.Back, "eth0", netip.PrefixFrom(BackendAddr(i), 24)); err != nil {
					return err
				}
			}
			return nil
		}},
		// The capture needs the normal route lookup to succeed first.
		{"pod default route", func() error {
			return netns.AddRoute(r.Pod, netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: NodePodSide.Addr(), Dev: "eth0"})
		}},
		{"backend default route", func() error {
			return netns.AddRoute(r.Back, netns.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Gw: NodeBackSide.Addr(), Dev: "eth0"})
		}},
		// Forwarding is for the direct (proxy-less) path the benchmark
		// compares against.
		{"node forwarding", func() error { return netns.Sysctl(r.Node, "net/ipv4/ip_forward", "1") }},
	}
	for _, s := range steps {
		if err := s.fn(); err != nil {
			fail(s.what, err)
		}
	}
	rs, err := cni.Build(constants.CaptureTProxy, cni.Pod{Addrs: []netip.Prefix{PodAddr}}, cni.Options{})
	if err != nil {
		fail("capture rules", err)
	}
	if err := (&cni.Installer{NetnsPath: r.Pod.Path}).Install(rs); err != nil {
		fail("capture rules install", err)
	}
	return r
}

// Backend is a UDP server in the backend netns that records what it got
// (the independent witness) and answers each datagram.
type Backend struct {
	Name string
	Addr netip.AddrPort
	conn *net.UDPConn
	// Echo answers with the payload itself instead of Name.
	Echo bool

	mu      sync.Mutex
	got     int
	sources map[netip.AddrPort]int
	wg      sync.WaitGroup
}

// StartBackend serves on addr in the backend netns until test cleanup.
func (r *Rig) StartBackend(t testing.TB, name string, addr netip.AddrPort, echo bool) *Backend {
	t.Helper()
	c, err := transparent.ListenUDP(r.Back.Path, addr, transparent.Options{})
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	b := &Backend{Name: name, Addr: addr, conn: c.UDPConn, Echo: echo, sources: map[netip.AddrPort]int{}}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() { _ = b.conn.Close(); b.wg.Wait() })
	return b
}

func (b *Backend) serve() {
	defer b.wg.Done()
	buf := make([]byte, 65535)
	for {
		n, src, err := b.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		b.mu.Lock()
		b.got++
		b.sources[src]++
		b.mu.Unlock()
		reply := buf[:n]
		if !b.Echo {
			reply = []byte(b.Name)
		}
		_, _ = b.conn.WriteToUDPAddrPort(reply, src)
	}
}

// Got is how many datagrams the backend received.
func (b *Backend) Got() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.got
}

// Sources maps each sender to its datagram count.
func (b *Backend) Sources() map[netip.AddrPort]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[netip.AddrPort]int{}
	for k, v := range b.sources {
		out[k] = v
	}
	return out
}

// Dial makes a connected UDP client socket in the pod netns.
func (r *Rig) Dial(t testing.TB, dst netip.AddrPort) *net.UDPConn {
	t.Helper()
	c, err := transparent.DialUDP(r.Pod.Path, netip.AddrPort{}, dst, transparent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
