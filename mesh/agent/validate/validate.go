// Package validate holds the config gates a snapshot must pass before the
// agent publishes it (the proposal's //test/envoy_validate). The data plane
// loads what it is sent, and several references Envoy resolves lazily or not
// at all are ours to check: go-control-plane's Snapshot.Consistent() looks at
// EDS and RDS names only, and the #895 chain→CDS resolver structurally cannot
// see a connection-less UDP listener (038 Phase 2).
package validate

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	udpaannotations "github.com/cncf/xds/go/udpa/annotations"
	xdsannotations "github.com/cncf/xds/go/xds/annotations/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// Gate names, as they appear in failures and in the agent's refusal metric.
const (
	GateValidateAll     = "validate_all"
	GateCaptureListener = "capture_listener"
	GateUDPArmsCDS      = "udp_arms_resolve_cds"
	GateTCPChainsCDS    = "tcp_chains_resolve_cds"
	GateEDSNames        = "eds_names_resolve"
	GateSDSNames        = "sds_names_resolve"
	GateRouteClusters   = "route_clusters_resolve"
	GateWIPFields       = "wip_fields_pinned"
	GateUDPSessionLimit = "udp_session_limit"
)

// PinnedWIPFields is every work-in-progress proto element the agent's
// configuration may use. Envoy accepts them with a warning and a
// server.wip_protos increment; adopting udp_proxy's matcher lit that counter
// (038 Phase 2a), and a new entry here is a reviewed decision, not a drift.
var PinnedWIPFields = []string{
	"field:envoy.extensions.filters.udp.udp_proxy.v3.UdpProxyConfig.matcher",
}

// OptionalWIPElements are work-in-progress elements allowed but not
// required: the ip_range_matcher arm form (xds.type.matcher.v3.IPMatcher,
// a work-in-progress file) appears only where a cluster's ClusterIPs fill a
// CIDR block, so its absence is not a drift.
var OptionalWIPElements = []string{
	"file:xds/type/matcher/v3/ip.proto",
}

// Resources is a snapshot's content by type URL, as cache.NewSnapshot takes.
type Resources map[resource.Type][]types.Resource

// Failure is one gate violation.
type Failure struct {
	Gate     string
	Resource string
	Detail   string
}

func (f Failure) String() string { return fmt.Sprintf("%s: %s: %s", f.Gate, f.Resource, f.Detail) }

// Error is every violation of one check.
type Error struct{ Failures []Failure }

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d config gate failure(s)", len(e.Failures))
	for i, f := range e.Failures {
		if i == 10 {
			fmt.Fprintf(&b, "; and %d more", len(e.Failures)-10)
			break
		}
		b.WriteString("; ")
		b.WriteString(f.String())
	}
	return b.String()
}

// Gates returns the names of the gates that failed.
func (e *Error) Gates() []string {
	set := map[string]bool{}
	for _, f := range e.Failures {
		set[f.Gate] = true
	}
	var out []string
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}

// Check runs every gate and returns an *Error listing every failure.
func Check(r Resources) error {
	c := newChecker(r)
	c.validateAll()
	c.captureListeners()
	c.udpArms()
	c.tcpChains()
	c.edsNames()
	c.sdsNames()
	c.routeClusters()
	c.wipFields()
	c.udpSessionLimits()
	c.twins()
	c.quicR4()
	c.gateways()
	if len(c.failures) > 0 {
		return &Error{Failures: c.failures}
	}
	return nil
}

// CheckAddedClusters is Check for r, a snapshot that passed Check and
// has since gained clusters and load assignments only (an on-demand
// twin), without walking its listeners and routes again: it runs every
// gate over r's clusters, load assignments and secrets alone. A gate
// that walks listeners or routes asks only that the clusters they name
// exist, which adding one cannot break; every gate on a cluster or a
// load assignment, and those between them (eds_names_resolve,
// twin_eds_name_own) or with the secrets (sds_names_resolve), still sees
// them whole. The listeners are most of a node's snapshot: a Check of
// the whole of it per admission was most of the admission's time. A new
// gate that makes a listener or route depend on a cluster otherwise
// than by its existence must be run here too.
func CheckAddedClusters(r Resources) error {
	return Check(Resources{
		resource.ClusterType:  r[resource.ClusterType],
		resource.EndpointType: r[resource.EndpointType],
		resource.SecretType:   r[resource.SecretType],
	})
}

type checker struct {
	r        Resources
	clusters map[string]*cluster.Cluster
	failures []Failure
}

func newChecker(r Resources) *checker {
	c := &checker{r: r, clusters: map[string]*cluster.Cluster{}}
	for _, res := range r[resource.ClusterType] {
		if cl, ok := res.(*cluster.Cluster); ok {
			c.clusters[cl.GetName()] = cl
		}
	}
	return c
}

func (c *checker) fail(gate, res, format string, args ...any) {
	c.failures = append(c.failures, Failure{Gate: gate, Resource: res, Detail: fmt.Sprintf(format, args...)})
}

func (c *checker) each(fn func(typ resource.Type, name string, m proto.Message)) {
	typs := make([]string, 0, len(c.r))
	for t := range c.r {
		typs = append(typs, t)
	}
	sort.Strings(typs)
	for _, t := range typs {
		for _, res := range c.r[t] {
			fn(t, resourceName(t, res), res)
		}
	}
}

func resourceName(t resource.Type, res types.Resource) string {
	short := t[strings.LastIndex(t, ".")+1:]
	if n, ok := res.(interface{ GetName() string }); ok {
		return short + " " + n.GetName()
	}
	if n, ok := res.(interface{ GetClusterName() string }); ok {
		return short + " " + n.GetClusterName()
	}
	return short
}

// walk visits every message under m, unpacking google.protobuf.Any so that
// typed_config payloads are checked like the rest. path names the field
// trail for error messages.
func walk(m protoreflect.Message, path string, visit func(path string, m protoreflect.Message) error) error {
	if err := visit(path, m); err != nil {
		return err
	}
	if any, ok := m.Interface().(*anypb.Any); ok {
		inner, err := any.UnmarshalNew()
		if err != nil {
			return fmt.Errorf("%s: cannot decode %s: %w", path, any.GetTypeUrl(), err)
		}
		return walk(inner.ProtoReflect(), path+"<"+string(inner.ProtoReflect().Descriptor().FullName())+">", visit)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsMap() && fd.MapValue().Kind() == protoreflect.MessageKind:
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				err = walk(mv.Message(), fmt.Sprintf("%s[%s]", p, k.String()), visit)
				return err == nil
			})
		case fd.IsList() && fd.Kind() == protoreflect.MessageKind:
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = walk(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i), visit)
			}
		case !fd.IsList() && !fd.IsMap() && fd.Kind() == protoreflect.MessageKind:
			err = walk(v.Message(), p, visit)
		}
		return err == nil
	})
	return err
}

type allValidator interface{ ValidateAll() error }

// validateAll is the protoc-gen-validate rules of every resource and of
// every typed_config inside it: generated ValidateAll stops at an Any, so
// each unpacked payload is validated as its own root (and each shared
// filter chain once, see validateShallow).
func (c *checker) validateAll() {
	mo := newMemo()
	visit := func(path string, pm protoreflect.Message) []found {
		if path != "" {
			return nil
		}
		if err := validateShallow(pm); err != nil {
			return []found{{detail: err.Error()}}
		}
		return nil
	}
	c.each(func(_ resource.Type, name string, m proto.Message) {
		for _, f := range mo.scan(m.ProtoReflect(), visit) {
			c.fail(GateValidateAll, name, "%s: %s", orRoot(f.path), f.detail)
		}
	})
}

func orRoot(p string) string {
	if p == "" {
		return "(resource)"
	}
	return p
}

// captureListeners checks the data plane contract of every capture
// listener: transparent, bound to the L4 spelling on 0.0.0.0 inside a pod
// netns, with the right transport and one filter of the right kind. Without
// transparent the reply from the ClusterIP fails with ENETUNREACH; on any
// other port nothing is delivered (ARCHITECTURE.md, "The data path").
func (c *checker) captureListeners() {
	for _, res := range c.r[resource.ListenerType] {
		l, ok := res.(*listener.Listener)
		if !ok {
			continue
		}
		name := "Listener " + l.GetName()
		var want core.SocketAddress_Protocol
		switch {
		case strings.HasPrefix(l.GetName(), xdsnames.UDPCaptureListenerPrefix):
			want = core.SocketAddress_UDP
			lf := l.GetListenerFilters()
			if len(lf) != 1 || lf[0].GetName() != xdsnames.UDPProxyFilter {
				c.fail(GateCaptureListener, name, "must have exactly one listener filter %s, has %d", xdsnames.UDPProxyFilter, len(lf))
			}
		case strings.HasPrefix(l.GetName(), xdsnames.TCPCaptureListenerPrefix):
			want = core.SocketAddress_TCP
			if len(l.GetFilterChains()) == 0 {
				c.fail(GateCaptureListener, name, "has no filter chain")
			}
		default:
			continue
		}
		if !l.GetTransparent().GetValue() {
			c.fail(GateCaptureListener, name, "transparent must be true")
		}
		sa := l.GetAddress().GetSocketAddress()
		if sa.GetProtocol() != want || sa.GetAddress() != "0.0.0.0" || sa.GetPortValue() != uint32(constants.ProxyL4OutboundPort) {
			c.fail(GateCaptureListener, name, "address must be %s 0.0.0.0:%d, is %s %s:%d", want, constants.ProxyL4OutboundPort,
				sa.GetProtocol(), sa.GetAddress(), sa.GetPortValue())
		}
		if sa.GetNetworkNamespaceFilepath() == "" {
			c.fail(GateCaptureListener, name, "network_namespace_filepath is empty")
		}
	}
}

// udpArms is TestUDPCaptureListenerResolvesAgainstCDS as a gate: every
// udp_proxy route, whether a matcher arm, an ip_range_matcher arm, the
// on_no_match or the deprecated single cluster, names a cluster in CDS, and
// a matcher has an on_no_match. Each distinct udp_proxy config is checked
// once; every listener carrying it gets its failures.
func (c *checker) udpArms() {
	mo := newMemo()
	for _, res := range c.r[resource.ListenerType] {
		l, ok := res.(*listener.Listener)
		if !ok {
			continue
		}
		name := "Listener " + l.GetName()
		for i, lf := range l.GetListenerFilters() {
			tc := lf.GetTypedConfig()
			if tc == nil || !tc.MessageIs(&udpproxy.UdpProxyConfig{}) {
				continue
			}
			for _, f := range mo.anyCached(tc, func() []found { return c.udpConfig(tc) }) {
				c.fail(GateUDPArmsCDS, name, "%s: %s", joinPath(fmt.Sprintf("listener_filters[%d]", i), f.path), f.detail)
			}
		}
	}
}

// udpConfig is udpArms' findings for one udp_proxy typed_config, paths
// relative to its listener filter.
func (c *checker) udpConfig(tc *anypb.Any) []found {
	cfg := &udpproxy.UdpProxyConfig{}
	if err := tc.UnmarshalTo(cfg); err != nil {
		return []found{{detail: fmt.Sprintf("cannot decode udp_proxy: %v", err)}}
	}
	var fs []found
	if cl := cfg.GetCluster(); cl != "" && c.clusters[cl] == nil {
		fs = append(fs, found{path: "cluster", detail: fmt.Sprintf("names cluster %q, which is not in CDS", cl)})
	}
	m := cfg.GetMatcher()
	if m == nil {
		return fs
	}
	if m.GetOnNoMatch() == nil {
		fs = append(fs, found{path: "matcher", detail: "has no on_no_match"})
	}
	routes := 0
	err := walk(m.ProtoReflect(), "matcher", func(path string, pm protoreflect.Message) error {
		if r, ok := pm.Interface().(*udpproxy.Route); ok {
			routes++
			if c.clusters[r.GetCluster()] == nil {
				fs = append(fs, found{path: path, detail: fmt.Sprintf("names cluster %q, which is not in CDS", r.GetCluster())})
			}
		}
		return nil
	})
	if err != nil {
		fs = append(fs, found{detail: err.Error()})
	}
	if routes == 0 {
		fs = append(fs, found{path: "matcher", detail: "has no udp_proxy route"})
	}
	return fs
}

func (c *checker) resolve(gate, res, path, cl string) {
	if _, ok := c.clusters[cl]; !ok {
		c.fail(gate, res, "%s names cluster %q, which is not in CDS", path, cl)
	}
}

// tcpChains is the #895 chain→CDS resolver: every tcp_proxy in every filter
// chain names clusters present in CDS.
func (c *checker) tcpChains() {
	mo := newMemo()
	visit := func(path string, pm protoreflect.Message) []found {
		tp, ok := pm.Interface().(*tcpproxy.TcpProxy)
		if !ok {
			return nil
		}
		var fs []found
		if cl := tp.GetCluster(); cl != "" && c.clusters[cl] == nil {
			fs = append(fs, found{path: joinPath(path, "cluster"), detail: fmt.Sprintf("names cluster %q, which is not in CDS", cl)})
		}
		for j, w := range tp.GetWeightedClusters().GetClusters() {
			if c.clusters[w.GetName()] == nil {
				fs = append(fs, found{path: joinPath(path, fmt.Sprintf("weighted_clusters[%d]", j)), detail: fmt.Sprintf("names cluster %q, which is not in CDS", w.GetName())})
			}
		}
		if tp.GetCluster() == "" && tp.GetWeightedClusters() == nil {
			fs = append(fs, found{path: path, detail: "names no cluster"})
		}
		return fs
	}
	for _, res := range c.r[resource.ListenerType] {
		l, ok := res.(*listener.Listener)
		if !ok {
			continue
		}
		for _, f := range mo.scan(l.ProtoReflect(), visit) {
			c.fail(GateTCPChainsCDS, "Listener "+l.GetName(), "%s: %s", orRoot(f.path), f.detail)
		}
	}
}

// udpSessionLimits: every UDP cluster carries a DEFAULT priority
// max_connections circuit breaker, which is what caps udp_proxy sessions to
// it (Envoy counts each session as one connection). Envoy would apply its
// own default to a cluster without one; the mesh states the bound so the
// config shows it. Zero is refused too: it would admit no session at all.
func (c *checker) udpSessionLimits() {
	names := make([]string, 0, len(c.clusters))
	for n := range c.clusters {
		if strings.HasPrefix(n, xdsnames.UDPClusterPrefix) {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		// Envoy takes the first threshold of each priority.
		var limit *wrapperspb.UInt32Value
		found := false
		for _, t := range c.clusters[n].GetCircuitBreakers().GetThresholds() {
			if t.GetPriority() == core.RoutingPriority_DEFAULT {
				limit, found = t.GetMaxConnections(), true
				break
			}
		}
		switch {
		case !found:
			c.fail(GateUDPSessionLimit, "Cluster "+n, "circuit_breakers has no DEFAULT priority threshold, so its udp_proxy sessions are not capped by the mesh")
		case limit == nil:
			c.fail(GateUDPSessionLimit, "Cluster "+n, "circuit_breakers DEFAULT threshold does not set max_connections")
		case limit.GetValue() == 0:
			c.fail(GateUDPSessionLimit, "Cluster "+n, "circuit_breakers DEFAULT max_connections is 0, which admits no session")
		}
	}
}

// edsNames: every EDS cluster's service name has a load assignment and every
// load assignment belongs to an EDS cluster. A missing one leaves the
// cluster warming until initial_fetch_timeout (the #1008 class).
func (c *checker) edsNames() {
	clas := map[string]bool{}
	for _, res := range c.r[resource.EndpointType] {
		if cla, ok := res.(*endpoint.ClusterLoadAssignment); ok {
			clas[cla.GetClusterName()] = true
		}
	}
	want := map[string]bool{}
	names := make([]string, 0, len(c.clusters))
	for n := range c.clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		cl := c.clusters[n]
		if cl.GetType() != cluster.Cluster_EDS {
			continue
		}
		sn := cl.GetEdsClusterConfig().GetServiceName()
		if sn == "" {
			sn = n
		}
		want[sn] = true
		if !clas[sn] {
			c.fail(GateEDSNames, "Cluster "+n, "EDS service name %q has no ClusterLoadAssignment", sn)
		}
	}
	var orphans []string
	for n := range clas {
		if !want[n] {
			orphans = append(orphans, n)
		}
	}
	sort.Strings(orphans)
	for _, n := range orphans {
		c.fail(GateEDSNames, "ClusterLoadAssignment "+n, "no EDS cluster uses it")
	}
}

// sdsNames: every SDS secret a resource names is in the snapshot. Envoy
// would wait for it, and a listener or cluster that waits is not serving.
// Besides SdsSecretConfig references this covers the names the upstream
// certificate mapper reads from filter state (ARCHITECTURE.md, "The mTLS HTTP/2 path"): a
// listener stamping an identity with no secret would make every upstream
// handshake of its connections fail.
func (c *checker) sdsNames() {
	secrets := map[string]bool{}
	for _, res := range c.r[resource.SecretType] {
		if s, ok := res.(*tlsv3.Secret); ok {
			secrets[s.GetName()] = true
		}
	}
	mo := newMemo()
	visit := func(path string, pm protoreflect.Message) []found {
		if s, ok := pm.Interface().(*tlsv3.SdsSecretConfig); ok && !secrets[s.GetName()] {
			return []found{{path: path, detail: fmt.Sprintf("names secret %q, which is not in SDS", s.GetName())}}
		}
		if name, ok := mapperSecret(pm); ok && !secrets[name] {
			return []found{{path: path, detail: fmt.Sprintf("stamps identity %q for the certificate mapper, which is not a secret in SDS", name)}}
		}
		return nil
	}
	c.each(func(t resource.Type, name string, m proto.Message) {
		if t == resource.SecretType {
			return
		}
		for _, f := range mo.scan(m.ProtoReflect(), visit) {
			c.fail(GateSDSNames, name, "%s: %s", orRoot(f.path), f.detail)
		}
	})
}

// WIPUses returns every work-in-progress proto element the resources set,
// keyed "field:", "message:" or "file:" plus the full name, with how many
// times each is used. It mirrors what Envoy counts in server.wip_protos.
func WIPUses(r Resources) (map[string]int, error) {
	uses := map[string]int{}
	var errs []error
	c := &checker{r: r}
	mo := newMemo()
	visit := func(_ string, pm protoreflect.Message) []found {
		var fs []found
		md := pm.Descriptor()
		if fileWIP(md.ParentFile()) {
			fs = append(fs, found{detail: "file:" + md.ParentFile().Path()})
		}
		if ms, ok := proto.GetExtension(md.Options(), xdsannotations.E_MessageStatus).(*xdsannotations.MessageStatusAnnotation); ok && ms.GetWorkInProgress() {
			fs = append(fs, found{detail: "message:" + string(md.FullName())})
		}
		pm.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
			if fs2, ok := proto.GetExtension(fd.Options(), xdsannotations.E_FieldStatus).(*xdsannotations.FieldStatusAnnotation); ok && fs2.GetWorkInProgress() {
				fs = append(fs, found{detail: "field:" + string(fd.FullName())})
			}
			return true
		})
		return fs
	}
	c.each(func(_ resource.Type, name string, m proto.Message) {
		for _, f := range mo.scan(m.ProtoReflect(), visit) {
			if f.decodeErr {
				errs = append(errs, fmt.Errorf("%s: %s: %s", name, orRoot(f.path), f.detail))
				continue
			}
			uses[f.detail]++
		}
	})
	return uses, errors.Join(errs...)
}

func fileWIP(fd protoreflect.FileDescriptor) bool {
	if fs, ok := proto.GetExtension(fd.Options(), xdsannotations.E_FileStatus).(*xdsannotations.FileStatusAnnotation); ok && fs.GetWorkInProgress() {
		return true
	}
	if fs, ok := proto.GetExtension(fd.Options(), udpaannotations.E_FileStatus).(*udpaannotations.StatusAnnotation); ok && fs.GetWorkInProgress() {
		return true
	}
	return false
}

// wipFields pins the work-in-progress surface: only PinnedWIPFields may be
// used, and while any UDP capture listener exists every pinned element is in
// use: a generator that silently stopped using the matcher is a drift too.
func (c *checker) wipFields() {
	uses, err := WIPUses(c.r)
	if err != nil {
		c.fail(GateWIPFields, "snapshot", "%v", err)
	}
	pinned := map[string]bool{}
	for _, p := range PinnedWIPFields {
		pinned[p] = true
	}
	for _, p := range OptionalWIPElements {
		pinned[p] = true
	}
	var names []string
	for n := range uses {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if !pinned[n] {
			c.fail(GateWIPFields, "snapshot", "uses work-in-progress %s (%d times), which is not pinned", n, uses[n])
		}
	}
	udpListeners := 0
	for _, res := range c.r[resource.ListenerType] {
		if l, ok := res.(*listener.Listener); ok && strings.HasPrefix(l.GetName(), xdsnames.UDPCaptureListenerPrefix) {
			udpListeners++
		}
	}
	used := 0
	for _, p := range PinnedWIPFields {
		if uses[p] > 0 {
			used++
		}
	}
	if udpListeners > 0 && used != len(PinnedWIPFields) {
		c.fail(GateWIPFields, "snapshot", "uses %d of the pinned work-in-progress elements, pinned at %d", used, len(PinnedWIPFields))
	}
}
