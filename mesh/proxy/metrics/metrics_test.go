package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Each listener registers its own protocol's series only: a scrape of a
// node with a TCP listener shows no aether_proxy_udp_* series for it, and
// the other way round.
func TestListenersRegisterOnlyTheirProtocol(t *testing.T) {
	m := New()
	m.UDPListener("udp-capture~default~client")
	m.TCPListener("tcp-capture~default~client")
	m.HTTPListener("http-inbound~default~server")
	fams, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() != "listener" {
					continue
				}
				proto := strings.SplitN(l.GetValue(), "-", 2)[0]
				if !strings.HasPrefix(f.GetName(), "aether_proxy_"+proto+"_") {
					t.Errorf("listener %q registers %s", l.GetValue(), f.GetName())
				}
				seen[proto]++
			}
		}
	}
	if seen["udp"] == 0 || seen["tcp"] == 0 || seen["http"] == 0 {
		t.Fatalf("series per protocol %v: a listener registered nothing, so nothing was checked", seen)
	}
}

// Every drop has its own reason: a datagram without IP_PKTINFO is not an
// upstream error, and a TCP connection with no active cluster is not a TCP
// (upstream) error.
func TestDropReasonsAreDistinct(t *testing.T) {
	m := New()
	const name = "udp-capture~default~client"
	u := m.UDPListener(name)
	cases := []struct {
		reason  string
		counter prometheus.Counter
	}{
		{DropNoRoute, u.NoRoute},
		{DropNoCluster, u.NoCluster},
		{DropNoHealthy, u.NoHealthy},
		{DropUpstreamError, u.UpstreamError},
		{DropNoOriginalDestination, u.NoOriginalDst},
	}
	for i, c := range cases {
		c.counter.Inc()
		for j, other := range cases {
			want := 0.0
			if j <= i {
				want = 1
			}
			v, err := m.Value("aether_proxy_udp_dropped_total", map[string]string{"listener": name, "reason": other.reason})
			if err != nil {
				t.Fatal(err)
			}
			if v != want {
				t.Errorf("after counting %s, reason %s reads %v, want %v", c.reason, other.reason, v, want)
			}
		}
	}
	const tcpName = "tcp-capture~default~client"
	l := m.TCPListener(tcpName)
	l.NoCluster.Inc()
	for family, want := range map[string]float64{
		"aether_proxy_tcp_no_cluster_total": 1,
		"aether_proxy_tcp_errors_total":     0,
	} {
		if v, _ := m.Value(family, map[string]string{"listener": tcpName}); v != want {
			t.Errorf("after a connection with no cluster, %s reads %v, want %v", family, v, want)
		}
	}
}

// TestHTTPRequestCountsWithoutAllocating: an answered request is counted
// on its own series (listener, cluster, code, flags), and counting one
// whose series the listener has counted before allocates nothing.
func TestHTTPRequestCountsWithoutAllocating(t *testing.T) {
	m := New()
	l := m.HTTPListener("http-inbound~demo~api-0")
	l.Request("inbound|8080||", 200, "-")
	if n := testing.AllocsPerRun(100, func() { l.Request("inbound|8080||", 200, "-") }); n != 0 {
		t.Fatalf("%v allocations per counted request", n)
	}
	l.Request("inbound|8080||", 503, "UF")
	for _, c := range []struct {
		code, flags string
		want        float64
	}{{"200", "-", 102}, {"503", "UF", 1}, {"404", "NR", 0}} {
		got, err := m.Value("aether_proxy_http_requests_total", map[string]string{"listener": "http-inbound~demo~api-0", "cluster": "inbound|8080||", "code": c.code, "flags": c.flags})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("code %s flags %s: %v requests, want %v", c.code, c.flags, got, c.want)
		}
	}
}
