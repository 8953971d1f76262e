package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// HTTPLoad is one h2load run: HTTP/1.1, Conns connections, each paced at
// RPS/Conns requests per second (RPS zero: closed loop, as fast as the
// answers come), for Duration, each request a POST of the payload file.
type HTTPLoad struct {
	URL, Authority string
	Conns          int
	RPS            int
	Duration       time.Duration
	Payload        string
	LogFile        string
}

// Args is h2load's command line for l.
func (l HTTPLoad) Args() ([]string, error) {
	if l.Conns < 1 {
		return nil, fmt.Errorf("h2load: %d connections, want at least 1", l.Conns)
	}
	if l.RPS < 0 || (l.RPS > 0 && l.RPS%l.Conns != 0) {
		return nil, fmt.Errorf("h2load: %d rps over %d connections: the rate must be a non-negative multiple of the connections (h2load paces each connection)", l.RPS, l.Conns)
	}
	if l.Duration < time.Second {
		return nil, fmt.Errorf("h2load: duration %s, want at least 1s", l.Duration)
	}
	a := []string{"--h1", "-t", "1", "-c", strconv.Itoa(l.Conns), "-m", "1",
		"-D", strconv.Itoa(int(l.Duration / time.Second))}
	if l.RPS > 0 {
		a = append(a, "--rps", strconv.Itoa(l.RPS/l.Conns))
	}
	if l.Payload != "" {
		a = append(a, "-d", l.Payload)
	}
	if l.Authority != "" {
		a = append(a, "-H", ":authority: "+l.Authority)
	}
	if l.LogFile != "" {
		a = append(a, "--log-file", l.LogFile)
	}
	return append(a, l.URL), nil
}

// H2Summary is what h2load prints at the end of a run.
type H2Summary struct {
	Seconds                   float64
	RPS                       float64
	Total, Succeeded, Failed  int
	Errored, Timeout, Status2 int
}

var (
	reFinished = regexp.MustCompile(`(?m)^finished in ([0-9.]+)(us|ms|s), ([0-9.]+) req/s`)
	reRequests = regexp.MustCompile(`(?m)^requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	reStatus   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx`)
)

// ParseH2Summary reads h2load's standard output.
func ParseH2Summary(out string) (H2Summary, error) {
	var s H2Summary
	m := reFinished.FindStringSubmatch(out)
	if m == nil {
		return s, fmt.Errorf("h2load output: no \"finished in\" line in %q", tailText(out, 5))
	}
	v, _ := strconv.ParseFloat(m[1], 64)
	s.Seconds = v * map[string]float64{"us": 1e-6, "ms": 1e-3, "s": 1}[m[2]]
	s.RPS, _ = strconv.ParseFloat(m[3], 64)
	r := reRequests.FindStringSubmatch(out)
	if r == nil {
		return s, fmt.Errorf("h2load output: no \"requests:\" line in %q", tailText(out, 5))
	}
	ints := make([]int, 5)
	for i := range ints {
		ints[i], _ = strconv.Atoi(r[i+1])
	}
	s.Total, s.Succeeded, s.Failed, s.Errored, s.Timeout = ints[0], ints[1], ints[2], ints[3], ints[4]
	if st := reStatus.FindStringSubmatch(out); st != nil {
		s.Status2, _ = strconv.Atoi(st[1])
	}
	return s, nil
}

// ParseH2Log reads h2load's --log-file: one line per request, its start
// (µs since the epoch), its status and its latency in µs. It returns the
// latencies of the requests answered 2xx and how many were not.
func ParseH2Log(r io.Reader) (lat []time.Duration, bad int, err error) {
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 {
			return nil, 0, fmt.Errorf("h2load log line %d: %d fields, want 3 (start, status, latency)", line, len(f))
		}
		status, err1 := strconv.Atoi(f[1])
		us, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || us < 0 {
			return nil, 0, fmt.Errorf("h2load log line %d: %q is not <start>\\t<status>\\t<µs>", line, sc.Text())
		}
		if status < 200 || status > 299 {
			bad++
			continue
		}
		lat = append(lat, time.Duration(us)*time.Microsecond)
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("h2load log: %w", err)
	}
	return lat, bad, nil
}

// StreamLoad is one iperf3 run: TCP, or UDP unpaced (-b 0) in datagrams of
// Len bytes.
type StreamLoad struct {
	Host     string
	Port     int
	UDP      bool
	Len      int
	Duration time.Duration
}

// Args is iperf3's command line for l (JSON output).
func (l StreamLoad) Args() ([]string, error) {
	if l.Host == "" || l.Port < 1 || l.Port > 65535 {
		return nil, fmt.Errorf("iperf3: target %q port %d", l.Host, l.Port)
	}
	if l.Duration < time.Second {
		return nil, fmt.Errorf("iperf3: duration %s, want at least 1s", l.Duration)
	}
	a := []string{"-c", l.Host, "-p", strconv.Itoa(l.Port), "-t", strconv.Itoa(int(l.Duration / time.Second)), "-J"}
	if l.UDP {
		if l.Len < 1 {
			return nil, fmt.Errorf("iperf3: UDP datagram length %d", l.Len)
		}
		a = append(a, "-u", "-b", "0", "-l", strconv.Itoa(l.Len))
	}
	return a, nil
}

// StreamResult is what the receiving end got.
type StreamResult struct {
	// Mbps is the receiver's rate in Mbit/s.
	Mbps float64 `json:"mbps"`
	// SentMbps is the sender's (UDP: what was offered).
	SentMbps float64 `json:"sent_mbps"`
	// LossPercent is the share of datagrams lost (UDP only).
	LossPercent float64 `json:"loss_percent"`
	Seconds     float64 `json:"seconds"`
}

type iperfSum struct {
	Seconds     float64  `json:"seconds"`
	Bits        float64  `json:"bits_per_second"`
	LostPercent *float64 `json:"lost_percent"`
	Packets     *int64   `json:"packets"`
	Lost        *int64   `json:"lost_packets"`
}

type iperfJSON struct {
	Error string `json:"error"`
	End   struct {
		SumSent     *iperfSum `json:"sum_sent"`
		SumReceived *iperfSum `json:"sum_received"`
		Sum         *iperfSum `json:"sum"`
	} `json:"end"`
}

// ParseIperf3 reads iperf3 -J's output. For TCP the rate is the
// receiver's; for UDP it is the offered rate less the datagrams the
// receiver reported lost.
func ParseIperf3(b []byte, udp bool) (StreamResult, error) {
	var j iperfJSON
	if err := json.Unmarshal(bytes.TrimSpace(b), &j); err != nil {
		return StreamResult{}, fmt.Errorf("iperf3 JSON: %w", err)
	}
	if j.Error != "" {
		return StreamResult{}, fmt.Errorf("iperf3: %s", j.Error)
	}
	e := j.End
	if !udp {
		if e.SumReceived == nil || e.SumSent == nil {
			return StreamResult{}, fmt.Errorf("iperf3 JSON: a TCP run without end.sum_sent and end.sum_received")
		}
		return StreamResult{Mbps: e.SumReceived.Bits / 1e6, SentMbps: e.SumSent.Bits / 1e6, Seconds: e.SumReceived.Seconds}, nil
	}
	if e.Sum == nil || e.Sum.LostPercent == nil {
		return StreamResult{}, fmt.Errorf("iperf3 JSON: a UDP run without end.sum.lost_percent")
	}
	loss := *e.Sum.LostPercent
	sent := e.Sum.Bits
	if e.SumSent != nil {
		sent = e.SumSent.Bits
	}
	rx := sent * (1 - loss/100)
	if e.SumReceived != nil && e.SumReceived.Bits > 0 {
		rx = e.SumReceived.Bits
	}
	return StreamResult{Mbps: rx / 1e6, SentMbps: sent / 1e6, LossPercent: loss, Seconds: e.Sum.Seconds}, nil
}
