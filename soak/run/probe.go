package run

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
)

// Probe is one liveness probe's result, as probes.jsonl records it.
type Probe struct {
	Time time.Time `json:"time"`
	// Kind is the probe's kind (ProbeMesh, ProbeH2, ProbeQUIC).
	Kind      string  `json:"kind"`
	OK        bool    `json:"ok"`
	Code      int     `json:"code"`
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// probeTimeout bounds one probe: beyond the proxy's 2 s on-demand timeout,
// so a 503 NC at first use is seen as itself, not as a timeout.
const probeTimeout = 3 * time.Second

// Prober calls one service through the mesh at a fixed rate from its own
// pod, each probe on a new connection (so every probe meets the listener
// as it is now, across a hot restart), and records every result with its
// time.
type Prober struct {
	mu     sync.Mutex
	probes []Probe
	out    *bufio.Writer
	file   *os.File
	wg     sync.WaitGroup
}

// NewProber opens the probe record file.
func NewProber(path string) (*Prober, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("failed to create the probe record: %w", err)
	}
	return &Prober{file: f, out: bufio.NewWriter(f)}, nil
}

// Run probes svc from p every interval until ctx ends, then waits for the
// probes in flight.
func (pr *Prober) Run(ctx context.Context, c *node.Cluster, mesh MeshNames, p *node.Pod, svc string, interval time.Duration) error {
	url, _, err := meshURL(c, p.Namespace, svc, "/probe")
	if err != nil {
		return err
	}
	host := xdsnames.Authority(svc, p.Namespace, mesh.MeshDomain)
	client := podClient(p, probeTimeout, false)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			pr.wg.Wait()
			return nil
		case <-t.C:
			pr.wg.Add(1)
			go func() {
				defer pr.wg.Done()
				pr.add(probeOnce(client, url, host))
			}()
		}
	}
}

func probeOnce(client *http.Client, url, host string) Probe {
	start := time.Now()
	pb := Probe{Time: start, Kind: ProbeMesh}
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err == nil {
		req.Host = host
		var resp *http.Response
		if resp, err = client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			pb.Code = resp.StatusCode
			pb.OK = resp.StatusCode == http.StatusOK
		}
	}
	if err != nil {
		pb.Error = err.Error()
	}
	pb.LatencyMS = float64(time.Since(start).Microseconds()) / 1000
	return pb
}

// Record adds a probe made elsewhere (a test's) to the record.
func (pr *Prober) Record(pb Probe) { pr.add(pb) }

func (pr *Prober) add(pb Probe) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.probes = append(pr.probes, pb)
	b, _ := json.Marshal(pb)
	pr.out.Write(append(b, '\n'))
}

// Counts returns the liveness probes so far and how many failed.
func (pr *Prober) Counts() (total, failed int64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	for _, p := range pr.probes {
		if p.Kind != ProbeMesh {
			continue
		}
		total++
		if !p.OK {
			failed++
		}
	}
	return total, failed
}

// Close flushes and closes the record.
func (pr *Prober) Close() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if err := pr.out.Flush(); err != nil {
		pr.file.Close()
		return fmt.Errorf("failed to write the probe record: %w", err)
	}
	return pr.file.Close()
}

// Before returns, for each tick, how many liveness probes had started
// before it and how many of those failed. Call it after Run returned.
func (pr *Prober) Before(ticks []time.Time) (total, failed []int64) {
	pr.mu.Lock()
	ps := slices.DeleteFunc(slices.Clone(pr.probes), func(p Probe) bool { return p.Kind != ProbeMesh })
	pr.mu.Unlock()
	slices.SortFunc(ps, func(a, b Probe) int { return a.Time.Compare(b.Time) })
	cumFailed := make([]int64, len(ps)+1)
	for i, p := range ps {
		cumFailed[i+1] = cumFailed[i]
		if !p.OK {
			cumFailed[i+1]++
		}
	}
	total, failed = make([]int64, len(ticks)), make([]int64, len(ticks))
	for i, t := range ticks {
		n := sort.Search(len(ps), func(j int) bool { return !ps[j].Time.Before(t) })
		total[i], failed[i] = int64(n), cumFailed[n]
	}
	return total, failed
}
