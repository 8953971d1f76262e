package agent

import (
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/mesh/xdsnames"
)

type podEntry struct {
	seen         uint64
	udp, tcp     *listener.Listener
	udpFP, tcpFP uint64
}

// listenerFP is a capture listener's inputs: its name, its pod's netns and
// the shared filter (or chains) it carries.
func (b *Builder) listenerFP(tag, name, netns string, filter uint64) uint64 {
	h := b.hasher(tag)
	return h.str(name).str(netns).u64(filter).Sum64()
}

// joinChains collects every TCP service's filter chain, in service order,
// for the pods' TCP listeners, with their fingerprint.
func (b *Builder) joinChains() {
	b.chains = b.chains[:0:0]
	h := b.hasher("chains")
	for _, e := range b.services {
		if e.tcpChain != nil {
			b.chains = append(b.chains, e.tcpChain)
			h.u64(e.chainFP)
		}
	}
	b.chainsFP = h.Sum64()
}

// podListeners returns every local pod's capture listeners, building anew
// only those whose netns path or shared filter changed.
func (b *Builder) podListeners(st *registry.State, udpFilter *listener.ListenerFilter, out *Output) []types.Resource {
	var listeners []types.Resource
	seen := 0
	for i := range st.Pods {
		p := &st.Pods[i]
		if p.Node != b.Node {
			continue
		}
		if p.NetnsPath == "" {
			out.PodsWithoutNetns = append(out.PodsWithoutNetns, p.Key())
			continue
		}
		pk := p.Key()
		pe := b.pods[pk]
		if pe == nil {
			pe = &podEntry{}
			b.pods[pk] = pe
		}
		pe.seen = b.gen
		seen++
		b.podUDPListener(pe, p, udpFilter)
		b.podTCPListener(pe, p)
		if pe.udp != nil {
			listeners = append(listeners, pe.udp)
		}
		if pe.tcp != nil {
			listeners = append(listeners, pe.tcp)
		}
	}
	if len(b.pods) > seen {
		b.dropGonePods()
	}
	return listeners
}

// podUDPListener brings pe's UDP listener up to the shared udp_proxy
// filter: none without one.
func (b *Builder) podUDPListener(pe *podEntry, p *registry.Pod, udpFilter *listener.ListenerFilter) {
	li := &b.idx[listenerIdx]
	name := xdsnames.UDPCaptureListener(p.Namespace, p.Name)
	if udpFilter == nil {
		pe.udp, pe.udpFP = nil, 0
		li.del(name)
		return
	}
	fp := b.listenerFP("udp-listener", name, p.NetnsPath, b.udpFP)
	if pe.udp != nil && pe.udpFP == fp {
		return
	}
	pe.udp, pe.udpFP = &listener.Listener{
		Name:            name,
		Address:         captureAddress(core.SocketAddress_UDP, p.NetnsPath),
		Transparent:     wrapperspb.Bool(true),
		ListenerFilters: []*listener.ListenerFilter{udpFilter},
	}, fp
	li.set(name, pe.udp)
}

// podTCPListener brings pe's TCP listener up to the shared filter chains:
// none without a TCP service.
func (b *Builder) podTCPListener(pe *podEntry, p *registry.Pod) {
	li := &b.idx[listenerIdx]
	name := xdsnames.TCPCaptureListener(p.Namespace, p.Name)
	if len(b.chains) == 0 {
		pe.tcp, pe.tcpFP = nil, 0
		li.del(name)
		return
	}
	fp := b.listenerFP("tcp-listener", name, p.NetnsPath, b.chainsFP)
	if pe.tcp != nil && pe.tcpFP == fp {
		return
	}
	pe.tcp, pe.tcpFP = &listener.Listener{
		Name:         name,
		Address:      captureAddress(core.SocketAddress_TCP, p.NetnsPath),
		Transparent:  wrapperspb.Bool(true),
		FilterChains: b.chains,
	}, fp
	li.set(name, pe.tcp)
}

// dropGonePods removes the listeners of pods this build did not see.
func (b *Builder) dropGonePods() {
	li := &b.idx[listenerIdx]
	for pk, pe := range b.pods {
		if pe.seen == b.gen {
			continue
		}
		if pe.udp != nil {
			li.del(pe.udp.GetName())
		}
		if pe.tcp != nil {
			li.del(pe.tcp.GetName())
		}
		delete(b.pods, pk)
	}
}

func captureAddress(proto core.SocketAddress_Protocol, netns string) *core.Address {
	return &core.Address{Address: &core.Address_SocketAddress{SocketAddress: &core.SocketAddress{
		Protocol:                 proto,
		Address:                  "0.0.0.0",
		PortSpecifier:            &core.SocketAddress_PortValue{PortValue: uint32(constants.ProxyL4OutboundPort)},
		NetworkNamespaceFilepath: netns,
	}}}
}
