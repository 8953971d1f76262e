package passthrough

import (
	"context"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// timedUpstreams is a static table that also states each cluster's
// connect_timeout, as the proxy's clusters do.
type timedUpstreams struct {
	StaticUpstreams
	timeouts map[string]time.Duration
}

func (u timedUpstreams) ConnectTimeout(c string) (time.Duration, bool) {
	d, ok := u.timeouts[c]
	return d, ok
}

// The TCP forwarder dials through its Dial option (the proxy's: in its
// upstream netns, with its mark), to the chain's upstream, under the
// cluster's own connect_timeout when the upstreams state one.
func TestTCPDialsThroughOptionUnderClusterTimeout(t *testing.T) {
	p := newPKI(t, "a.test")
	srv := newTLSServer(t, p, "a.test")
	var mu sync.Mutex
	var dialled []netip.AddrPort
	var budget []time.Duration
	o := TCPOptions{Dial: func(ctx context.Context, addr netip.AddrPort) (*net.TCPConn, error) {
		dl, ok := ctx.Deadline()
		mu.Lock()
		dialled = append(dialled, addr)
		if ok {
			budget = append(budget, time.Until(dl))
		}
		mu.Unlock()
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr.String())
		if err != nil {
			return nil, err
		}
		return c.(*net.TCPConn), nil
	}}
	f := newTCPForwarder(t, o, nil, srv)
	up := timedUpstreams{StaticUpstreams{"cl-a.test": netipAddr(srv.ln.Addr())}, map[string]time.Duration{"cl-a.test": 2 * time.Second}}
	routes, err := NewRoutes([]FilterChain{{Name: "a", ServerNames: []string{"a.test"}, Cluster: "cl-a.test"}})
	if err != nil {
		t.Fatal(err)
	}
	f.SetRoutes(routes, up)
	if got, err := tlsRequest(t, p, f, "a.test", 0); err != nil || got != "a.test|ping\n" {
		t.Fatalf("request: %q, %v", got, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialled) != 1 || dialled[0] != netipAddr(srv.ln.Addr()) {
		t.Fatalf("dialled %v, want the chain's upstream %s once", dialled, srv.ln.Addr())
	}
	// The deadline is the cluster's 2 s, not the listener's default 5 s.
	if len(budget) != 1 || budget[0] > 2*time.Second || budget[0] <= time.Second {
		t.Fatalf("dial deadline %v ahead, want the cluster's 2s", budget)
	}
}
