package run

import (
	"bufio"
	"cmp"
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
	Kind string `json:"kind"`
	// Pod is the pod a liveness probe was sent from.
	Pod       string  `json:"pod,omitempty"`
	OK        bool    `json:"ok"`
	Code      int     `json:"code"`
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// probeTimeout bounds one probe: beyond the proxy's 2 s on-demand timeout,
// so a 503 NC at first use is seen as itself, not as a timeout.
const probeTimeout = 3 * time.Second

// Prober calls services through the mesh at a fixed rate from the
// probers' pods, each probe on a new connection (so every probe meets the
// listener as it is now, across a hot restart), and records every result
// with its time. It keeps, of each liveness probe, only its start and
// whether it failed: a long soak's million probes are in the record
// file, not in memory.
type Prober struct {
	mu sync.Mutex
	// mesh holds each liveness probe's start (Unix nanoseconds), negated
	// when it failed.
	mesh          []int64
	total, failed int64
	out           *bufio.Writer
	file          *os.File
	wg            sync.WaitGroup
}

// NewProber opens the probe record file.
func NewProber(path string) (*Prober, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("failed to create the probe record: %w", err)
	}
	return &Prober{file: f, out: bufio.NewWriterSize(f, 1<<16)}, nil
}

// ProbeTarget is one prober pod and the service it calls.
type ProbeTarget struct {
	Pod     *node.Pod
	Service string
}

// Run probes from every target's pod its service, each pod every
// interval, until ctx ends, then waits for the probes in flight.
func (pr *Prober) Run(ctx context.Context, c *node.Cluster, mesh MeshNames, targets []ProbeTarget, interval time.Duration) error {
	type prepared struct {
		client         *http.Client
		pod, url, host string
	}
	var ps []prepared
	for _, t := range targets {
		url, _, err := meshURL(c, t.Pod.Namespace, t.Service, "/probe")
		if err != nil {
			return err
		}
		ps = append(ps, prepared{client: podClient(t.Pod, probeTimeout, false), pod: t.Pod.Name, url: url, host: xdsnames.Authority(t.Service, t.Pod.Namespace, mesh.MeshDomain)})
	}
	var loops sync.WaitGroup
	for i, p := range ps {
		loops.Add(1)
		go func() {
			defer loops.Done()
			// The pods' ticks are spread over the interval, so the probes
			// arrive evenly rather than in bursts of one per pod.
			select {
			case <-ctx.Done():
				return
			case <-time.After(interval * time.Duration(i) / time.Duration(len(ps))):
			}
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					pr.wg.Add(1)
					go func() {
						defer pr.wg.Done()
						pb := probeOnce(p.client, p.url, p.host)
						pb.Pod = p.pod
						pr.add(pb)
					}()
				}
			}
		}()
	}
	loops.Wait()
	pr.wg.Wait()
	return nil
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
	if pb.Kind == ProbeMesh {
		at := pb.Time.UnixNano()
		pr.total++
		if !pb.OK {
			at = -at
			pr.failed++
		}
		pr.mesh = append(pr.mesh, at)
	}
	b, _ := json.Marshal(pb)
	pr.out.Write(append(b, '\n'))
}

// Counts returns the liveness probes so far and how many failed.
func (pr *Prober) Counts() (total, failed int64) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.total, pr.failed
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
	ps := slices.Clone(pr.mesh)
	pr.mu.Unlock()
	abs := func(v int64) int64 {
		if v < 0 {
			return -v
		}
		return v
	}
	slices.SortFunc(ps, func(a, b int64) int { return cmp.Compare(abs(a), abs(b)) })
	cumFailed := make([]int64, len(ps)+1)
	for i, p := range ps {
		cumFailed[i+1] = cumFailed[i]
		if p < 0 {
			cumFailed[i+1]++
		}
	}
	total, failed = make([]int64, len(ticks)), make([]int64, len(ticks))
	for i, t := range ticks {
		at := t.UnixNano()
		n := sort.Search(len(ps), func(j int) bool { return abs(ps[j]) >= at })
		total[i], failed[i] = int64(n), cumFailed[n]
	}
	return total, failed
}
