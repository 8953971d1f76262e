package udp

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/mesh/proxy/metrics"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// loopback is the VIP: the listener and its clients stay on the root
// namespace's loopback, so these tests need no privilege.
var loopback = netip.MustParseAddr("127.0.0.1")

type clusters struct {
	m atomic.Pointer[map[string]*cluster.Cluster]
}

func (c *clusters) Active(name string) *cluster.Cluster { return (*c.m.Load())[name] }

func (c *clusters) set(cs ...*cluster.Cluster) {
	m := map[string]*cluster.Cluster{}
	for _, x := range cs {
		m[x.Spec.Name] = x
	}
	c.m.Store(&m)
}

func static(name string, hosts ...netip.AddrPort) *cluster.Cluster {
	a := &cluster.Assignment{Name: name}
	for _, h := range hosts {
		a.Endpoints = append(a.Endpoints, cluster.Endpoint{Addr: h, Weight: 1})
	}
	return cluster.New(&cluster.Spec{Name: name, Kind: cluster.Static, Static: a, MaxConnections: cluster.DefaultMaxConnections})
}

// backend answers every datagram with its own name and counts them.
type backend struct {
	addr netip.AddrPort
	got  atomic.Int64
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	c, err := net.ListenUDP("udp4", net.UDPAddrFromAddrPort(netip.AddrPortFrom(loopback, 0)))
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	b := &backend{addr: c.LocalAddr().(*net.UDPAddr).AddrPort()}
	var wg sync.WaitGroup
	wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			_, src, err := c.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			b.got.Add(1)
			_, _ = c.WriteToUDPAddrPort([]byte(name), src)
		}
	})
	t.Cleanup(func() { _ = c.Close(); wg.Wait() })
	return b
}

// udpConfig compiles the contract's listener with one arm, vip to
// udp:<svc>, and the rest to the blackhole (which the tests leave out of
// the active clusters, so it drops as an unknown cluster).
func udpConfig(t *testing.T, svc string, vip netip.Addr) *listener.Spec {
	t.Helper()
	svcs := []proxytest.Service{{Name: svc, VIP: vip}}
	spec, err := listener.FromProto(proxytest.UDPListener("udp-capture~default~client", "", proxytest.ExactMatcher(svcs, "blackhole"), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	spec.Socket = listener.Socket{Protocol: spec.Socket.Protocol, Addr: netip.AddrPortFrom(loopback, 0)}
	return spec
}

// A datagram's session is routed, dialed and only then inserted; an update
// landing in that window scans a map the session is not in yet. Each case
// lands one update there through the beforeInsert hook, so the interleaving
// is forced rather than hoped for, and checks that the session that ends up
// in the map (if any) is the one the configuration now in force makes. The
// no-op case is the control: the hook runs and the session is kept.
func TestSessionMadeDuringUpdateFollowsTheUpdate(t *testing.T) {
	initial := udpConfig(t, "a", loopback)
	armGone := udpConfig(t, "a", netip.MustParseAddr("127.0.0.2")).UDP
	repointed := udpConfig(t, "z", loopback).UDP
	cases := []struct {
		name string
		// land applies the update while the first datagram's session is
		// between dial and insert.
		land func(l *Listener, cs *clusters, b2 *backend)
		// wantHost is the backend the surviving session must use; nil: no
		// session may survive.
		wantHost func(b1, b2 *backend) *backend
	}{
		{
			name:     "control: nothing changes",
			land:     func(*Listener, *clusters, *backend) {},
			wantHost: func(b1, _ *backend) *backend { return b1 },
		},
		{
			name: "listener update removes the arm",
			land: func(l *Listener, _ *clusters, _ *backend) { l.Update(armGone) },
		},
		{
			name:     "listener update re-points the VIP",
			land:     func(l *Listener, _ *clusters, _ *backend) { l.Update(repointed) },
			wantHost: func(_, b2 *backend) *backend { return b2 },
		},
		{
			name: "cluster removed",
			land: func(l *Listener, cs *clusters, b2 *backend) {
				cs.set(static("udp:z", b2.addr))
				l.ClustersChanged()
			},
		},
		{
			name: "host replaced",
			land: func(l *Listener, cs *clusters, b2 *backend) {
				cs.set(static("udp:a", b2.addr), static("udp:z", b2.addr))
				l.ClustersChanged()
			},
			wantHost: func(_, b2 *backend) *backend { return b2 },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
			cs := &clusters{}
			cs.set(static("udp:a", b1.addr), static("udp:z", b2.addr))
			spec := initial
			var once sync.Once
			landed := make(chan struct{})
			beforeInsert := func(l *Listener, _ Key) {
				once.Do(func() { tc.land(l, cs, b2); close(landed) })
			}
			m := metrics.New()
			// Batch 1: one datagram is wholly routed before the next is
			// read, which the sentinel below relies on.
			l, err := Listen(spec, cs, Options{Batch: 1, Metrics: m, hooks: hooks{beforeInsert: beforeInsert}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = l.Close() })
			dial := func() *net.UDPConn {
				c, err := net.DialUDP("udp4", nil, net.UDPAddrFromAddrPort(l.LocalAddr()))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				return c
			}
			client, sentinel := dial(), dial()
			if _, err := client.Write([]byte("first")); err != nil {
				t.Fatal(err)
			}
			select {
			case <-landed:
			case <-time.After(5 * time.Second):
				t.Fatal("the first datagram never reached the insert window")
			}
			// The sentinel is read only after the first datagram's
			// session was inserted or refused and its datagram forwarded or queued.
			if _, err := sentinel.Write([]byte("sentinel")); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for {
				v, err := m.Value("aether_proxy_udp_downstream_rx_datagrams_total", map[string]string{"listener": l.Name()})
				if err != nil {
					t.Fatal(err)
				}
				if v >= 2 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the listener read %v datagrams, want 2", v)
				}
				time.Sleep(time.Millisecond)
			}
			key := Key{Src: client.LocalAddr().(*net.UDPAddr).AddrPort(), Dst: l.LocalAddr()}
			l.mu.Lock()
			s := l.sessions[key]
			l.mu.Unlock()
			var want *backend
			if tc.wantHost != nil {
				want = tc.wantHost(b1, b2)
			}
			switch {
			case want == nil && s != nil:
				t.Fatalf("session %v to %s (cluster %s) outlived its route", key, s.host, s.cluster)
			case want != nil && s == nil:
				t.Fatalf("no session for %v, want one to %s", key, want.addr)
			case want != nil && s.host != want.addr:
				t.Fatalf("session %v goes to %s, want %s (the host in force)", key, s.host, want.addr)
			}
			if want == nil {
				return
			}
			// The surviving session carries traffic end to end.
			_ = client.SetReadDeadline(time.Now().Add(2 * time.Second))
			buf := make([]byte, 64)
			n, err := client.Read(buf)
			if err != nil {
				t.Fatalf("no reply through the session: %v", err)
			}
			if got, wantName := string(buf[:n]), map[*backend]string{b1: "b1", b2: "b2"}[want]; got != wantName {
				t.Fatalf("reply from %q, want %q", got, wantName)
			}
		})
	}
}
