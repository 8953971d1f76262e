package pairs

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

// requests is the proxy's request counter for twin as /metrics shows it.
func requests(twin, code, flags string, n int) string {
	return "aether_proxy_http_requests_total{listener=\"out\",cluster=\"" + twin + "\",code=\"" + code + "\",flags=\"" + flags + "\"} " + strconv.Itoa(n) + "\n"
}

const requestsType = "# TYPE aether_proxy_http_requests_total counter\n"

// TestProxyTrafficSamples: a twin served a request when its count grew
// between two samples, or restarted from 0 and counted again (a new proxy
// process); the first sample is a baseline, and a count that stands still
// is not service.
func TestProxyTrafficSamples(t *testing.T) {
	var n int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, requestsType+requests(twinA, "200", "-", n))
	}))
	defer srv.Close()
	p := newProxyTraffic(srv.URL)
	at := time.Unix(1000, 0)
	for i, c := range []struct {
		count  int
		served bool
	}{{5, false}, {5, false}, {6, true}, {2, true}, {2, false}, {0, false}} {
		n = c.count
		now := at.Add(time.Duration(i) * time.Minute)
		if err := p.sample(t.Context(), now); err != nil {
			t.Fatal(err)
		}
		if got := p.servedSince(twinA, now, time.Time{}); got != c.served {
			t.Fatalf("sample %d (count %d): served = %v, want %v", i, c.count, got, c.served)
		}
	}
}

// TestPrunedLiveByProxyMetrics: with the proxy's metrics, a prune counts
// as live when the twin's request counter grew since the minute before,
// and not for a twin whose counter stood still or only counted 503 NC.
func TestPrunedLiveByProxyMetrics(t *testing.T) {
	var body string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	defer srv.Close()
	metric := func(a, b, nc int) string {
		return requestsType + requests(twinA, "200", "-", a) + requests(twinB, "200", "-", b) + requests(twinB, "503", "NC", nc)
	}
	dir := t.TempDir()
	persist(t, dir, []xdsnames.Twin{tA, tB}, nil)
	s := newSet(t, dir, Options{ProxyMetricsURL: srv.URL})
	body = metric(5, 7, 0)
	if err := s.traffic.sample(t.Context(), time.Now()); err != nil {
		t.Fatal(err)
	}
	body = metric(6, 7, 3)
	s.EndFetchWindow()
	s.FetchWindowEnded()
	if n := s.Counts().Pruned[PrunedFetchWindow]; n != 2 {
		t.Fatalf("pruned{reason=%s} = %v, want 2", PrunedFetchWindow, n)
	}
	if n := s.Counts().PrunedLive; n != 1 {
		t.Fatalf("pruned_live = %v, want 1: only %s served a request", n, twinA)
	}
}

// TestDormantPruneJudgedSinceDormant: a pair pruned dormant (a new proxy
// generation not re-subscribing it) is judged on what its twin served
// after it went dormant, not on the requests its source sent before
// leaving, even when the prune comes seconds after them and the sample
// that first sees them is taken after the pair went dormant (as the
// prune's own sample is). A twin whose count grows after a sample taken
// while it is dormant is still counted as served.
func TestDormantPruneJudgedSinceDormant(t *testing.T) {
	for _, c := range []struct {
		name     string
		metrics  bool
		whileOut bool
		want     float64
	}{
		{"proxy metrics, served before it went dormant", true, false, 0},
		{"proxy metrics, served while dormant", true, true, 1},
		{"evidence of use, before it went dormant", false, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := 5
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				_, _ = io.WriteString(w, requestsType+requests(twinA, "200", "-", n))
			}))
			defer srv.Close()
			var opts Options
			if c.metrics {
				opts.ProxyMetricsURL = srv.URL
			}
			s := newSet(t, t.TempDir(), opts)
			fresh(s, 1, nil, nil)
			if c.metrics {
				if err := s.traffic.sample(t.Context(), time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			s.Admit(tA)
			n++ // the source's request over the twin, before it leaves
			s.Settle(gone)
			if !s.Dormant(tA) {
				t.Fatalf("%s = %+v, want dormant", twinA, statusOf(s, twinA))
			}
			if c.whileOut {
				if err := s.traffic.sample(t.Context(), time.Now()); err != nil {
					t.Fatal(err)
				}
				n++
			}
			fresh(s, 2, nil, nil)
			s.Flush()
			if got := s.Counts().Pruned[PrunedNotResubscribed]; got != 1 {
				t.Fatalf("pruned{reason=%s} = %v, want 1", PrunedNotResubscribed, got)
			}
			if got := s.Counts().PrunedLive; got != c.want {
				t.Fatalf("pruned_live = %v, want %v", got, c.want)
			}
		})
	}
}
