package validate

import (
	"fmt"

	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	setfsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/common/set_filter_state/v3"
	clustermatcher "github.com/envoyproxy/go-control-plane/envoy/extensions/router/cluster_specifiers/matcher/v3"
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
// connection managers of the mTLS path) names a cluster in CDS, and so
// does every MatcherClusterSpecifier's on_no_match, the h2 floor of a
// twin selection. Envoy would answer such a route 503 NC for every
// request (every source without a twin, for the floor). A selection's
// arms are not checked: they name twins fetched on demand.
func (c *checker) routeClusters() {
	mo := newMemo()
	visit := func(path string, pm protoreflect.Message) []found {
		switch m := pm.Interface().(type) {
		case *routev3.RouteAction:
			if cl := m.GetCluster(); cl != "" && c.clusters[cl] == nil {
				return []found{{path: path, detail: fmt.Sprintf("routes to cluster %q, which is not in CDS", cl)}}
			}
		case *clustermatcher.MatcherClusterSpecifier:
			return c.selectionFloor(path, m)
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

// selectionFloor is routeClusters' finding for a MatcherClusterSpecifier
// whose on_no_match is missing, is not a cluster action, or names a
// cluster not in CDS.
func (c *checker) selectionFloor(path string, m *clustermatcher.MatcherClusterSpecifier) []found {
	p := joinPath(path, "cluster_matcher.on_no_match")
	tc := m.GetClusterMatcher().GetOnNoMatch().GetAction().GetTypedConfig()
	if tc == nil {
		return []found{{path: p, detail: "has no cluster action: sources without a twin have no cluster"}}
	}
	a := &clustermatcher.ClusterAction{}
	if err := tc.UnmarshalTo(a); err != nil {
		return []found{{path: p, detail: fmt.Sprintf("is not a cluster action: %v", err)}}
	}
	if c.clusters[a.GetCluster()] == nil {
		return []found{{path: p, detail: fmt.Sprintf("falls back to cluster %q, which is not in CDS", a.GetCluster())}}
	}
	return nil
}
