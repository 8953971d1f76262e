package agent

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
)

// TestServiceIndexFindsWhatStateFinds holds the widening search to the
// State's own binary search, for keys in and between the services, looked
// up in key order, in reverse and at random, from every starting point the
// previous lookup leaves.
func TestServiceIndexFindsWhatStateFinds(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 17, 300} {
		st := &registry.State{}
		for i := range n {
			// Every other name is left out, so there are misses between
			// any two services, before the first and after the last.
			st.Services = append(st.Services, registry.Service{Namespace: "ns", Name: fmt.Sprintf("s%04d", 2*i+1)})
		}
		st.Services = append(st.Services, registry.Service{Namespace: "zz", Name: "last"})
		st.Sort()
		var keys []registry.Key
		for i := -1; i <= 2*n+1; i++ {
			keys = append(keys, registry.Key{Namespace: "ns", Name: fmt.Sprintf("s%04d", i)})
		}
		keys = append(keys, registry.Key{Namespace: "a", Name: "first"}, registry.Key{Namespace: "zz", Name: "last"}, registry.Key{Namespace: "zzz", Name: "after"})
		reversed := make([]registry.Key, len(keys))
		for i, k := range keys {
			reversed[len(keys)-1-i] = k
		}
		shuffled := append([]registry.Key(nil), keys...)
		r := rand.New(rand.NewPCG(uint64(n), 1))
		r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		for name, order := range map[string][]registry.Key{"ascending": keys, "descending": reversed, "random": shuffled} {
			x := &serviceIndex{st: st}
			for _, k := range order {
				want, wantOK := st.Service(k)
				i, ok := x.find(k)
				if ok != wantOK || ok && &st.Services[i] != want {
					t.Fatalf("%d services, %s order: find(%s) = %d, %v; the State finds %v (found %v)", n, name, k, i, ok, want, wantOK)
				}
			}
		}
	}
}

// TestChunksNeverHandOutTheSameValueTwice: blocks carved from the chunks
// stay where they are and apart, however the requests are sized.
func TestChunksNeverHandOutTheSameValueTwice(t *testing.T) {
	var c chunks[[3]uint64]
	seen := map[*[3]uint64]int{}
	for i := range 5000 {
		n := 1 + i%7
		got := c.take(n)
		if len(got) != n || cap(got) != n {
			t.Fatalf("take(%d) gave len %d cap %d", n, len(got), cap(got))
		}
		for j := range got {
			if got[j] != ([3]uint64{}) {
				t.Fatalf("take #%d handed out a value already written: %v", i, got[j])
			}
			if prev, dup := seen[&got[j]]; dup {
				t.Fatalf("take #%d handed out the value take #%d holds", i, prev)
			}
			seen[&got[j]] = i
			got[j] = [3]uint64{uint64(i), uint64(j), 1}
		}
	}
	for p, i := range seen {
		if p[0] != uint64(i) || p[2] != 1 {
			t.Fatalf("a value of take #%d was overwritten: %v", i, *p)
		}
	}
}

// TestCarvedTextStaysPut: the names and addresses carved from
// the builder's text chunks are not overwritten by what is carved after
// them, across chunk boundaries and builds.
func TestCarvedTextStaysPut(t *testing.T) {
	b := NewBuilder("n1", constants.CaptureTProxy)
	type carved struct{ got, want string }
	var all []carved
	for i := range 20000 {
		k := registry.Key{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)}
		ip := netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})
		ready := []readyEndpoint{{ip: ip.Next()}, {ip: netip.MustParseAddr("fd00::" + fmt.Sprintf("%x", i))}}
		txt := b.svcText(k, true, true, ip, ready)
		all = append(all,
			carved{txt.udp, UDPClusterName(k)},
			carved{txt.tcp, TCPClusterName(k)},
			carved{txt.clusterIP, ip.String()},
			carved{txt.addrs, ready[0].ip.String() + ready[1].ip.String()})
	}
	for i, c := range all {
		if c.got != c.want {
			t.Fatalf("carved text #%d = %q, want %q", i, c.got, c.want)
		}
	}
	if s := b.svcText(registry.Key{Namespace: "n", Name: "x"}, false, true, netip.MustParseAddr("10.0.0.1"), nil); s.udp != "" || s.tcp != "tcp:x.n" || s.addrs != "" {
		t.Fatalf("TCP-only service without endpoints: %+v", s)
	}
}
