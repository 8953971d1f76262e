// Package hotrestart is aether-proxy's hot restart, after Envoy's
// (ARCHITECTURE.md, "Hot restart"). Each process has a restart epoch; the
// one of epoch N serves a unix socket, its rendezvous, at a path derived
// from the socket path prefix, the base id and N. The process of epoch N+1
// connects to it and, through it:
//
//   - asks for the listening socket of each address its own listeners
//     bind, and gets the parent's socket (the descriptor, passed with
//     SCM_RIGHTS) when the parent holds one there; a socket it never asks
//     for stays with the parent until the parent exits;
//   - asks the parent to shut its admin (metrics) listener, so that it can
//     bind the same address;
//   - once its own listeners are up, tells the parent to drain: the parent
//     stops accepting and reading on the sockets it handed over, finishes
//     what is in flight, and passes every QUIC packet that is not for one
//     of its own connections to the child (Gate), which reads nothing from
//     a handed-over QUIC socket itself until the parent is gone;
//   - after the parent shutdown time, tells the parent to exit.
//
// The new process is a new generation: it holds nothing of the parent's
// configuration or on-demand subscriptions. A child that leaves before
// telling the parent to exit (it crashed, or was stopped) leaves the parent
// serving: the parent resumes what it drained.
package hotrestart

import (
	"fmt"
	"net/netip"
	"time"
)

// DefaultSocketPath is the default prefix of the rendezvous sockets. It
// names an abstract unix socket, which lives in the network namespace of
// the process (the node's: the proxy is hostNetwork) and vanishes with it.
const DefaultSocketPath = "@aether_proxy_domain_socket"

// Envoy's defaults for --drain-time-s and --parent-shutdown-time-s.
const (
	DefaultDrainTime          = 600 * time.Second
	DefaultParentShutdownTime = 900 * time.Second
)

// SocketPath is the rendezvous socket of the process of epoch at baseID:
// Envoy's naming, "<prefix>_parent_<baseID*10 + epoch%3>". Ten ids per
// base id keep two proxies on different base ids apart; epochs share
// three names, so at most three processes of one base id run at once, and
// a child whose epoch does not follow the parent's reaching the name is
// refused by the epoch check.
func SocketPath(prefix string, baseID, epoch uint32) string {
	return fmt.Sprintf("%s_parent_%d", prefix, baseID*10+epoch%3)
}

// Key names a listening socket as the kernel binds it: a second socket on
// the same key fails with EADDRINUSE while the first is open.
type Key struct {
	// Network is "tcp" or "udp".
	Network string         `json:"network"`
	Addr    netip.AddrPort `json:"addr"`
	// Netns is the network namespace's path; empty is the proxy's own.
	Netns string `json:"netns,omitempty"`
}

func (k Key) String() string {
	s := k.Network + "://" + k.Addr.String()
	if k.Netns != "" {
		s += " in netns " + k.Netns
	}
	return s
}

// Kinds of listener a socket serves. A socket is handed over only to a
// listener of the same kind: each sets its own options on it (udp_proxy's
// UDP_GRO, say, which quic-go cannot read).
const (
	KindUDP  = "udp"
	KindQUIC = "quic"
	KindTCP  = "tcp"
	KindHTTP = "http"
)
