package h2_test

import (
	"io"
	"net"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/proxy/cluster"
	"github.com/aether-mesh/aether/mesh/proxy/h2"
)

// blackhole relays TCP to to until it goes silent; silent, it reads and
// drops whatever either side sends and sends nothing, as a partitioned
// peer does, and closed reports the pool side's socket closing.
type blackhole struct {
	ln     net.Listener
	silent atomic.Bool
	closed chan struct{}
}

func newBlackhole(t *testing.T, to netip.AddrPort) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, closed: make(chan struct{}, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", to.String())
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); u.Close() })
			go b.copy(u, c, true)
			go b.copy(c, u, false)
		}
	}()
	return b
}

func (b *blackhole) copy(dst, src net.Conn, poolSide bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			if poolSide {
				b.closed <- struct{}{}
			}
			return
		}
		if !b.silent.Load() {
			if _, err := dst.Write(buf[:n]); err != nil && err != io.EOF {
				return
			}
		}
	}
}

// An upstream HTTP/2 connection whose peer goes silent (a partition: no
// FIN, no RST, nothing answers) is closed by the pool once its PING goes
// unanswered, SendPingTimeout + PingTimeout after the last frame, instead
// of being held until its hour-long idle timeout. Without the health
// check the pool holds the socket, and each fault adds another.
func TestSilentUpstreamIsClosed(t *testing.T) {
	defer h2.SetPingTimeouts(200*time.Millisecond, 200*time.Millisecond)()
	m := newMesh(t, meshConfig{}, "sa-a")
	bh := newBlackhole(t, m.inbound.Addr())
	name := "h2:dst." + ns
	m.clusters[name].SetAssignment(&cluster.Assignment{Name: name, Endpoints: []cluster.Endpoint{{Addr: netip.MustParseAddrPort(bh.ln.Addr().String()), Weight: 1}}})
	c := &http.Client{Transport: &http.Transport{}}
	if code, _ := m.get(t, c, "sa-a", dstAuthority); code != http.StatusOK {
		t.Fatalf("through the relay: status %d, want 200", code)
	}
	bh.silent.Store(true)
	// The bound is many times the health check's 400 ms: only a pool
	// that never checks misses it.
	select {
	case <-bh.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the pool still holds its connection to a peer silent for 10 s; its health check (PING after 200 ms idle, 200 ms to answer) should have closed it")
	}
}
