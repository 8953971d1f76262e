package ondemand

import (
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/agent/eastwest"
)

// TestAgentFilterCompiles: the filter the agent emits compiles to the
// mesh's 2 s timeout.
func TestAgentFilterCompiles(t *testing.T) {
	f, err := eastwest.OnDemandFilter()
	if err != nil {
		t.Fatal(err)
	}
	d, err := TimeoutFromProto(f.GetTypedConfig(), "f")
	if err != nil || d != 2*time.Second {
		t.Fatalf("timeout = %v, %v; want %v", d, err, DefaultTimeout)
	}
}

func TestFilterShapes(t *testing.T) {
	ads := &corev3.ConfigSource{ConfigSourceSpecifier: &corev3.ConfigSource_Ads{Ads: &corev3.AggregatedConfigSource{}}}
	for _, c := range []struct {
		name string
		od   *ondemandv3.OnDemand
		want time.Duration
		err  string
	}{
		{"Envoy's default timeout", &ondemandv3.OnDemand{Odcds: &ondemandv3.OnDemandCds{Source: ads}}, 5 * time.Second, ""},
		{"no odcds", &ondemandv3.OnDemand{}, 0, "f.odcds: required"},
		{"xdstp locator", &ondemandv3.OnDemand{Odcds: &ondemandv3.OnDemandCds{Source: ads, ResourcesLocator: "xdstp://x"}}, 0, "f.odcds.resources_locator: field is set but not supported"},
		{"not over ADS", &ondemandv3.OnDemand{Odcds: &ondemandv3.OnDemandCds{Source: &corev3.ConfigSource{}}}, 0, "f.odcds.source: only ads"},
	} {
		t.Run(c.name, func(t *testing.T) {
			a, err := anypb.New(c.od)
			if err != nil {
				t.Fatal(err)
			}
			d, err := TimeoutFromProto(a, "f")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || d != c.want {
				t.Fatalf("timeout = %v, %v; want %v", d, err, c.want)
			}
		})
	}
}
