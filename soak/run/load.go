package run

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/aether-mesh/aether/mesh/constants"
	"github.com/aether-mesh/aether/mesh/transparent"
	"github.com/aether-mesh/aether/mesh/xdsnames"
	"github.com/aether-mesh/aether/rigs/node"
)

// Source is one pod the load is sent from, and the services it calls.
type Source struct {
	Pod      *node.Pod
	Services []string
}

// podClient is a pod app's HTTP/1.1 client for the 18081 spelling: it
// dials from inside the pod's netns, where the capture diverts the
// connection to the pod's outbound listener. Its idle connections close
// after appIdleTimeout, as an app on net/http's default transport does:
// a client that kept them for ever would hold the proxy's downstream
// connections from every burst (the stalled requests of a network fault
// open new ones) for the run's length, and the leak gates would count
// the test's client, not the mesh.
func podClient(p *node.Pod, timeout time.Duration, keepAlive bool) *http.Client {
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives:   !keepAlive,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     appIdleTimeout,
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			ap, err := netip.ParseAddrPort(addr)
			if err != nil {
				return nil, fmt.Errorf("dial from pod %s: %w", p.Name, err)
			}
			return transparent.DialTCP(ctx, p.NS.Path, ap, transparent.Options{})
		},
	}}
}

// appIdleTimeout is net/http's DefaultTransport IdleConnTimeout.
const appIdleTimeout = 90 * time.Second

// meshURL is the URL an app uses for service svc: its ClusterIP on 18081,
// with the authority in Host.
func meshURL(c *node.Cluster, namespace, svc, path string) (string, string, error) {
	vip, err := c.ServiceVIP(namespace, svc)
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("http://%s%s", netip.AddrPortFrom(vip, constants.HTTPOutboundPort), path), vip.String(), nil
}

// Load is the open-loop paced load: one vegeta attacker per source pod,
// each at its share of the rate, their results written to one vegeta
// results file (JSON encoding) and kept, as completion times per node, for
// the client's request counter.
type Load struct {
	mu      sync.Mutex
	enc     vegeta.Encoder
	buf     *bufio.Writer
	file    *os.File
	done    map[string][]time.Time // per source node, when each load request completed
	total   int64
	failed  int64
	attacks []*vegeta.Attacker
	wg      sync.WaitGroup
}

// NewLoad opens the results file.
func NewLoad(path string) (*Load, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("failed to create the load's results folder: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("failed to create the load's results file: %w", err)
	}
	buf := bufio.NewWriterSize(f, 1<<16)
	return &Load{file: f, buf: buf, enc: vegeta.NewJSONEncoder(buf), done: map[string][]time.Time{}}, nil
}

// Start attacks from every source at its whole share of rate requests per
// second, until Stop, and returns the rate the shares add up to: the
// target each window's achieved rate is held to.
func (l *Load) Start(c *node.Cluster, mesh MeshNames, sources []Source, rate float64) (float64, error) {
	per := max(1, int(rate/float64(len(sources))+0.5))
	for _, s := range sources {
		var targets []vegeta.Target
		for _, svc := range s.Services {
			url, _, err := meshURL(c, s.Pod.Namespace, svc, "/load/"+s.Pod.Name+"/"+svc)
			if err != nil {
				return 0, err
			}
			h := http.Header{"Host": {xdsnames.Authority(svc, s.Pod.Namespace, mesh.MeshDomain)}}
			targets = append(targets, vegeta.Target{Method: http.MethodGet, URL: url, Header: h})
		}
		atk := vegeta.NewAttacker(vegeta.Client(podClient(s.Pod, 5*time.Second, true)), vegeta.MaxBody(0), vegeta.Workers(4), vegeta.MaxWorkers(256))
		l.attacks = append(l.attacks, atk)
		res := atk.Attack(vegeta.NewStaticTargeter(targets...), vegeta.ConstantPacer{Freq: per, Per: time.Second}, 0, s.Pod.Name)
		l.wg.Add(1)
		go func(node string) {
			defer l.wg.Done()
			for r := range res {
				l.record(node, r, true)
			}
		}(s.Pod.Node)
	}
	return float64(per * len(sources)), nil
}

// record writes one result; load results also count for the client's
// request counter of node.
func (l *Load) record(node string, r *vegeta.Result, load bool) {
	r.Headers, r.Body = nil, nil
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.enc.Encode(r) // a write error surfaces at Close
	if load {
		l.done[node] = append(l.done[node], r.End())
	}
	l.total++
	if r.Error != "" || r.Code < 200 || r.Code >= 400 {
		l.failed++
	}
}

// Record writes a request sent outside the paced load (a churned pod's
// first calls): it is one of the load generator's results, but not one of
// the requests whose proxy count the skew check compares.
func (l *Load) Record(r *vegeta.Result) { l.record("", r, false) }

// Counts returns the results so far and how many failed.
func (l *Load) Counts() (total, failed int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.failed
}

// Stop ends every attack and waits for its last results.
func (l *Load) Stop() {
	for _, a := range l.attacks {
		a.Stop()
	}
	l.wg.Wait()
}

// Close flushes and closes the results file.
func (l *Load) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.buf.Flush(); err != nil {
		l.file.Close()
		return fmt.Errorf("failed to write the load's results: %w", err)
	}
	return l.file.Close()
}

// DoneBefore returns, for each instant, how many load requests of node's
// sources had completed before it: what the proxy, which counts a request
// when it has answered it, can have counted by then. Call it after Stop.
func (l *Load) DoneBefore(node string, instants []time.Time) []int64 {
	l.mu.Lock()
	ts := slices.Clone(l.done[node])
	l.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	out := make([]int64, len(instants))
	for i, at := range instants {
		out[i] = int64(sort.Search(len(ts), func(j int) bool { return !ts[j].Before(at) }))
	}
	return out
}
