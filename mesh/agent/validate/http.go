package validate

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// mapperSecret returns the secret name a set_filter_state value stamps for
// the certificate mapper, when pm is one.
func mapperSecret(pm protoreflect.Message) (string, bool) {
	v, ok := pm.Interface().(*setfsv3.FilterStateValue)
	if !ok || v.GetObjectKey() != xdsnames.CertMapperFilterStateKey {
		return "", false
	}
	return v.GetFormatString().GetTextFormatSource().GetInlineString(), true
}

// routeClusters: every route of every inline route_config (the HTTP
// connection managers of the mTLS path) names a cluster in CDS. Envoy
// would answer such a route 503 NC for every request.
func (c *checker) routeClusters() {
	mo := newMemo()
	visit := func(path string, pm protoreflect.Message) []found {
		ra, ok := pm.Interface().(*routev3.RouteAction)
		if !ok {
			return nil
		}
		if cl := ra.GetCluster(); cl != "" && c.clusters[cl] == nil {
			return []found{{path: path, detail: fmt.Sprintf("routes to cluster %q, which is not in CDS", cl)}}
		}
		return nil
	}
	c.each(func(t resource.Type, name string, m proto.Message) {
		if t != resource.ListenerType {
			return
		}
		for _, f := range mo.scan(m.ProtoReflect(), visit) {
			c.fail(GateRouteClusters, name, "%s: %s", orRoot(f.path), f.detail)
		}
	})
}
