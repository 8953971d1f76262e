package agent

import (
	"fmt"
	"net/netip"
	"time"
	"unsafe"

	xdscore "github.com/cncf/xds/go/xds/core/v3"
	matcher "github.com/cncf/xds/go/xds/type/matcher/v3"
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	tcpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/tcp_proxy/v3"
	udpproxy "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/udp/udp_proxy/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// A full build of a large mesh is dominated by allocation: every service
// gives a dozen small messages per cluster, load assignment and filter
// chain, and the collector then has to find and mark each one. The blocks
// below put the messages that live and die together (one load
// assignment's endpoints, one cluster, one filter chain) into a single
// allocation, and the sub-messages that are the same for every service are
// shared. Outputs are never mutated after a build, so sharing is safe:
// the same holds already for the udp_proxy filter and the filter chains
// every pod's listeners carry.

// Sub-messages every EDS cluster carries unchanged.
var (
	edsType        = &cluster.Cluster_Type{Type: cluster.Cluster_EDS}
	edsTimeout     = durationpb.New(5 * time.Second)
	edsAdsSource   = &core.ConfigSource{ResourceApiVersion: core.ApiVersion_V3, ConfigSourceSpecifier: &core.ConfigSource_Ads{Ads: &core.AggregatedConfigSource{}}}
	hostPrefixLen4 = wrapperspb.UInt32(32)
	hostPrefixLen6 = wrapperspb.UInt32(128)
)

// sharedWeights are the load-balancing weights endpoints are most often
// given; a weight outside them gets its own message.
var sharedWeights = func() (w [16]*wrapperspb.UInt32Value) {
	for i := range w {
		w[i] = wrapperspb.UInt32(uint32(i))
	}
	return w
}()

func lbWeight(w uint32) *wrapperspb.UInt32Value {
	if w < uint32(len(sharedWeights)) {
		return sharedWeights[w]
	}
	return wrapperspb.UInt32(w)
}

func hostPrefixLen(ip netip.Addr) *wrapperspb.UInt32Value {
	if ip.Is4() {
		return hostPrefixLen4
	}
	return hostPrefixLen6
}

type clusterBlock struct {
	c   cluster.Cluster
	eds cluster.Cluster_EdsClusterConfig
}

// chunks hands out values of T carved from shared chunks: one allocation
// for many blocks, laid out in the order the build makes them, which the
// collector then scans as one object. The chunks grow geometrically up to
// maxChunk bytes, so a small mesh allocates little and a large one few
// times. A chunk is never reused, only dropped with the last block in it.
type chunks[T any] struct {
	free []T
	next int
}

const maxChunk = 1 << 20

func (c *chunks[T]) take(n int) []T {
	if cap(c.free)-len(c.free) < n {
		var zero T
		c.next = min(max(2*c.next, 16), max(maxChunk/int(unsafe.Sizeof(zero)), 1))
		c.free = make([]T, 0, max(c.next, n))
	}
	i := len(c.free)
	c.free = c.free[:i+n]
	return c.free[i : i+n : i+n]
}

// edsCluster is a service's cluster: EDS over ADS, named for itself.
func (b *Builder) edsCluster(name string) *cluster.Cluster {
	blk := &b.clusterBlocks.take(1)[0]
	blk.eds.ServiceName, blk.eds.EdsConfig = name, edsAdsSource
	c := &blk.c
	c.Name, c.ClusterDiscoveryType, c.ConnectTimeout, c.EdsClusterConfig = name, edsType, edsTimeout, &blk.eds
	return c
}

type claBlock struct {
	cla  endpoint.ClusterLoadAssignment
	loc  endpoint.LocalityLbEndpoints
	locs [1]*endpoint.LocalityLbEndpoints
}

// lbBlock is one endpoint of a load assignment.
type lbBlock struct {
	lb   endpoint.LbEndpoint
	host endpoint.LbEndpoint_Endpoint
	ep   endpoint.Endpoint
	addr core.Address
	sa   core.Address_SocketAddress
	sock core.SocketAddress
	port core.SocketAddress_PortValue
}

// loadAssignment carries the application port (UDPLoadAssignment for udp:
// clusters): the client dialled the mesh spelling, the backend listens on
// targetPort. addrs is every ready endpoint's address text, back to back
// (svcText).
func (b *Builder) loadAssignment(name string, proto core.SocketAddress_Protocol, port uint16, ready []readyEndpoint, addrs string) *endpoint.ClusterLoadAssignment {
	cb := &b.claBlocks.take(1)[0]
	cla := &cb.cla
	cla.ClusterName = name
	if len(ready) == 0 {
		return cla
	}
	blks := b.lbBlocks.take(len(ready))
	lbs := b.lbPtrs.take(len(ready))
	var scratch [64]byte
	off := 0
	for i, ep := range ready {
		n := len(ep.ip.AppendTo(scratch[:0]))
		lb := &blks[i]
		lb.port.PortValue = uint32(port)
		lb.sock.Protocol, lb.sock.Address, lb.sock.PortSpecifier = proto, addrs[off:off+n], &lb.port
		off += n
		lb.sa.SocketAddress = &lb.sock
		lb.addr.Address = &lb.sa
		lb.ep.Address = &lb.addr
		lb.host.Endpoint = &lb.ep
		lb.lb.HostIdentifier, lb.lb.LoadBalancingWeight = &lb.host, lbWeight(ep.weight)
		lbs[i] = &lb.lb
	}
	cb.loc.LbEndpoints = lbs
	cb.locs[0] = &cb.loc
	cla.Endpoints = cb.locs[:]
	return cla
}

// svcText is the text a service's pieces carry, sliced from one string:
// its cluster names, its ClusterIP, and its ready endpoints' addresses
// back to back (which loadAssignment splits again).
type svcText struct{ udp, tcp, clusterIP, addrs string }

func (b *Builder) svcText(k registry.Key, hasUDP, hasTCP bool, ip netip.Addr, ready []readyEndpoint) svcText {
	nameLen := len(xdsnames.UDPClusterPrefix) + len(k.Name) + len(".") + len(k.Namespace)
	// A guess at the room needed: an address that does not fit only makes
	// the chunk grow, which leaves what was carved before where it is.
	b.textRoom(2*nameLen + (len(ready)+1)*len("255.255.255.255"))
	start := len(b.textBuf)
	for _, p := range []string{xdsnames.UDPClusterPrefix, xdsnames.TCPClusterPrefix} {
		b.textBuf = append(b.textBuf, p...)
		b.textBuf = append(b.textBuf, k.Name...)
		b.textBuf = append(b.textBuf, '.')
		b.textBuf = append(b.textBuf, k.Namespace...)
	}
	b.textBuf = ip.AppendTo(b.textBuf)
	ipEnd := len(b.textBuf) - start
	for _, ep := range ready {
		b.textBuf = ep.ip.AppendTo(b.textBuf)
	}
	s := b.textFrom(start)
	t := svcText{clusterIP: s[2*nameLen : ipEnd], addrs: s[ipEnd:]}
	if hasUDP {
		t.udp = s[:nameLen]
	}
	if hasTCP {
		t.tcp = s[nameLen : 2*nameLen]
	}
	return t
}

type chainBlock struct {
	fc      listener.FilterChain
	match   listener.FilterChainMatch
	cidr    core.CidrRange
	ranges  [1]*core.CidrRange
	filter  listener.Filter
	filters [1]*listener.Filter
	typed   listener.Filter_TypedConfig
	any     anypb.Any
}

var (
	tcpProxyTypeURL = typeURL(&tcpproxy.TcpProxy{})
	udpRouteTypeURL = typeURL(&udpproxy.Route{})
)

// actionBlock is a udp_proxy route action: the matcher's on_match for
// datagrams to one cluster.
type actionBlock struct {
	onMatch matcher.Matcher_OnMatch
	action  matcher.Matcher_OnMatch_Action
	ext     xdscore.TypedExtensionConfig
	any     anypb.Any
}

func typeURL(m proto.Message) string {
	return "type.googleapis.com/" + string(m.ProtoReflect().Descriptor().FullName())
}

// tcpChain is a TCP service's filter chain: its ClusterIP selects the
// chain, whose tcp_proxy sends to the service's cluster. ipText is the
// ClusterIP as text.
func (b *Builder) tcpChain(name string, ip netip.Addr, ipText string) (*listener.FilterChain, error) {
	// The encoded tcp_proxy is all the chain keeps, so one message serves
	// every encoding.
	b.proxyCluster.Cluster = name
	b.proxy.StatPrefix, b.proxy.ClusterSpecifier = name, &b.proxyCluster
	value, err := b.marshal(&b.proxy)
	if err != nil {
		return nil, fmt.Errorf("failed to encode tcp_proxy to %q: %w", name, err)
	}
	blk := &b.chainBlocks.take(1)[0]
	blk.any.TypeUrl, blk.any.Value = tcpProxyTypeURL, value
	blk.typed.TypedConfig = &blk.any
	blk.filter.Name, blk.filter.ConfigType = xdsnames.TCPProxyFilter, &blk.typed
	blk.filters[0] = &blk.filter
	blk.cidr.AddressPrefix, blk.cidr.PrefixLen = ipText, hostPrefixLen(ip)
	blk.ranges[0] = &blk.cidr
	blk.match.PrefixRanges = blk.ranges[:]
	fc := &blk.fc
	// Under mark-and-divert the accepted socket's local address is the
	// original destination, so the ClusterIP selects the chain without
	// original_dst.
	fc.Name, fc.FilterChainMatch, fc.Filters = name, &blk.match, blk.filters[:]
	return fc, nil
}

// textChunk is the size of the byte chunks the builder carves encoded
// messages and version strings from.
const textChunk = 32 << 10

// marshal encodes m deterministically (see anyOf) into the builder's byte
// chunk. A chunk is only ever appended to, so what was carved from it
// never changes.
func (b *Builder) marshal(m proto.Message) ([]byte, error) {
	if cap(b.encBuf)-len(b.encBuf) < 1024 {
		b.encBuf = make([]byte, 0, textChunk)
	}
	start := len(b.encBuf)
	out, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(b.encBuf, m)
	if err != nil {
		return nil, err
	}
	if cap(out) != cap(b.encBuf) {
		// It did not fit and went to a new array of its own.
		b.encBuf = nil
		return out[start:len(out):len(out)], nil
	}
	b.encBuf = out
	return out[start:len(out):len(out)], nil
}

// textRoom makes sure the text chunk has n bytes of room. Text (names,
// addresses) is carved from chunks, one allocation for many
// strings, laid out in the order the build writes and reads them.
func (b *Builder) textRoom(n int) {
	if cap(b.textBuf)-len(b.textBuf) < n {
		b.textBuf = make([]byte, 0, max(textChunk, n))
	}
}

// textFrom is the text appended to the chunk since start. A chunk is only
// ever appended to (a full one is replaced, not reused), so the bytes
// behind the string never change again.
func (b *Builder) textFrom(start int) string {
	if start == len(b.textBuf) {
		return ""
	}
	return unsafe.String(&b.textBuf[start], len(b.textBuf)-start)
}
