package kind

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"sigs.k8s.io/kind/pkg/exec"

	"github.com/aether-mesh/aether/mesh/identity"
	"github.com/aether-mesh/aether/rigs/kind/manifests"
	"github.com/aether-mesh/aether/rigs/procstat"
	"github.com/aether-mesh/aether/suites/cluster"
)

// mtlsValues reads what the install hands the agents and the pods as
// Secrets: the suite's CA file and the echo's own SVID, key and bundle.
func mtlsValues(m *cluster.MTLS) (*manifests.MTLS, error) {
	if m == nil {
		return nil, nil
	}
	// On the embedded cluster the first agent makes the CA in the
	// directory every agent shares; here the agents get it as a Secret,
	// so the provider makes it (a suite that made its own keeps it).
	if _, err := identity.LoadOrCreateCA(m.CADir, identity.CAConfig{TrustDomain: m.TrustDomain, MeshDomain: m.MeshDomain}); err != nil {
		return nil, fmt.Errorf("mTLS path: the CA the agents sign with: %w", err)
	}
	ca, err := os.ReadFile(filepath.Join(m.CADir, identity.CAFile))
	if err != nil {
		return nil, fmt.Errorf("mTLS path: the CA the agents sign with: %w", err)
	}
	out := &manifests.MTLS{TrustDomain: m.TrustDomain, MeshDomain: m.MeshDomain, UpstreamCert: m.UpstreamCert, MeshTransport: m.Transport(), ControlArgs: m.ControlArgs, CA: string(ca)}
	if t := m.EchoTLS; t != nil {
		e := &manifests.EchoTLS{Port: t.Port}
		for _, f := range []struct {
			dst  *string
			path string
		}{{&e.Cert, t.Cert}, {&e.Key, t.Key}, {&e.Bundle, t.Bundle}} {
			b, err := os.ReadFile(f.path)
			if err != nil {
				return nil, fmt.Errorf("mTLS path: the echo's TLS port: %w", err)
			}
			*f.dst = string(b)
		}
		out.Echo = e
	}
	return out, nil
}

// servesPod reports whether a proxy's metrics name a listener of pod p:
// every per-pod listener is <kind>~<namespace>~<pod>.
func servesPod(metrics string, p cluster.Pod) bool {
	re := regexp.MustCompile(`listener="[a-z0-9-]+~` + regexp.QuoteMeta(p.Namespace+"~"+p.Name) + `"`)
	return re.MatchString(metrics)
}

// procStatOf prints /proc/<pid>/stat of every process whose command is
// the argument: the node container shares its PID namespace with its
// pods' containers, and needs nothing beyond sh and cat to answer.
const procStatOf = `for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = "$1" ] && cat $p/stat; done; true`

// ProxyCPU reads the proxy's CPU time on the kind node the scenario node
// maps to, from the node's own /proc.
func (c *kindCluster) ProxyCPU(ctx context.Context, scNode string) (time.Duration, error) {
	kn, ok := c.nodes[scNode]
	if !ok {
		return 0, fmt.Errorf("no node %s in the scenario", scNode)
	}
	n, ok := c.kindNodes[kn]
	if !ok {
		return 0, fmt.Errorf("no kind node %s", kn)
	}
	var out bytes.Buffer
	cmd := n.CommandContext(ctx, "sh", "-c", procStatOf, "sh", "aether-proxy")
	if err := cmd.SetStdout(&out).Run(); err != nil {
		return 0, fmt.Errorf("reading the proxy's CPU time on %s: %w", kn, errorWithOutput(err))
	}
	return oneProxyCPU(out.Bytes(), kn)
}

// oneProxyCPU parses the stat lines of the node's aether-proxy processes:
// there must be exactly one, or whose CPU time it is would be a guess.
func oneProxyCPU(stats []byte, kindNode string) (time.Duration, error) {
	var lines [][]byte
	if s := bytes.TrimSpace(stats); len(s) > 0 {
		lines = bytes.Split(s, []byte("\n"))
	}
	if len(lines) != 1 {
		return 0, fmt.Errorf("%d aether-proxy processes on %s, want 1", len(lines), kindNode)
	}
	d, err := procstat.ParseProcStat(lines[0])
	if err != nil {
		return 0, fmt.Errorf("the proxy's CPU time on %s: %w", kindNode, err)
	}
	return d, nil
}

// AccessLog reads the proxy's access log on the kind node the scenario
// node maps to: the agents' --access-log-dir is a hostPath there, and the
// proxy names its file for its --node, the kind node.
func (c *kindCluster) AccessLog(ctx context.Context, scNode string) ([]byte, error) {
	kn, ok := c.nodes[scNode]
	if !ok {
		return nil, fmt.Errorf("no node %s in the scenario", scNode)
	}
	n, ok := c.kindNodes[kn]
	if !ok {
		return nil, fmt.Errorf("no kind node %s", kn)
	}
	var out bytes.Buffer
	cmd := n.CommandContext(ctx, "sh", "-c", catIfPresent, "sh", accessLogPath(kn))
	if err := cmd.SetStdout(&out).Run(); err != nil {
		return nil, fmt.Errorf("reading the proxy's access log on %s: %w", kn, errorWithOutput(err))
	}
	return out.Bytes(), nil
}

// catIfPresent prints the file named by its argument, nothing when the
// proxy has not written it yet.
const catIfPresent = `[ ! -e "$1" ] || cat "$1"`

func accessLogPath(kindNode string) string {
	return manifests.AccessLogDir + "/access-" + kindNode + ".log"
}

// errorWithOutput adds a failed node command's output to its error.
func errorWithOutput(err error) error {
	if rerr := exec.RunErrorForError(err); rerr != nil && len(rerr.Output) > 0 {
		return fmt.Errorf("%w: %s", err, bytes.TrimSpace(rerr.Output))
	}
	return err
}
