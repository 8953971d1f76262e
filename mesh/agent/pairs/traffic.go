package pairs

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// servedWindow is how recent a request through a twin must be for its
// prune to count in aether_agent_pairs_pruned_live_total.
const servedWindow = time.Minute

// proxyRequestsMetric is the proxy's per-cluster request counter
// (mesh/proxy/metrics): its cluster label is the routed cluster, a twin
// when the request rode one.
const proxyRequestsMetric = "aether_proxy_http_requests_total"

// proxyTraffic is the agent's view of which twins carry requests, read
// from the node proxy's /metrics. The agent has no traffic of its own to
// see: a twin "served a request" when its counter grew between two samples.
type proxyTraffic struct {
	url    string
	client *http.Client

	mu sync.Mutex
	// counts is each twin's request count at the last sample, taken at
	// last; served, when its count last grew.
	counts  map[string]float64
	served  map[string]growth
	last    time.Time
	sampled bool
}

// growth is a twin's count seen grown by the sample at at: the requests
// were served after the sample before it, taken at after, and by at.
type growth struct{ after, at time.Time }

func newProxyTraffic(url string) *proxyTraffic {
	return &proxyTraffic{url: url, client: &http.Client{Timeout: 2 * time.Second},
		counts: map[string]float64{}, served: map[string]growth{}}
}

// sample reads the proxy's counters at now. The first sample is a
// baseline: a count seen then grew at some unknown earlier time. A count
// lower than the last is a new proxy process's (a hot restart starts its
// counters at 0): what it counts was served since.
func (p *proxyTraffic) sample(ctx context.Context, now time.Time) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return fmt.Errorf("proxy metrics %q: %w", p.url, err)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return fmt.Errorf("failed to read proxy metrics %q: %w", p.url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy metrics %q: status %s", p.url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return fmt.Errorf("failed to parse proxy metrics %q: %w", p.url, err)
	}
	counts := twinRequests(fams[proxyRequestsMetric])
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, n := range counts {
		if old := p.counts[name]; p.sampled && (n > old || (n < old && n > 0)) {
			p.served[name] = growth{after: p.last, at: now}
		}
	}
	p.counts, p.last, p.sampled = counts, now, true
	return nil
}

// twinRequests sums a twin's requests over listeners and codes. A 503 NC
// is a request the twin did not serve: the cluster was missing.
func twinRequests(fam *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range fam.GetMetric() {
		var cluster, flags string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "cluster":
				cluster = l.GetValue()
			case "flags":
				flags = l.GetValue()
			}
		}
		if strings.HasPrefix(cluster, xdsnames.TwinClusterPrefix) && !strings.Contains(flags, "NC") {
			out[cluster] += m.GetCounter().GetValue()
		}
	}
	return out
}

// servedSince reports whether twin's counter last grew in a sample at or
// after t, and over requests served after notBefore: the sample before
// that one was taken at or after it. A zero notBefore is any time.
func (p *proxyTraffic) servedSince(twin string, t, notBefore time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	g, ok := p.served[twin]
	return ok && !g.at.Before(t) && !g.after.Before(notBefore)
}

// sampleEvery samples the proxy's counters every interval until ctx ends.
func (p *proxyTraffic) sampleEvery(ctx context.Context, interval time.Duration, onErr func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := p.sample(ctx, time.Now()); err != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// SampleProxy samples the proxy's metrics every
// Options.ProxyMetricsInterval until ctx ends, logging a failed sample;
// without Options.ProxyMetricsURL it returns at once.
func (s *Set) SampleProxy(ctx context.Context) {
	if s.traffic == nil {
		return
	}
	s.traffic.sampleEvery(ctx, s.opts.ProxyMetricsInterval, func(err error) {
		s.log.Warn("failed to sample the proxy's metrics", "err", err)
	})
}

// judgeLater judges pruned on its own goroutine: a sample is an HTTP
// request to the proxy, which a stream's callback or a registry update
// must not wait on (in a hot restart the proxy's metrics listener moves
// from one process to the other).
func (s *Set) judgeLater(pruned []prunedPair) {
	if len(pruned) == 0 {
		return
	}
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		s.judge(pruned)
	}()
}

// judge counts the pruned pairs whose twin served a request in the last
// minute: with the proxy's metrics, those whose counter grew in a sample
// taken since, this one included; without them, those with evidence of
// use in that minute. A pair pruned dormant is judged only on what came
// after it went dormant: its twin was withdrawn then, so the requests its
// source sent before leaving are not use at the prune, and a sample's
// growth counts only if the sample before it was taken since.
func (s *Set) judge(pruned []prunedPair) {
	if len(pruned) == 0 {
		return
	}
	if s.traffic != nil {
		if err := s.traffic.sample(context.Background(), time.Now()); err != nil {
			s.log.Warn("judging prunes on the last proxy metrics sample", "err", err)
		}
	}
	for _, p := range pruned {
		since := p.at.Add(-servedWindow)
		var live bool
		if s.traffic != nil {
			live = s.traffic.servedSince(p.twin, since, p.dormantAt)
		} else {
			live = !p.lastSeen.Before(since) && !p.lastSeen.Before(p.dormantAt)
		}
		if live {
			s.metrics.prunedLive.Inc()
			s.log.Error("pruned a twin that served a request in the last minute", "cluster", p.twin)
		}
	}
}
