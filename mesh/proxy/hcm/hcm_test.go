package hcm

import (
	"strings"
	"testing"
	"time"

	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	routerv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
)

// filter is a minimal connection manager, changed by change.
func filter(t *testing.T, change func(*hcmv3.HttpConnectionManager)) *listenerv3.Filter {
	t.Helper()
	router, err := anypb.New(&routerv3.Router{})
	if err != nil {
		t.Fatal(err)
	}
	h := &hcmv3.HttpConnectionManager{
		StatPrefix: "in",
		RouteSpecifier: &hcmv3.HttpConnectionManager_RouteConfig{RouteConfig: &routev3.RouteConfiguration{
			Name: "r",
			VirtualHosts: []*routev3.VirtualHost{{Name: "v", Domains: []string{"*"}, Routes: []*routev3.Route{{
				Match:  &routev3.RouteMatch{PathSpecifier: &routev3.RouteMatch_Prefix{Prefix: "/"}},
				Action: &routev3.Route_Route{Route: &routev3.RouteAction{ClusterSpecifier: &routev3.RouteAction_Cluster{Cluster: "c"}}},
			}}}},
		}},
		HttpFilters: []*hcmv3.HttpFilter{{Name: RouterFilter, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: router}}},
	}
	change(h)
	tc, err := anypb.New(h)
	if err != nil {
		t.Fatal(err)
	}
	return &listenerv3.Filter{Name: Filter, ConfigType: &listenerv3.Filter_TypedConfig{TypedConfig: tc}}
}

// stream_idle_timeout as Envoy reads it: unset is 5 minutes, zero
// disables, anything else is taken; a negative one is refused.
func TestStreamIdleTimeout(t *testing.T) {
	for _, c := range []struct {
		name string
		set  *durationpb.Duration
		want time.Duration
	}{
		{"unset", nil, 5 * time.Minute},
		{"zero", durationpb.New(0), 0},
		{"set", durationpb.New(30 * time.Second), 30 * time.Second},
	} {
		cfg, err := FromFilter(filter(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = c.set }), "f")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if cfg.StreamIdleTimeout != c.want {
			t.Errorf("%s: stream idle timeout %v, want %v", c.name, cfg.StreamIdleTimeout, c.want)
		}
	}
	_, err := FromFilter(filter(t, func(h *hcmv3.HttpConnectionManager) { h.StreamIdleTimeout = durationpb.New(-time.Second) }), "f")
	if err == nil || !strings.Contains(err.Error(), "stream_idle_timeout") {
		t.Errorf("a negative stream_idle_timeout: %v, want an error naming the field", err)
	}
}
