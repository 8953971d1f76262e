package evidence

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strconv"
	"time"
)

// k6 writes its end-of-test summary in three shapes:
//
//   - the object handed to handleSummary(data) and written with
//     JSON.stringify(data): metrics.<name> = {type, contains, values{...}};
//   - the older --summary-export file: metrics.<name> holds the values
//     directly ({count, rate} for a counter, {passes, fails, value} for a
//     rate);
//   - the versioned machine-readable summary (--new-machine-readable-summary,
//     k6 ≥ 1.5): {version, metadata, config, results{metrics: [{name, type,
//     values}]}}.
//
// In every shape http_req_failed is a rate metric whose "passes" are the
// requests for which the metric was true, that is, the FAILED requests
// (grafana/k6#2386). Reading passes as successes inverts a soak's verdict.
const (
	ShapeK6HandleSummary = "k6 handleSummary"
	ShapeK6SummaryExport = "k6 --summary-export"
	ShapeK6Versioned     = "k6 machine-readable summary"
	ShapeK6JSONLines     = "k6 --out json"
)

// LoadK6Summary reads a k6 end-of-test summary in any of its three shapes.
func LoadK6Summary(path string) (LoadRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return LoadRun{}, fmt.Errorf("failed to read k6 summary: %w", err)
	}
	return ParseK6Summary(path, b)
}

// ParseK6Summary is LoadK6Summary on bytes already read; name is used in
// errors.
func ParseK6Summary(name string, b []byte) (LoadRun, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return LoadRun{}, fieldErr(name, 0, "(document)", "not a JSON object", err)
	}
	if v, ok := top["version"]; ok {
		return parseK6Versioned(name, v, b)
	}
	rawMetrics, ok := top["metrics"]
	if !ok {
		return LoadRun{}, fieldErr(name, 0, "metrics", "missing: not a k6 summary", nil)
	}
	var metrics map[string]json.RawMessage
	if err := json.Unmarshal(rawMetrics, &metrics); err != nil {
		return LoadRun{}, fieldErr(name, 0, "metrics", "not an object", err)
	}
	reqs, ok := metrics["http_reqs"]
	if !ok {
		return LoadRun{}, fieldErr(name, 0, "metrics.http_reqs", "missing: the summary has no request count", nil)
	}
	var probe struct {
		Type   *string         `json:"type"`
		Values json.RawMessage `json:"values"`
	}
	if err := json.Unmarshal(reqs, &probe); err != nil {
		return LoadRun{}, fieldErr(name, 0, "metrics.http_reqs", "not an object", err)
	}
	shape := ShapeK6SummaryExport
	if probe.Type != nil {
		shape = ShapeK6HandleSummary
	}
	values := func(metric string) (map[string]json.RawMessage, string, error) {
		raw, ok := metrics[metric]
		if !ok {
			return nil, "", fieldErr(name, 0, "metrics."+metric, "missing", nil)
		}
		field := "metrics." + metric
		if shape == ShapeK6HandleSummary {
			var m struct {
				Type   string          `json:"type"`
				Values json.RawMessage `json:"values"`
			}
			if err := json.Unmarshal(raw, &m); err != nil {
				return nil, "", fieldErr(name, 0, field, "not an object", err)
			}
			if m.Values == nil {
				return nil, "", fieldErr(name, 0, field+".values", "missing", nil)
			}
			raw, field = m.Values, field+".values"
		}
		var v map[string]json.RawMessage
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, "", fieldErr(name, 0, field, "not an object", err)
		}
		return v, field, nil
	}
	run := LoadRun{Source: name, Shape: shape}
	rv, field, err := values("http_reqs")
	if err != nil {
		return LoadRun{}, err
	}
	if run.Total, err = count(name, field+".count", rv["count"]); err != nil {
		return LoadRun{}, err
	}
	fv, field, err := values("http_req_failed")
	if err != nil {
		return LoadRun{}, err
	}
	if run.Failed, err = count(name, field+".passes", fv["passes"]); err != nil {
		return LoadRun{}, err
	}
	fails, err := count(name, field+".fails", fv["fails"])
	if err != nil {
		return LoadRun{}, err
	}
	return checkK6Totals(name, field, run, fails)
}

func parseK6Versioned(name string, version json.RawMessage, b []byte) (LoadRun, error) {
	var v string
	if err := json.Unmarshal(version, &v); err != nil {
		return LoadRun{}, fieldErr(name, 0, "version", "not a string", err)
	}
	major, _, _ := bytes.Cut([]byte(v), []byte("."))
	if string(major) != "1" {
		return LoadRun{}, fieldErr(name, 0, "version", fmt.Sprintf("summary schema %q is not supported (only 1.x)", v), nil)
	}
	var doc struct {
		Results *struct {
			Metrics []struct {
				Name   string                     `json:"name"`
				Type   string                     `json:"type"`
				Values map[string]json.RawMessage `json:"values"`
			} `json:"metrics"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return LoadRun{}, fieldErr(name, 0, "results", "malformed", err)
	}
	if doc.Results == nil {
		return LoadRun{}, fieldErr(name, 0, "results", "missing", nil)
	}
	byName := map[string]map[string]json.RawMessage{}
	for i, m := range doc.Results.Metrics {
		if m.Name == "" {
			return LoadRun{}, fieldErr(name, 0, fmt.Sprintf("results.metrics[%d].name", i), "empty", nil)
		}
		byName[m.Name] = m.Values
	}
	run := LoadRun{Source: name, Shape: ShapeK6Versioned}
	rv, ok := byName["http_reqs"]
	if !ok {
		return LoadRun{}, fieldErr(name, 0, "results.metrics[http_reqs]", "missing: the summary has no request count", nil)
	}
	var err error
	if run.Total, err = count(name, "results.metrics[http_reqs].values.count", rv["count"]); err != nil {
		return LoadRun{}, err
	}
	fv, ok := byName["http_req_failed"]
	if !ok {
		return LoadRun{}, fieldErr(name, 0, "results.metrics[http_req_failed]", "missing", nil)
	}
	const f = "results.metrics[http_req_failed].values"
	if run.Failed, err = count(name, f+".passes", fv["passes"]); err != nil {
		return LoadRun{}, err
	}
	fails, err := count(name, f+".fails", fv["fails"])
	if err != nil {
		return LoadRun{}, err
	}
	return checkK6Totals(name, f, run, fails)
}

func checkK6Totals(name, field string, run LoadRun, fails int64) (LoadRun, error) {
	if run.Failed+fails != run.Total {
		return LoadRun{}, fieldErr(name, 0, field,
			fmt.Sprintf("passes (%d failed) + fails (%d succeeded) = %d, but http_reqs.count = %d", run.Failed, fails, run.Failed+fails, run.Total), nil)
	}
	return run, nil
}

func count(file, field string, raw json.RawMessage) (int64, error) {
	if raw == nil {
		return 0, fieldErr(file, 0, field, "missing", nil)
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fieldErr(file, 0, field, "not a number", err)
	}
	if f < 0 || f != math.Trunc(f) || f > 1<<53 {
		return 0, fieldErr(file, 0, field, fmt.Sprintf("%v is not a count", f), nil)
	}
	return int64(f), nil
}

// LoadK6JSONLines reads a k6 --out json file: one Metric or Point object
// per line. Every http_req_failed point with value 1 is a failed request at
// its time; the total is the number of http_req_failed points. A file
// filtered to failed requests (jq 'select(.metric=="http_req_failed" and
// .data.value==1)') therefore yields the failures and a total equal to them;
// combine it with the summary through WithTimeline.
func LoadK6JSONLines(path string) (LoadRun, error) {
	f, err := os.Open(path)
	if err != nil {
		return LoadRun{}, fmt.Errorf("failed to open k6 json output: %w", err)
	}
	defer f.Close()
	run := LoadRun{Source: path, Shape: ShapeK6JSONLines, Timed: true}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	line := 0
	for sc.Scan() {
		line++
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var rec struct {
			Type   string `json:"type"`
			Metric string `json:"metric"`
			Data   struct {
				Time  *time.Time        `json:"time"`
				Value *float64          `json:"value"`
				Tags  map[string]string `json:"tags"`
			} `json:"data"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return LoadRun{}, fieldErr(path, line, "(line)", "not a k6 JSON output object", err)
		}
		switch rec.Type {
		case "Metric":
			continue
		case "Point":
		default:
			return LoadRun{}, fieldErr(path, line, "type", fmt.Sprintf("%q is neither Metric nor Point", rec.Type), nil)
		}
		if rec.Metric != "http_req_failed" {
			continue
		}
		if rec.Data.Time == nil {
			return LoadRun{}, fieldErr(path, line, "data.time", "missing", nil)
		}
		if rec.Data.Value == nil {
			return LoadRun{}, fieldErr(path, line, "data.value", "missing", nil)
		}
		run.Total++
		switch *rec.Data.Value {
		case 0:
			continue
		case 1:
		default:
			return LoadRun{}, fieldErr(path, line, "data.value", fmt.Sprintf("%v: a rate point is 0 or 1", *rec.Data.Value), nil)
		}
		fl := Failure{Time: *rec.Data.Time, Error: rec.Data.Tags["error_code"]}
		if s := rec.Data.Tags["status"]; s != "" {
			if fl.Status, err = strconv.Atoi(s); err != nil {
				return LoadRun{}, fieldErr(path, line, "data.tags.status", "not an HTTP status", err)
			}
		}
		run.Failed++
		run.Failures = append(run.Failures, fl)
	}
	if err := sc.Err(); err != nil {
		return LoadRun{}, fmt.Errorf("failed to read %s after line %d: %w", path, line, err)
	}
	if run.Total == 0 {
		return LoadRun{}, fieldErr(path, 0, "http_req_failed", "no points: the file records no requests", nil)
	}
	return run, nil
}
