// Package gen builds the recorded-soak fixtures; see the fixturegen command.
package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/pprof/profile"
	"sigs.k8s.io/yaml"

	"github.com/aether-mesh/aether/soak/manifest"
)

// counter is a raw Prometheus counter sampled every step from t0.
type counter struct {
	labels map[string]string
	t0     time.Time
	step   time.Duration
	vals   []float64
}

// newCounter accumulates inc(i, t) for the interval ending at each sample
// after the first; reset(t) true restarts the count from zero at that
// sample, as a restarted process does.
func newCounter(labels map[string]string, from, to time.Time, step time.Duration, start float64,
	inc func(t time.Time) float64, reset func(t time.Time) bool) counter {
	c := counter{labels: labels, t0: from, step: step}
	v := start
	for t := from; !t.After(to); t = t.Add(step) {
		if t.After(from) {
			d := inc(t)
			if reset != nil && reset(t) {
				v = d
			} else {
				v += d
			}
		}
		c.vals = append(c.vals, v)
	}
	return c
}

func writeProm(path string, cs []counter) error {
	type result struct {
		Metric map[string]string `json:"metric"`
		Values [][2]any          `json:"values"`
	}
	var rs []result
	for _, c := range cs {
		r := result{Metric: c.labels}
		for i, v := range c.vals {
			ts := c.t0.Add(time.Duration(i) * c.step).Unix()
			r.Values = append(r.Values, [2]any{json.Number(strconv.FormatInt(ts, 10)), strconv.FormatFloat(v, 'f', -1, 64)})
		}
		rs = append(rs, r)
	}
	doc := map[string]any{"status": "success", "data": map[string]any{"resultType": "matrix", "result": rs}}
	return writeJSON(path, doc, false)
}

func writeJSON(path string, v any, indent bool) error {
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(v, "", "  ")
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		return fmt.Errorf("failed to encode %s: %w", path, err)
	}
	return writeFile(path, append(b, '\n'))
}

func writeFile(path string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", path, err)
	}
	return nil
}

func writeManifest(path, header string, m *manifest.Manifest) error {
	b, err := yaml.Marshal(m)
	if err != nil {
		return fmt.Errorf("failed to encode manifest %s: %w", path, err)
	}
	var out bytes.Buffer
	for _, line := range bytes.Split([]byte(header), []byte("\n")) {
		out.WriteString("# ")
		out.Write(line)
		out.WriteString("\n")
	}
	out.Write(b)
	return writeFile(path, out.Bytes())
}

// frame is one stack of a synthetic proxy profile with its share of CPU.
type frame struct {
	stack  []string // leaf first, as pprof stores it
	weight float64
}

var h2Frames = []frame{
	{[]string{"nghttp2_session_mem_recv", "Envoy::Http::Http2::ConnectionImpl::dispatch", "Envoy::Network::ConnectionImpl::onRead", "event_base_loop"}, 0.20},
	{[]string{"aes_gcm_enc_update", "SSL_write", "Envoy::Extensions::TransportSockets::Tls::SslSocket::doWrite", "Envoy::Network::ConnectionImpl::onWriteReady", "event_base_loop"}, 0.18},
	{[]string{"aes_gcm_dec_update", "SSL_read", "Envoy::Extensions::TransportSockets::Tls::SslSocket::doRead", "Envoy::Network::ConnectionImpl::onRead", "event_base_loop"}, 0.17},
	{[]string{"Envoy::Router::Filter::decodeHeaders", "Envoy::Http::FilterManager::decodeHeaders", "Envoy::Http::ConnectionManagerImpl::ActiveStream::decodeHeaders", "event_base_loop"}, 0.25},
	{[]string{"__sendmsg", "Envoy::Network::IoSocketHandleImpl::writev", "Envoy::Network::ConnectionImpl::onWriteReady", "event_base_loop"}, 0.20},
}

var h3Frames = []frame{
	{[]string{"quic::QuicConnection::ProcessUdpPacket", "Envoy::Quic::EnvoyQuicClientConnection::processPacket", "Envoy::Network::Utility::readFromSocket", "event_base_loop"}, 0.22},
	{[]string{"aes_gcm_enc_update", "quic::Aes128GcmEncrypter::EncryptPacket", "quic::QuicFramer::EncryptPayload", "quic::QuicConnection::WritePacket", "event_base_loop"}, 0.17},
	{[]string{"aes_gcm_dec_update", "quic::Aes128GcmDecrypter::DecryptPacket", "quic::QuicFramer::DecryptPayload", "quic::QuicConnection::ProcessUdpPacket", "event_base_loop"}, 0.16},
	{[]string{"Envoy::Router::Filter::decodeHeaders", "Envoy::Http::FilterManager::decodeHeaders", "Envoy::Http::ConnectionManagerImpl::ActiveStream::decodeHeaders", "event_base_loop"}, 0.21},
	{[]string{"__sendmmsg", "Envoy::Quic::UdpGsoBatchWriter::Flush", "quic::QuicConnection::WritePacket", "event_base_loop"}, 0.14},
	{[]string{"__recvmmsg", "Envoy::Network::Utility::readPacketsFromSocket", "Envoy::Quic::EnvoyQuicClientConnection::onFileEvent", "event_base_loop"}, 0.10},
}

const profilePeriod = int64(10 * time.Millisecond)

// writeCPUProfile writes a pprof CPU profile of cpuSeconds spread over
// frames, taken from start for d.
func writeCPUProfile(path string, frames []frame, start time.Time, d time.Duration, cpuSeconds float64, rng *rand.Rand) error {
	p := &profile.Profile{
		SampleType:    []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType:    &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:        profilePeriod,
		TimeNanos:     start.UnixNano(),
		DurationNanos: int64(d),
	}
	funcs := map[string]*profile.Function{}
	locs := map[string]*profile.Location{}
	loc := func(name string) *profile.Location {
		if l, ok := locs[name]; ok {
			return l
		}
		f := &profile.Function{ID: uint64(len(funcs) + 1), Name: name, SystemName: name, Filename: "envoy"}
		funcs[name] = f
		p.Function = append(p.Function, f)
		l := &profile.Location{ID: uint64(len(locs) + 1), Address: 0x400000 + uint64(len(locs))*0x40, Line: []profile.Line{{Function: f}}}
		locs[name] = l
		p.Location = append(p.Location, l)
		return l
	}
	total := int64(math.Round(cpuSeconds * 1e9))
	left := total
	for i, fr := range frames {
		ns := int64(math.Round(float64(total) * fr.weight * (1 + 0.01*(rng.Float64()-0.5))))
		if i == len(frames)-1 {
			ns = left
		}
		left -= ns
		s := &profile.Sample{Value: []int64{ns / profilePeriod, ns}}
		for _, name := range fr.stack {
			s.Location = append(s.Location, loc(name))
		}
		p.Sample = append(p.Sample, s)
	}
	if err := p.CheckValid(); err != nil {
		return fmt.Errorf("profile %s: %w", path, err)
	}
	var buf bytes.Buffer
	if err := p.Write(&buf); err != nil {
		return fmt.Errorf("failed to encode profile %s: %w", path, err)
	}
	return writeFile(path, buf.Bytes())
}

// k6Point is one line of k6 --out json.
func k6Point(metric string, t time.Time, value float64, tags map[string]string) map[string]any {
	return map[string]any{"type": "Point", "metric": metric, "data": map[string]any{
		"time": t.Format(time.RFC3339Nano), "value": value, "tags": tags}}
}

func k6MetricLine(name, typ, contains string) map[string]any {
	return map[string]any{"type": "Metric", "metric": name, "data": map[string]any{
		"name": name, "type": typ, "contains": contains, "thresholds": []string{}, "submetrics": nil}}
}

func writeLines(path string, lines []map[string]any) error {
	var buf bytes.Buffer
	for _, l := range lines {
		b, err := json.Marshal(l)
		if err != nil {
			return fmt.Errorf("failed to encode a line of %s: %w", path, err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return writeFile(path, buf.Bytes())
}

func k6Tags(status string, url string) map[string]string {
	return map[string]string{
		"expected_response": "false", "group": "", "method": "GET", "name": url, "proto": "HTTP/1.1",
		"scenario": "mesh", "status": status, "url": url,
	}
}
