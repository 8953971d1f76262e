package listener_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	tcpproxyv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/aether-mesh/aether/mesh/proxy/listener"
	"github.com/aether-mesh/aether/rigs/proxytest"
)

// tcpWithIdle compiles the contract's TCP listener with one chain whose
// tcp_proxy idle_timeout is idle (nil: unset).
func tcpWithIdle(t *testing.T, idle *durationpb.Duration) (*listener.Spec, error) {
	t.Helper()
	svc := proxytest.Service{Name: "svc-a.default", VIP: proxytest.VIP(0), Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.244.2.2:6001")}}
	l := proxytest.TCPListener("tcp-capture~default~client", "", []proxytest.Service{svc})
	f := l.GetFilterChains()[0].GetFilters()[0]
	var tp tcpproxyv3.TcpProxy
	if err := f.GetTypedConfig().UnmarshalTo(&tp); err != nil {
		t.Fatal(err)
	}
	tp.IdleTimeout = idle
	a, err := anypb.New(&tp)
	if err != nil {
		t.Fatal(err)
	}
	f.GetTypedConfig().Value = a.GetValue()
	return listener.FromProto(l)
}

// tcp_proxy's idle_timeout follows Envoy: unset is one hour, an explicit
// zero disables it, a set value is taken as is, and a negative one is
// refused by its path.
func TestTCPIdleTimeout(t *testing.T) {
	for _, c := range []struct {
		name string
		set  *durationpb.Duration
		want time.Duration
	}{
		{"unset", nil, time.Hour},
		{"zero disables", durationpb.New(0), 0},
		{"set", durationpb.New(5 * time.Second), 5 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := tcpWithIdle(t, c.set)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.TCP.Chains[0].IdleTimeout; got != c.want {
				t.Fatalf("idle timeout %s, want %s", got, c.want)
			}
		})
	}
	_, err := tcpWithIdle(t, durationpb.New(-time.Second))
	want := `Listener "tcp-capture~default~client".filter_chains[0] ("tcp:svc-a.default").filters[0].typed_config.idle_timeout`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("negative idle_timeout: error %v, want one naming %s", err, want)
	}
}
