package bench

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestABBAVisitsEachRowTwiceMirrored(t *testing.T) {
	got, err := ABBA([]string{"direct", "mesh-h2", "haproxy"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"direct", "mesh-h2", "haproxy", "haproxy", "mesh-h2", "direct"}
	if !slices.Equal(got, want) {
		t.Fatalf("ABBA = %v, want %v", got, want)
	}
	// Every row's two visits are centred on the same instant, the middle
	// of the run: a linear drift of the machine's load weighs alike.
	for _, r := range []string{"direct", "mesh-h2", "haproxy"} {
		first, last := slices.Index(got, r), -1
		for i, v := range got {
			if v == r {
				last = i
			}
		}
		if first+last != len(got)-1 {
			t.Errorf("row %s visited at %d and %d: not mirrored about the middle", r, first, last)
		}
	}
}

func TestABBARefusesDuplicatesAndBlanks(t *testing.T) {
	if _, err := ABBA([]string{"a", "b", "a"}); err == nil || !strings.Contains(err.Error(), `"a" given twice`) {
		t.Errorf("duplicate row: err = %v", err)
	}
	if _, err := ABBA([]string{"a", ""}); err == nil || !strings.Contains(err.Error(), "without a name") {
		t.Errorf("blank row: err = %v", err)
	}
}

func TestPercentileIsNearestRank(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i)*time.Microsecond)
	}
	for q, want := range map[float64]time.Duration{0.5: 50 * time.Microsecond, 0.9: 90 * time.Microsecond, 0.99: 99 * time.Microsecond, 1: 100 * time.Microsecond, 0.001: time.Microsecond} {
		if got := Percentile(lat, q); got != want {
			t.Errorf("Percentile(1..100 µs, %g) = %s, want %s", q, got, want)
		}
	}
	if got := Percentile(nil, 0.5); got != 0 {
		t.Errorf("Percentile of no samples = %s, want 0", got)
	}
}

func TestSummarizeAndAdded(t *testing.T) {
	// Shuffled on purpose: Summarize sorts.
	lat := []time.Duration{400, 100, 300, 200, 1000}
	for i := range lat {
		lat[i] *= time.Microsecond
	}
	s := Summarize(lat)
	if s.Samples != 5 || s.P50 != 300 || s.P90 != 1000 || s.P99 != 1000 || s.Mean != 400 {
		t.Errorf("Summarize = %+v", s)
	}
	if len(s.Quantiles) != len(QuantileLevels) || s.Quantiles[0] != 100 {
		t.Errorf("quantiles %v", s.Quantiles)
	}
	base := Latency{P50: 200, P90: 250, P99: 900}
	if a := AddedOver(s, base); a != (Added{P50: 100, P90: 750, P99: 100}) {
		t.Errorf("AddedOver = %+v", a)
	}
}

func TestCPUUnits(t *testing.T) {
	s := CPUSample{CPU: 3 * time.Second, Wall: 15 * time.Second}
	if v := s.VCPU(); v != 0.2 {
		t.Errorf("VCPU = %g, want 0.2", v)
	}
	// Istio's unit: 0.2 vCPU at 1000 rps is 0.2 per 1000 rps; at 500 rps
	// the same CPU is twice the cost per request.
	if v := PerThousand(0.2, 1000); v != 0.2 {
		t.Errorf("PerThousand(0.2, 1000) = %g", v)
	}
	if v := PerThousand(0.2, 500); v != 0.4 {
		t.Errorf("PerThousand(0.2, 500) = %g", v)
	}
	if v := PerThousand(0.2, 0); v != 0 {
		t.Errorf("PerThousand at no rate = %g, want 0", v)
	}
}

func TestH2LoadArgs(t *testing.T) {
	a, err := HTTPLoad{URL: "http://10.96.0.60:18081/x", Authority: "api.demo.mesh.test", Conns: 4, RPS: 1000,
		Duration: 15 * time.Second, Payload: "/p", LogFile: "/l"}.Args()
	if err != nil {
		t.Fatal(err)
	}
	want := "--h1 -t 1 -c 4 -m 1 -D 15 --rps 250 -d /p -H :authority: api.demo.mesh.test --log-file /l http://10.96.0.60:18081/x"
	if got := strings.Join(a, " "); got != want {
		t.Errorf("args\n got %s\nwant %s", got, want)
	}
	closed, err := HTTPLoad{URL: "http://x/", Conns: 4, Duration: 5 * time.Second}.Args()
	if err != nil || slices.Contains(closed, "--rps") {
		t.Errorf("closed loop: %v, %v (want no --rps)", closed, err)
	}
	for _, bad := range []HTTPLoad{{URL: "u", Conns: 0, Duration: time.Second}, {URL: "u", Conns: 3, RPS: 1000, Duration: time.Second}, {URL: "u", Conns: 1, Duration: time.Millisecond}} {
		if _, err := bad.Args(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestParseH2Summary(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "h2load-paced.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseH2Summary(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := H2Summary{Seconds: 15, RPS: 999.87, Total: 14998, Succeeded: 14996, Failed: 2, Timeout: 2, Status2: 14996}
	if s != want {
		t.Errorf("summary = %+v, want %+v", s, want)
	}
	ms, err := ParseH2Summary("finished in 60.45ms, 330.87 req/s, 30.24KB/s\nrequests: 20 total, 20 started, 20 done, 20 succeeded, 0 failed, 0 errored, 0 timeout\n")
	if err != nil || math.Abs(ms.Seconds-0.06045) > 1e-9 {
		t.Errorf("ms duration: %+v, %v", ms, err)
	}
	if _, err := ParseH2Summary("connect: Connection refused\n"); err == nil || !strings.Contains(err.Error(), "finished in") {
		t.Errorf("no summary: err = %v", err)
	}
}

func TestParseH2Log(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "h2load.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lat, bad, err := ParseH2Log(f)
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{4105 * time.Microsecond, 8829 * time.Microsecond, 120 * time.Microsecond}
	if !slices.Equal(lat, want) || bad != 1 {
		t.Errorf("latencies %v, bad %d; want %v, 1 (the 503)", lat, bad, want)
	}
	if _, _, err := ParseH2Log(strings.NewReader("1\t200\t5\n2 200 6\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("malformed line: err = %v", err)
	}
}

func TestIperf3ArgsAndParse(t *testing.T) {
	a, err := StreamLoad{Host: "10.96.0.63", Port: 18082, UDP: true, Len: 1400, Duration: 5 * time.Second}.Args()
	if err != nil || strings.Join(a, " ") != "-c 10.96.0.63 -p 18082 -t 5 -J -u -b 0 -l 1400" {
		t.Errorf("UDP args %v, %v", a, err)
	}
	if _, err := (StreamLoad{Host: "h", Port: 1, UDP: true, Duration: time.Second}).Args(); err == nil {
		t.Error("UDP without a datagram length: no error")
	}
	tcp, err := os.ReadFile(filepath.Join("testdata", "iperf3-tcp.json"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := ParseIperf3(tcp, false)
	if err != nil {
		t.Fatal(err)
	}
	if int(r.Mbps) != 7314 || int(r.SentMbps) != 7349 {
		t.Errorf("TCP: %+v, want the receiver's 7314 Mbit/s and the sender's 7349", r)
	}
	udp, err := os.ReadFile(filepath.Join("testdata", "iperf3-udp.json"))
	if err != nil {
		t.Fatal(err)
	}
	u, err := ParseIperf3(udp, true)
	if err != nil {
		t.Fatal(err)
	}
	if int(u.Mbps) != 94 || u.LossPercent != 0 {
		t.Errorf("UDP: %+v", u)
	}
	if _, err := ParseIperf3([]byte(`{"error":"unable to connect to server: Connection refused"}`), false); err == nil || !strings.Contains(err.Error(), "Connection refused") {
		t.Errorf("iperf3 error: err = %v", err)
	}
	if _, err := ParseIperf3([]byte(`{"end":{}}`), true); err == nil || !strings.Contains(err.Error(), "lost_percent") {
		t.Errorf("UDP without loss: err = %v", err)
	}
}

func TestProcParsers(t *testing.T) {
	stat := []byte("4242 (nginx: worker (x)) S 4240 4240 4240 0 -1 4194560 120 0 0 0 7 3 0 0 20 0 1 0 100 1000 200")
	if p, err := ParsePPID(stat); err != nil || p != 4240 {
		t.Errorf("ParsePPID = %d, %v; want 4240 (the command holds parentheses)", p, err)
	}
	rss, err := ParseRSS([]byte("Name:\tnginx\nVmRSS:\t   10240 kB\nThreads:\t1\n"))
	if err != nil || rss != 10240<<10 {
		t.Errorf("ParseRSS = %d, %v", rss, err)
	}
	if _, err := ParseRSS([]byte("Name:\tx\n")); err == nil || !strings.Contains(err.Error(), "VmRSS") {
		t.Errorf("no VmRSS: err = %v", err)
	}
}

// TestTreeFollowsChildren reads a fake /proc: nginx's master and its two
// workers are the proxy; an unrelated process is not.
func TestTreeFollowsChildren(t *testing.T) {
	proc := t.TempDir()
	for pid, line := range map[string]string{
		"10": "10 (nginx) S 1 10 10 0 -1 0 0 0 0 0 100 50 0 0 20 0 1 0 1 1 1",
		"11": "11 (nginx) S 10 10 10 0 -1 0 0 0 0 0 300 100 0 0 20 0 1 0 1 1 1",
		"12": "12 (nginx) S 10 10 10 0 -1 0 0 0 0 0 200 100 0 0 20 0 1 0 1 1 1",
		"20": "20 (other) S 1 20 20 0 -1 0 0 0 0 0 999 999 0 0 20 0 1 0 1 1 1",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "status"), []byte("VmRSS:\t1024 kB\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := ReadUsage(proc, 10)
	if err != nil {
		t.Fatal(err)
	}
	// (100+50 + 300+100 + 200+100) ticks of 10 ms.
	if u.Procs != 3 || u.CPU != 8500*time.Millisecond || u.RSS != 3<<20 {
		t.Errorf("usage = %+v, want 3 processes, 8.5s, 3 MiB", u)
	}
	if _, err := ReadUsage(proc, 99); err == nil {
		t.Error("a proxy that is gone: no error")
	}
}

func TestRelateAgainstDirect(t *testing.T) {
	rows := []Row{
		{Name: "direct", Paced: &HTTPRun{Latency: Latency{P50: 200, P90: 300, P99: 500}}, Closed: &HTTPRun{Latency: Latency{P50: 100}}},
		{Name: "mesh-h2", Paced: &HTTPRun{Latency: Latency{P50: 700, P90: 900, P99: 1500}}, Closed: &HTTPRun{Latency: Latency{P50: 400}}},
		{Name: "tcp-direct", Kind: KindTCP, Stream: &StreamRow{Mbps: 1000}},
		{Name: "tcp-mesh", Kind: KindTCP, Stream: &StreamRow{Mbps: 600}},
		{Name: "udp-direct", Kind: KindUDP, Stream: &StreamRow{Mbps: 800}},
		{Name: "udp-mesh", Kind: KindUDP, Stream: &StreamRow{Mbps: 400}},
	}
	relate(rows)
	if rows[0].Paced.Added != nil {
		t.Error("direct has an added latency over itself")
	}
	if a := rows[1].Paced.Added; a == nil || *a != (Added{P50: 500, P90: 600, P99: 1000}) {
		t.Errorf("mesh-h2 added = %+v", a)
	}
	if rows[3].Stream.OfDirect != 0.6 || rows[5].Stream.OfDirect != 0.5 || rows[2].Stream.OfDirect != 0 {
		t.Errorf("of direct: tcp %g, udp %g, direct %g", rows[3].Stream.OfDirect, rows[5].Stream.OfDirect, rows[2].Stream.OfDirect)
	}
}

func TestHistoryRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), HistoryFile)
	if h, err := ReadHistory(path); err != nil || h != nil {
		t.Fatalf("missing history: %v, %v", h, err)
	}
	r := &Report{Run: "r1", Start: time.Date(2026, 12, 1, 16, 0, 0, 0, time.UTC), Rows: []Row{
		{Name: "mesh-h2", Paced: &HTTPRun{AchievedRPS: 999, Added: &Added{P90: 500, P99: 800}}, Closed: &HTTPRun{AchievedRPS: 3000},
			Proxies: []ProxyCost{{PerThousand: 0.1}, {PerThousand: 0.15}}},
	}}
	for range 2 {
		if err := AppendHistory(path, r.Entry()); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ReadHistory(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].Rows[0].PerThousand != 0.25 || h[1].Rows[0].AddedP99 != 800 || h[1].Rows[0].ClosedRPS != 3000 {
		t.Errorf("history = %+v", h)
	}
	if err := os.WriteFile(path, []byte("{\"run\":1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadHistory(path); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("bad history: err = %v", err)
	}
}

func TestSumCounterSelectsByPrefix(t *testing.T) {
	body := `# HELP aether_proxy_http_requests_total HTTP requests.
# TYPE aether_proxy_http_requests_total counter
aether_proxy_http_requests_total{cluster="h2:api.demo",code="200",flags="-",listener="http-outbound~demo~web-0"} 120
aether_proxy_http_requests_total{cluster="quic:web.demo|api.demo|8080",code="200",flags="-",listener="http-outbound~demo~web-0"} 30
aether_proxy_http_requests_total{cluster="quic:web.demo|api.demo|8080",code="503",flags="UH",listener="http-outbound~demo~web-0"} 2
aether_proxy_http_requests_total{cluster="quic:batch.demo|api.demo|8080",code="200",flags="-",listener="http-outbound~demo~batch-0"} 7
`
	sel := Selector{Metric: "aether_proxy_http_requests_total", Equal: map[string]string{"listener": "http-outbound~demo~web-0"}, Prefix: map[string]string{"cluster": "quic:"}}
	if v, err := SumCounter(body, sel); err != nil || v != 32 {
		t.Errorf("quic: = %g, %v; want 32 (web-0's twins only)", v, err)
	}
	sel.Prefix["cluster"] = "h2:"
	if v, err := SumCounter(body, sel); err != nil || v != 120 {
		t.Errorf("h2: = %g, %v; want 120", v, err)
	}
	if v, err := SumCounter(body, Selector{Metric: "aether_proxy_tcp_connections_total"}); err != nil || v != 0 {
		t.Errorf("absent metric = %g, %v; want 0", v, err)
	}
	if _, err := SumCounter("metric{ 1\n", sel); err == nil {
		t.Error("malformed metrics: no error")
	}
}

func TestVersionsNamesAFailure(t *testing.T) {
	v := Versions(t.Context(), []Tool{{Program: "aether-no-such-tool", Package: "x"}})
	if !strings.HasPrefix(v["aether-no-such-tool"], "unknown (") {
		t.Errorf("a missing tool's version = %q, want it marked unknown with the error", v["aether-no-such-tool"])
	}
}
