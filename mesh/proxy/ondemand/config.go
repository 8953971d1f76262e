package ondemand

import (
	"fmt"
	"time"

	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/aether-mesh/aether/mesh/proxy/internal/fields"
)

// EnvoyDefaultTimeout is the on_demand timeout when odcds states none.
const EnvoyDefaultTimeout = 5 * time.Second

// TimeoutFromProto compiles an on_demand filter's typed config into its
// ODCDS timeout. Only ODCDS over the ADS stream is supported; a filter
// without odcds (on-demand VHDS only) is refused, since the mesh has no
// VHDS. path is the filter's location, for errors.
func TimeoutFromProto(tc *anypb.Any, path string) (time.Duration, error) {
	od := &ondemandv3.OnDemand{}
	if err := tc.UnmarshalTo(od); err != nil {
		return 0, fmt.Errorf("%s: not an OnDemand: %w", path, err)
	}
	if err := fields.Only(od, path, "odcds"); err != nil {
		return 0, err
	}
	cds := od.GetOdcds()
	if cds == nil {
		return 0, fmt.Errorf("%s.odcds: required (on-demand CDS is all this data plane does on demand)", path)
	}
	path += ".odcds"
	if err := fields.Only(cds, path, "source", "timeout"); err != nil {
		return 0, err
	}
	if cds.GetSource().GetAds() == nil {
		return 0, fmt.Errorf("%s.source: only ads is supported (the one ADS stream)", path)
	}
	if cds.GetTimeout() == nil {
		return EnvoyDefaultTimeout, nil
	}
	d := cds.GetTimeout().AsDuration()
	if d <= 0 {
		return 0, fmt.Errorf("%s.timeout: %s is not positive", path, d)
	}
	return d, nil
}
