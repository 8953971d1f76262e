package mtls

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aether-mesh/aether/suites/cluster"
)

const (
	benchWindow      = 3 * time.Second
	benchConcurrency = 16
)

// proxies are the nodes whose proxies a request crosses.
var proxies = []string{"node-a", "node-b"}

// window is one measured run of one arm.
type window struct {
	Arm      string  `json:"arm"`
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	Seconds  float64 `json:"seconds"`
	ReqPerS  float64 `json:"req_per_s"`
	// ProxyCPUus is both proxies' CPU time (user+system) per request.
	ProxyCPUus float64 `json:"proxy_cpu_us_per_request"`
}

type benchResult struct {
	Concurrency int      `json:"concurrency"`
	Windows     []window `json:"windows"`
}

// benchmark runs app → proxy → proxy → app over h2 (h2c from the app to its
// outbound listener, h2 over mTLS between the proxies) and app → app over
// TLS (h2, the app's own mTLS port), in one run, ABBA, at the same
// concurrency from the same source pod to the same app.
func benchmark(ctx context.Context, r *rig, c cluster.Cluster) (*benchResult, error) {
	src, err := cluster.PodNamed(c, namespace, "src-a-0")
	if err != nil {
		return nil, err
	}
	dst, err := cluster.PodNamed(c, namespace, "dst-0")
	if err != nil {
		return nil, err
	}
	svid, err := r.svid("sa-a", time.Hour, time.Time{})
	if err != nil {
		return nil, err
	}
	direct, err := tlsClient(c, src, svid, dstSNI)
	if err != nil {
		return nil, err
	}
	meshURLs, err := meshURL(c, "/bench")
	if err != nil {
		return nil, err
	}
	arms := map[string]func() (*http.Client, string){
		"mesh h2": func() (*http.Client, string) { return h2cClient(c, src), meshURLs },
		"direct TLS": func() (*http.Client, string) {
			return direct, fmt.Sprintf("https://%s/bench", netip.AddrPortFrom(dst.IP, echoTLSPort))
		},
	}
	res := &benchResult{Concurrency: benchConcurrency}
	for _, arm := range []string{"mesh h2", "direct TLS", "direct TLS", "mesh h2"} {
		client, url := arms[arm]()
		w, err := runWindow(ctx, c, client, url, arm)
		if err != nil {
			return nil, err
		}
		res.Windows = append(res.Windows, w)
	}
	return res, c.Check(ctx)
}

func runWindow(ctx context.Context, c cluster.Cluster, client *http.Client, url, arm string) (window, error) {
	// One warm-up request opens the connections the window reuses.
	if code, _, err := get(ctx, client, url, dstAuthority); err != nil || code != http.StatusOK {
		return window{}, fmt.Errorf("%s warm-up: %d %v", arm, code, err)
	}
	cpu0, err := proxyCPU(ctx, c)
	if err != nil {
		return window{}, err
	}
	var n, errs atomic.Int64
	stop := time.Now().Add(benchWindow)
	start := time.Now()
	var wg sync.WaitGroup
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				if code, _, err := get(ctx, client, url, dstAuthority); err == nil && code == http.StatusOK {
					n.Add(1)
				} else {
					errs.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	secs := time.Since(start).Seconds()
	cpu1, err := proxyCPU(ctx, c)
	if err != nil {
		return window{}, err
	}
	w := window{Arm: arm, Requests: n.Load(), Errors: errs.Load(), Seconds: secs, ReqPerS: float64(n.Load()) / secs}
	if w.Requests > 0 {
		w.ProxyCPUus = float64((cpu1 - cpu0).Microseconds()) / float64(w.Requests)
	}
	return w, nil
}

// proxyCPU sums the proxies' user and system CPU time.
func proxyCPU(ctx context.Context, c cluster.Cluster) (time.Duration, error) {
	var total time.Duration
	for _, n := range proxies {
		d, err := c.ProxyCPU(ctx, n)
		if err != nil {
			return 0, err
		}
		total += d
	}
	return total, nil
}

// totals sums an arm's windows.
func (b *benchResult) totals(arm string) (reqPerS, cpuUS float64) {
	var req int64
	var secs, cpu float64
	for _, w := range b.Windows {
		if w.Arm == arm {
			req += w.Requests
			secs += w.Seconds
			cpu += w.ProxyCPUus * float64(w.Requests)
		}
	}
	if req == 0 {
		return 0, 0
	}
	return float64(req) / secs, cpu / float64(req)
}

// Table is the benchmark's figures for a person.
func (b *benchResult) Table() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "mtls benchmark, %d concurrent requests, ABBA windows of %s\n", b.Concurrency, benchWindow)
	fmt.Fprintf(&sb, "%-12s %10s %8s %12s %24s\n", "arm", "requests", "errors", "req/s", "proxy CPU µs/request")
	for _, w := range b.Windows {
		fmt.Fprintf(&sb, "%-12s %10d %8d %12.0f %24.1f\n", w.Arm, w.Requests, w.Errors, w.ReqPerS, w.ProxyCPUus)
	}
	mr, mc := b.totals("mesh h2")
	dr, dc := b.totals("direct TLS")
	fmt.Fprintf(&sb, "total: mesh h2 %.0f req/s (proxies %.1f µs CPU/request), direct TLS %.0f req/s (proxies %.1f µs/request); mesh/direct throughput %.2f\n", mr, mc, dr, dc, mr/dr)
	return sb.String()
}

// write puts the figures beside the clusters' logs, not among the suite
// results the gate reads.
func (b *benchResult) write(dir string) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "benchmark.json"), data, 0o644)
}
