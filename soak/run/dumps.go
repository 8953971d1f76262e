package run

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aether-mesh/aether/rigs/node"
)

// goroutineDumps writes each node's proxy goroutine dump
// (/debug/pprof/goroutine?debug=1 on its loopback admin) into
// dir/pprof/<node>-proxy-<when>.txt. A leak gate that fails names a
// slope; these say what the goroutines are, so a run with -leaks takes
// one once the cluster is up and one before teardown, and the difference is what
// accumulated. A dump that cannot be taken is named in the returned
// error and the others are still written.
func goroutineDumps(ctx context.Context, c *node.Cluster, dir, when string) error {
	out := filepath.Join(dir, "pprof")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("goroutine dumps: %w", err)
	}
	var failed []string
	for _, n := range c.Nodes() {
		body, err := n.Get(ctx, n.ProxyMetrics, "/debug/pprof/goroutine?debug=1")
		if err == nil {
			err = os.WriteFile(filepath.Join(out, n.Name+"-proxy-"+when+".txt"), []byte(body), 0o644)
		}
		if err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("goroutine dumps %s: %v", when, failed)
	}
	return nil
}
