package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// ProbeRecord is one line of a prober's log (probes.jsonl): when the probe
// started, its kind, whether it succeeded and how long it took.
type ProbeRecord struct {
	Time time.Time `json:"time"`
	// Kind is the probe's kind; a log written before probes had kinds
	// holds only the liveness prober's, read as "mesh".
	Kind string `json:"kind"`
	// Pod, when set, is the pod the probe was sent from.
	Pod       string  `json:"pod,omitempty"`
	OK        bool    `json:"ok"`
	Code      int     `json:"code"`
	Error     string  `json:"error,omitempty"`
	LatencyMS float64 `json:"latency_ms"`
}

// Done is when the probe's answer (or its failure) came.
func (p ProbeRecord) Done() time.Time {
	return p.Time.Add(time.Duration(p.LatencyMS * float64(time.Millisecond)))
}

// LoadProbeLog reads a probe log, one JSON object a line. A line that is
// not a probe (no time, an unknown field, a negative latency) is refused
// with its line number.
func LoadProbeLog(path string) ([]ProbeRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read probe log: %w", err)
	}
	defer f.Close()
	var out []ProbeRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		var p ProbeRecord
		if err := dec.Decode(&p); err != nil {
			return nil, fieldErr(path, line, "(line)", "not a probe record", err)
		}
		if p.Time.IsZero() {
			return nil, fieldErr(path, line, "time", "missing", nil)
		}
		if p.LatencyMS < 0 {
			return nil, fieldErr(path, line, "latency_ms", fmt.Sprintf("%v is negative", p.LatencyMS), nil)
		}
		if p.Kind == "" {
			p.Kind = "mesh"
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("failed to read probe log %s: %w", path, err)
	}
	return out, nil
}
