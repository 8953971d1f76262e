// Package node is the embedded netns cluster: the aether mesh on a real
// kernel, with no container engine, built from a scenario file
// (fixtures/scenarios, the format of mesh/registry).
//
// The topology follows ztunnel's namespaced test clusters. One bridge
// namespace holds a bridge; every node is a namespace joined to it by a veth
// (eth0, an underlay address from 10.243.0.0/24, 10.243.<k>.0/24 for the
// k-th cluster of a multi-cluster run, multi.go) that forwards; a gateway
// node also has a veth (wan0) to the shared network's bridge; every pod is
// a namespace on a point-to-point veth from its node, created by the real
// containernetworking "ptp" plugin with "static" IPAM (the pod's scenario
// address in its /24, the /24's .1 as gateway), with aether-cni chained
// after it through libcni so the mesh plugin sees the same prevResult a
// kubelet's runtime would hand it. Nodes route each other's pods by /32
// over the bridge. ClusterIPs (10.96.0.0/16) exist only as destinations
// inside pod namespaces, where the capture rules take them.
//
// Each node namespace runs aether-agent and aether-proxy as processes (the
// proxy is "hostNetwork": it binds its capture sockets into the pods by
// netns path); each pod runs the rig's echo backend, which answers with its
// own name and records what it received. Everything is named aeth-<pid>-…
// (rigs/netns), so a crashed run is swept by the next and a leak check sees
// anything left behind.
package node
