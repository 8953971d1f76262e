package evidence

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Point is one sample of a series.
type Point struct {
	T time.Time
	V float64
}

// Series is one Prometheus time series of raw counter samples.
type Series struct {
	Labels map[string]string
	Points []Point
}

// Matrix is a Prometheus /api/v1/query_range answer.
type Matrix struct {
	Source string
	Series []Series
}

// LoadPromMatrix reads the JSON body of a Prometheus query_range call. The
// query must return raw counters (no rate()): resets are handled here,
// where the window boundaries are known, and not by an extrapolating
// function whose answer depends on the step.
func LoadPromMatrix(path string) (Matrix, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Matrix{}, fmt.Errorf("failed to read Prometheus query_range result: %w", err)
	}
	return ParsePromMatrix(path, b)
}

// ParsePromMatrix is LoadPromMatrix on bytes already read.
func ParsePromMatrix(name string, b []byte) (Matrix, error) {
	var doc struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      *struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string   `json:"metric"`
				Values [][]json.RawMessage `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return Matrix{}, fieldErr(name, 0, "(document)", "not a Prometheus API response", err)
	}
	if doc.Status != "success" {
		return Matrix{}, fieldErr(name, 0, "status", fmt.Sprintf("%q (%s: %s)", doc.Status, doc.ErrorType, doc.Error), nil)
	}
	if doc.Data == nil {
		return Matrix{}, fieldErr(name, 0, "data", "missing", nil)
	}
	if doc.Data.ResultType != "matrix" {
		return Matrix{}, fieldErr(name, 0, "data.resultType", fmt.Sprintf("%q: a query_range answer is a matrix", doc.Data.ResultType), nil)
	}
	m := Matrix{Source: name}
	for i, r := range doc.Data.Result {
		s := Series{Labels: r.Metric}
		for j, pair := range r.Values {
			field := fmt.Sprintf("data.result[%d].values[%d]", i, j)
			if len(pair) != 2 {
				return Matrix{}, fieldErr(name, 0, field, fmt.Sprintf("%d element(s), want [timestamp, \"value\"]", len(pair)), nil)
			}
			var ts float64
			if err := json.Unmarshal(pair[0], &ts); err != nil {
				return Matrix{}, fieldErr(name, 0, field+"[0]", "timestamp is not a number", err)
			}
			var vs string
			if err := json.Unmarshal(pair[1], &vs); err != nil {
				return Matrix{}, fieldErr(name, 0, field+"[1]", "value is not a string", err)
			}
			v, err := strconv.ParseFloat(vs, 64)
			if err != nil {
				return Matrix{}, fieldErr(name, 0, field+"[1]", "value is not a number", err)
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				return Matrix{}, fieldErr(name, 0, field+"[1]", fmt.Sprintf("%s is not a counter value", vs), nil)
			}
			t := time.UnixMilli(int64(math.Round(ts * 1000))).UTC()
			if n := len(s.Points); n > 0 && !t.After(s.Points[n-1].T) {
				return Matrix{}, fieldErr(name, 0, field+"[0]", "timestamps do not increase", nil)
			}
			s.Points = append(s.Points, Point{T: t, V: v})
		}
		m.Series = append(m.Series, s)
	}
	return m, nil
}

// Select returns the series whose labels include every pair in match; a
// selector that matches nothing is an error, since summing nothing would
// read as a measured zero.
func (m Matrix) Select(match map[string]string) ([]Series, error) {
	var out []Series
	for _, s := range m.Series {
		ok := true
		for k, v := range match {
			if s.Labels[k] != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no series matches %s (of %d series)", m.Source, FormatMatch(match), len(m.Series))
	}
	return out, nil
}

// FormatMatch renders a label selector the way PromQL does.
func FormatMatch(match map[string]string) string {
	keys := make([]string, 0, len(match))
	for k := range match {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%q", k, match[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Increase sums, over the series, how much each counter grew in (from, to].
// A sample lower than its predecessor is a reset (the process restarted
// and counted from zero), so the growth across it is the new value. A
// series that first appears inside the interval started from zero too.
//
// Growth is attributed to the interval holding the later sample; with
// window boundaries on sample times, as the manifest requires, nothing is
// interpolated.
func Increase(series []Series, from, to time.Time) float64 {
	total := 0.0
	for _, s := range series {
		var prev *Point
		for i := range s.Points {
			p := s.Points[i]
			if p.T.After(to) {
				break
			}
			if p.T.After(from) {
				switch {
				case prev == nil:
					total += p.V
				case p.V >= prev.V:
					total += p.V - prev.V
				default:
					total += p.V
				}
			}
			prev = &s.Points[i]
		}
	}
	return total
}

// Covers reports whether every series has a sample at or before from and
// at or after to, so that Increase over the interval saw all of it.
func Covers(series []Series, from, to time.Time) bool {
	if len(series) == 0 {
		return false
	}
	for _, s := range series {
		if len(s.Points) == 0 || s.Points[0].T.After(from) || s.Points[len(s.Points)-1].T.Before(to) {
			return false
		}
	}
	return true
}

// Steps returns the increase per step from start to end: the timeline a
// report plots.
func Steps(series []Series, start, end time.Time, step time.Duration) []Point {
	var out []Point
	for t := start; t.Before(end); t = t.Add(step) {
		u := t.Add(step)
		if u.After(end) {
			u = end
		}
		out = append(out, Point{T: u, V: Increase(series, t, u)})
	}
	return out
}
