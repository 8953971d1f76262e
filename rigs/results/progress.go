package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"
)

// EnvProgress names the file the processes `make gate` runs append their
// progress to, one JSON Event a line, as it happens: each case's row as it
// is recorded, each suite's result as it is written, the soak's figures
// every tick. The gate reads it while they run, so a person sees each
// verdict when it is reached rather than minutes later; unset, nothing is
// announced.
const EnvProgress = "AETHER_PROGRESS"

// Event is one line of the progress file. Exactly one of Case, Written and
// Soak is set.
type Event struct {
	At    time.Time `json:"at"`
	Suite string    `json:"suite,omitempty"`
	// Case is a row as the runner recorded it, before the suite's result
	// is written: the gate judges it by the same rules as the result's.
	Case *CaseResult `json:"case,omitempty"`
	// Written is the path of a suite result just written; the gate reads
	// the file, not a verdict carried here.
	Written string `json:"written,omitempty"`
	// Soak is a running soak's figures.
	Soak *SoakProgress `json:"soak,omitempty"`
}

// SoakProgress is what a running soak has done so far.
type SoakProgress struct {
	Elapsed     time.Duration `json:"elapsed"`
	Planned     time.Duration `json:"planned"`
	WindowsDone int           `json:"windows_done"`
	Windows     int           `json:"windows"`
	// Step is the schedule step running, or the one just done.
	Step         string  `json:"step"`
	Requests     int64   `json:"requests"`
	RequestsFail int64   `json:"requests_failed"`
	Probes       int64   `json:"probes"`
	ProbesFail   int64   `json:"probes_failed"`
	NC           float64 `json:"nc"`
	ProxyExits   int     `json:"proxy_exits"`
}

// Announce appends e to the progress file EnvProgress names, stamped with
// the time now when e has none; it does nothing when the variable is unset.
// Every event is one write to a file opened for appending, so the events of
// the test processes that run side by side do not interleave.
func Announce(e Event) error {
	path := os.Getenv(EnvProgress)
	if path == "" {
		return nil
	}
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("failed to encode a progress event of %s: %w", e.Suite, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("failed to open the progress file (%s): %w", EnvProgress, err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("failed to append to the progress file %s: %w", path, err)
	}
	return nil
}

// ProgressReader reads a progress file as it grows: each Next returns the
// events whose lines are complete since the last call, and keeps a line
// still being written for the next.
type ProgressReader struct {
	Path string
	// Offset is where the next read starts: the file's size skips the
	// events already in it.
	Offset  int64
	partial []byte
}

// Next returns the complete events appended since the last call. A file
// not created yet holds none. A line that is not an event is an error
// naming the file and the offset; the lines after it are still read.
func (p *ProgressReader) Next() ([]Event, error) {
	f, err := os.Open(p.Path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to open the progress file: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(p.Offset, io.SeekStart); err != nil {
		return nil, fmt.Errorf("failed to seek in %s: %w", p.Path, err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("failed to read %s: %w", p.Path, err)
	}
	p.Offset += int64(len(b))
	buf := append(p.partial, b...)
	end := bytes.LastIndexByte(buf, '\n') + 1
	lines, rest := buf[:end], buf[end:]
	p.partial = append([]byte(nil), rest...)
	var (
		out []Event
		bad error
		// buf starts where the kept partial line began.
		from = p.Offset - int64(len(buf))
	)
	for _, line := range bytes.SplitAfter(lines, []byte{'\n'}) {
		at := from
		from += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(line, &e); err != nil {
			bad = fmt.Errorf("%s at byte %d: not a progress event: %w", p.Path, at, err)
			continue
		}
		out = append(out, e)
	}
	return out, bad
}
