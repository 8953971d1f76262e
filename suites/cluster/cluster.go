// Package cluster is what the suites need from a cluster, whichever kind it
// is: the scenario's pods and services, a client socket inside a pod, each
// backend's own record (the witness), live registry changes, the proxies'
// counters and CPU time, and the mTLS path's configuration (Config.MTLS). The suite bodies are written against Cluster only, so
// the same red-then-green cases run on the embedded netns cluster (this
// package's Netns provider, the default) and on kind (suites/cluster/kind).
package cluster

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"time"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/registry"
	"github.com/aether-mesh/aether/rigs/node"
)

// EnvProvider names the provider the suites run on.
const EnvProvider = "AETHER_CLUSTER"

// The providers.
const (
	Netns = "netns"
	Kind  = "kind"
)

// Selected returns the provider AETHER_CLUSTER names, netns when unset.
func Selected() (string, error) { return parseProvider(os.Getenv(EnvProvider)) }

func parseProvider(v string) (string, error) {
	switch v {
	case "", Netns:
		return Netns, nil
	case Kind:
		return Kind, nil
	}
	return "", fmt.Errorf("%s=%q: unknown cluster provider; choose %q (the embedded netns cluster, the default) or %q", EnvProvider, v, Netns, Kind)
}

// Config is a cluster to bring up.
type Config struct {
	// Scenario is a scenario file (mesh/registry format): its pods, services
	// and UDPRoutes become the cluster's workloads.
	Scenario string
	// Mode is the capture mode of the CNI and the agents.
	Mode constants.CaptureMode
	// RunDir keeps what the run leaves behind: logs, records.
	RunDir string
	Logf   func(format string, args ...any)
	// MTLS, when set, turns on the mTLS HTTP/2 path in every agent and
	// gives the pods' HTTP echo its own mTLS port.
	MTLS *MTLS
}

// MTLS is the mTLS HTTP/2 path's configuration.
type MTLS struct {
	TrustDomain, MeshDomain string
	// CADir holds the CA every agent signs SVIDs with (identity.CAFile),
	// made by the suite so that its own clients' SVIDs are the mesh's.
	CADir string
	// UpstreamCert is the agents' --upstream-cert: per-source (the mesh),
	// or one of the #831 controls, static or unhashed-identity.
	UpstreamCert string
	// EchoTLS, when set, is every pod app's own mTLS port.
	EchoTLS *EchoTLS
	// MeshTransport is the agents' --mesh-transport: auto (east-west
	// QUIC wherever eligible) or h2. Empty is h2: the mTLS path's suites
	// prove the HTTP/2 floor, and east-west QUIC asks for auto.
	MeshTransport string
	// ControlArgs are extra aether-agent flags: the test-only switches
	// (--test-only-...) a suite's control runs the agents with, and the
	// short windows a suite needs to outlive (lifecycle's fetch window);
	// none for the mesh as shipped.
	ControlArgs []string
}

// Transport is m's --mesh-transport, h2 when unset.
func (m *MTLS) Transport() string {
	if m.MeshTransport == "" {
		return "h2"
	}
	return m.MeshTransport
}

// EchoTLS is the HTTP echo's own mTLS port and its PEM files: the app's
// SVID, its key, and the bundle it verifies peers with.
type EchoTLS struct {
	Port              int
	Cert, Key, Bundle string
}

// Provider brings up clusters of one kind.
type Provider interface {
	Name() string
	Up(ctx context.Context, cfg Config) (Cluster, error)
	// Binaries is the sha256 of each mesh binary the provider's clusters
	// run, by name, for the results' build stamp.
	Binaries() (map[string]string, error)
}

// Pod is one of the scenario's pods. Node is the scenario's node name; IP
// the address the cluster gave it.
type Pod struct {
	Namespace, Name, Node string
	IP                    netip.Addr
}

// Record is one line of a backend's record (rigs/node's echo backend, which
// every test pod runs on both providers).
type Record = node.Record

// Cluster is a running cluster with the mesh and a scenario's workloads.
type Cluster interface {
	// Pods lists the scenario's pods in scenario order.
	Pods() []Pod
	// ServiceVIP is service namespace/name's ClusterIP.
	ServiceVIP(namespace, name string) (netip.Addr, error)
	// DialUDP and DialTCP open a client socket inside pod, connected to
	// dst, so the pod's capture rules see its traffic.
	DialUDP(ctx context.Context, pod Pod, dst netip.AddrPort) (net.Conn, error)
	DialTCP(ctx context.Context, pod Pod, dst netip.AddrPort) (net.Conn, error)
	// Records is what the pod's backend has received, the ready line
	// excluded.
	Records(ctx context.Context, pod Pod) ([]Record, error)
	// Update edits the registry the agents watch: services, UDPRoutes and
	// weights; pods cannot be added or removed.
	Update(ctx context.Context, edit func(*registry.Scenario)) error
	// Metrics is the Prometheus text of the agent's or the proxy's
	// /metrics on scenario node node.
	Metrics(ctx context.Context, node string, of Component) (string, error)
	// AccessLog is the JSON access log (one line per request) the proxy
	// on scenario node node has written; empty before its first request.
	AccessLog(ctx context.Context, node string) ([]byte, error)
	// ProxyCPU is the CPU time (user + system) node's proxy has used.
	ProxyCPU(ctx context.Context, node string) (time.Duration, error)
	// Check reports any mesh or backend process that has died.
	Check(ctx context.Context) error
	Close() error
}

// Component is a per-node mesh process whose counters a suite reads.
type Component string

const (
	Agent Component = "agent"
	Proxy Component = "proxy"
)

// PodNamed finds namespace/name among c's pods.
func PodNamed(c Cluster, namespace, name string) (Pod, error) {
	for _, p := range c.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return p, nil
		}
	}
	return Pod{}, fmt.Errorf("no pod %s/%s in the cluster", namespace, name)
}
