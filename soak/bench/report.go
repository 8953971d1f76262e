package bench

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/aether-mesh/aether/rigs/results"
)

// Files a run writes into its folder, and the history beside the folders.
const (
	ReportFile  = "bench.json"
	HTMLFile    = "report.html"
	HistoryFile = "history.jsonl"
)

// Kind is what a row carries: HTTP requests or a stream.
type Kind string

const (
	KindHTTP Kind = "http"
	KindTCP  Kind = "tcp"
	KindUDP  Kind = "udp"
)

// Report is one run of the benchmark.
type Report struct {
	Run   string        `json:"run"`
	Start time.Time     `json:"start"`
	End   time.Time     `json:"end"`
	Build results.Build `json:"build"`
	// CPUs is the machine's CPU count; LoadBefore and LoadAfter its load
	// averages (1, 5, 15 min) when the run began and ended: the machine
	// is shared, and its load weighs on every figure.
	CPUs       int        `json:"cpus"`
	LoadBefore [3]float64 `json:"load_before"`
	LoadAfter  [3]float64 `json:"load_after"`
	Method     Method     `json:"method"`
	// Tools is the version line of each load generator and peer.
	Tools map[string]string `json:"tools"`
	// Order is the visiting order (ABBA).
	Order []string `json:"order"`
	Rows  []Row    `json:"rows"`
	// Scale is the scale curves (nil when the run skipped them).
	Scale *Scale `json:"scale,omitempty"`
}

// Method is the load every HTTP row got and the stream rows' shape.
type Method struct {
	Generator     string  `json:"generator"`
	Conns         int     `json:"conns"`
	RPS           int     `json:"rps"`
	PacedSeconds  float64 `json:"paced_seconds"`
	ClosedSeconds float64 `json:"closed_seconds"`
	PayloadBytes  int     `json:"payload_bytes"`
	StreamTool    string  `json:"stream_tool"`
	StreamSeconds float64 `json:"stream_seconds"`
	UDPLen        int     `json:"udp_len"`
	Threads       int     `json:"peer_threads"`
}

// Row is one path's figures, pooled over its visits.
type Row struct {
	Name string `json:"name"`
	Kind Kind   `json:"kind"`
	Path string `json:"path"`
	// Visits is how many times the row was measured (2 in ABBA).
	Visits int `json:"visits"`
	// Paced is the 1,000 rps run, Closed the closed-loop one (HTTP rows).
	Paced  *HTTPRun `json:"paced,omitempty"`
	Closed *HTTPRun `json:"closed,omitempty"`
	// Stream is the iperf3 run (TCP and UDP rows).
	Stream *StreamRow `json:"stream,omitempty"`
	// Witness says which proxy counter showed the mesh row's traffic on
	// the path it names, and by how much it rose over the visits.
	Witness string `json:"witness,omitempty"`
	// Proxies is each proxy's cost on the row's path (none for direct).
	Proxies []ProxyCost `json:"proxies,omitempty"`
}

// HTTPRun is an h2load run's figures.
type HTTPRun struct {
	TargetRPS   float64 `json:"target_rps,omitempty"`
	AchievedRPS float64 `json:"achieved_rps"`
	Requests    int     `json:"requests"`
	Failed      int     `json:"failed"`
	Latency     Latency `json:"latency"`
	// Added is the latency over the direct row's (nil on direct itself).
	Added *Added `json:"added,omitempty"`
	// VisitP50 is each visit's own median, µs: the spread between visits.
	VisitP50 []float64 `json:"visit_p50_us"`
}

// StreamRow is an iperf3 row's figures.
type StreamRow struct {
	Mbps        float64 `json:"mbps"`
	LossPercent float64 `json:"loss_percent"`
	// OfDirect is Mbps over the direct row's of the same protocol.
	OfDirect float64        `json:"of_direct,omitempty"`
	Visits   []StreamResult `json:"visits"`
}

// ProxyCost is one proxy's CPU and memory on a row.
type ProxyCost struct {
	Name string `json:"name"`
	Node string `json:"node"`
	// VCPU and PerThousand are over the paced runs (HTTP) or the streams;
	// ClosedVCPU and ClosedPerThousand over the closed-loop runs.
	VCPU              float64 `json:"vcpu"`
	PerThousand       float64 `json:"vcpu_per_1000_rps,omitempty"`
	ClosedVCPU        float64 `json:"closed_vcpu,omitempty"`
	ClosedPerThousand float64 `json:"closed_vcpu_per_1000_rps,omitempty"`
	// RSSMiB is the largest resident set seen, over all its processes.
	RSSMiB float64 `json:"rss_mib"`
	Procs  int     `json:"procs"`
}

// Write writes the report into dir.
func (r *Report) Write(dir string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("failed to encode the bench report: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", dir, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ReportFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("failed to write the bench report: %w", err)
	}
	return nil
}

// Load reads a report.
func Load(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench report %s: %w", path, err)
	}
	return &r, nil
}

// HistoryEntry is one run as the trend reads it.
type HistoryEntry struct {
	Run      string       `json:"run"`
	Start    time.Time    `json:"start"`
	Revision string       `json:"revision"`
	Dirty    bool         `json:"dirty"`
	Load1    float64      `json:"load1"`
	Rows     []HistoryRow `json:"rows"`
}

// HistoryRow is one row's headline figures.
type HistoryRow struct {
	Name        string  `json:"name"`
	AchievedRPS float64 `json:"achieved_rps,omitempty"`
	ClosedRPS   float64 `json:"closed_rps,omitempty"`
	AddedP90    float64 `json:"added_p90_us,omitempty"`
	AddedP99    float64 `json:"added_p99_us,omitempty"`
	// PerThousand is both proxies' vCPU per 1,000 rps together.
	PerThousand float64 `json:"vcpu_per_1000_rps,omitempty"`
	Mbps        float64 `json:"mbps,omitempty"`
	OfDirect    float64 `json:"of_direct,omitempty"`
	// HeldRPS and MaxRPS are the scale curves' saturation figures.
	HeldRPS int     `json:"held_rps,omitempty"`
	MaxRPS  float64 `json:"max_rps,omitempty"`
}

// Entry is r's line in the history.
func (r *Report) Entry() HistoryEntry {
	e := HistoryEntry{Run: r.Run, Start: r.Start, Revision: r.Build.Revision, Dirty: r.Build.Dirty, Load1: r.LoadBefore[0]}
	for _, row := range r.Rows {
		h := HistoryRow{Name: row.Name}
		if p := row.Paced; p != nil {
			h.AchievedRPS = p.AchievedRPS
			if p.Added != nil {
				h.AddedP90, h.AddedP99 = p.Added.P90, p.Added.P99
			}
		}
		if c := row.Closed; c != nil {
			h.ClosedRPS = c.AchievedRPS
		}
		for _, pc := range row.Proxies {
			h.PerThousand += pc.PerThousand
		}
		if s := row.Stream; s != nil {
			h.Mbps, h.OfDirect = s.Mbps, s.OfDirect
		}
		if r.Scale != nil {
			for _, s := range r.Scale.Saturation {
				if s.Row == row.Name {
					h.HeldRPS, h.MaxRPS = s.HeldRPS, s.MaxRPS
				}
			}
		}
		e.Rows = append(e.Rows, h)
	}
	return e
}

// AppendHistory adds e as a line of the history file at path.
func AppendHistory(path string, e HistoryEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("failed to encode the history entry: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("bench history: %w", err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("bench history %s: %w", path, err)
	}
	return f.Close()
}

// ReadHistory reads the history file; a missing one is an empty history.
func ReadHistory(path string) ([]HistoryEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("bench history: %w", err)
	}
	defer f.Close()
	var out []HistoryEntry
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	line := 0
	for sc.Scan() {
		line++
		if len(sc.Bytes()) == 0 {
			continue
		}
		var e HistoryEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("bench history %s line %d: %w", path, line, err)
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench history %s: %w", path, err)
	}
	return out, nil
}
