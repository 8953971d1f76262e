package evidence

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

const (
	ShapeVegetaJSON = "vegeta results (json)"
	ShapeVegetaCSV  = "vegeta results (csv)"
)

// LoadVegeta reads vegeta results as `vegeta encode --to json` or
// `--to csv` writes them; the format is told by the first byte. A request
// failed, as vegeta's own report counts it, when it carries an error or
// its code is outside [200, 400).
func LoadVegeta(path string) (LoadRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return LoadRun{}, fmt.Errorf("failed to read vegeta results: %w", err)
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return LoadRun{}, fieldErr(path, 0, "(document)", "empty: no results", nil)
	}
	var run LoadRun
	if trimmed[0] == '{' {
		run, err = parseVegetaJSON(path, b)
	} else {
		run, err = parseVegetaCSV(path, b)
	}
	if err != nil {
		return LoadRun{}, err
	}
	if run.Total == 0 {
		return LoadRun{}, fieldErr(path, 0, "(document)", "no results", nil)
	}
	return run, nil
}

func vegetaFailed(code int, errText string) bool {
	return errText != "" || code < 200 || code >= 400
}

func parseVegetaJSON(path string, b []byte) (LoadRun, error) {
	run := LoadRun{Source: path, Shape: ShapeVegetaJSON, Timed: true}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r struct {
			Code      *int       `json:"code"`
			Timestamp *time.Time `json:"timestamp"`
			Error     string     `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return LoadRun{}, fieldErr(path, line, "(line)", "not a vegeta result object", err)
		}
		if r.Timestamp == nil {
			return LoadRun{}, fieldErr(path, line, "timestamp", "missing", nil)
		}
		if r.Code == nil {
			return LoadRun{}, fieldErr(path, line, "code", "missing", nil)
		}
		run.Total++
		if vegetaFailed(*r.Code, r.Error) {
			run.Failed++
			run.Failures = append(run.Failures, Failure{Time: *r.Timestamp, Status: *r.Code, Error: r.Error})
		}
	}
	if err := sc.Err(); err != nil {
		return LoadRun{}, fmt.Errorf("failed to read %s after line %d: %w", path, line, err)
	}
	return run, nil
}

// vegeta's CSV columns: timestamp (unix ns), code, latency (ns), bytes out,
// bytes in, error, body (base64), attack, seq, method, url, headers.
func parseVegetaCSV(path string, b []byte) (LoadRun, error) {
	run := LoadRun{Source: path, Shape: ShapeVegetaCSV, Timed: true}
	r := csv.NewReader(bytes.NewReader(b))
	r.FieldsPerRecord = -1
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		line, _ := r.FieldPos(0)
		if err != nil {
			return LoadRun{}, fieldErr(path, line, "(record)", "not CSV", err)
		}
		if len(rec) < 6 {
			return LoadRun{}, fieldErr(path, line, "(record)", fmt.Sprintf("%d column(s), vegeta writes at least 6", len(rec)), nil)
		}
		ns, err := strconv.ParseInt(rec[0], 10, 64)
		if err != nil {
			return LoadRun{}, fieldErr(path, line, "timestamp", "not unix nanoseconds", err)
		}
		code, err := strconv.Atoi(rec[1])
		if err != nil {
			return LoadRun{}, fieldErr(path, line, "code", "not an integer", err)
		}
		run.Total++
		if vegetaFailed(code, rec[5]) {
			run.Failed++
			run.Failures = append(run.Failures, Failure{Time: time.Unix(0, ns).UTC(), Status: code, Error: rec[5]})
		}
	}
	return run, nil
}
