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
// and counted from zero), so the growth across it is the new value.
//
// Both boundaries must be sample times of every series. A series with no
// sample at or before from (it first appears inside the interval) has no
// baseline: its growth there is unknown, and reading its first value as
// growth from zero would count everything it counted before it was first
// scraped. That is a *CoverageError. A boundary that falls between two
// samples would have to give the growth between them to one side or split
// it by a guess; that is a *GridError, naming the samples either side.
func Increase(series []Series, from, to time.Time) (float64, error) {
	if len(series) == 0 {
		return 0, fmt.Errorf("no series to take the increase of over %s .. %s", from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	total := 0.0
	for _, s := range series {
		if err := onGrid(s, from, to); err != nil {
			return 0, err
		}
		for i := 1; i < len(s.Points); i++ {
			p, prev := s.Points[i], s.Points[i-1]
			if !p.T.After(from) || p.T.After(to) {
				continue
			}
			if p.V >= prev.V {
				total += p.V - prev.V
			} else {
				total += p.V
			}
		}
	}
	return total, nil
}

// CoverageError: a series' samples do not span an interval, so its growth
// over the interval was never measured.
type CoverageError struct {
	Series      string
	First, Last time.Time
	From, To    time.Time
}

func (e *CoverageError) Error() string {
	return fmt.Sprintf("series %s has samples from %s to %s, which do not cover %s .. %s: its increase there was not measured",
		e.Series, e.First.Format(time.RFC3339), e.Last.Format(time.RFC3339), e.From.Format(time.RFC3339), e.To.Format(time.RFC3339))
}

// GridError: a boundary is not a sample time of a series.
type GridError struct {
	Series        string
	At            time.Time
	Before, After time.Time
}

func (e *GridError) Error() string {
	return fmt.Sprintf("boundary %s is not a sample time of series %s (nearest samples %s and %s): boundaries must lie on the sample grid",
		e.At.Format(time.RFC3339), e.Series, e.Before.Format(time.RFC3339), e.After.Format(time.RFC3339))
}

// onGrid checks that s has a sample at from and one at to.
func onGrid(s Series, from, to time.Time) error {
	name := FormatMatch(s.Labels)
	if len(s.Points) == 0 {
		return fmt.Errorf("series %s has no samples", name)
	}
	first, last := s.Points[0].T, s.Points[len(s.Points)-1].T
	if first.After(from) || last.Before(to) {
		return &CoverageError{Series: name, First: first, Last: last, From: from, To: to}
	}
	for _, at := range []time.Time{from, to} {
		i := sort.Search(len(s.Points), func(i int) bool { return !s.Points[i].T.Before(at) })
		if !s.Points[i].T.Equal(at) {
			return &GridError{Series: name, At: at, Before: s.Points[i-1].T, After: s.Points[i].T}
		}
	}
	return nil
}

// Steps returns the increase per step from start to end: the timeline a
// report plots. Every step boundary must be on the sample grid (Increase).
func Steps(series []Series, start, end time.Time, step time.Duration) ([]Point, error) {
	var out []Point
	for t := start; t.Before(end); t = t.Add(step) {
		u := t.Add(step)
		if u.After(end) {
			u = end
		}
		v, err := Increase(series, t, u)
		if err != nil {
			return nil, err
		}
		out = append(out, Point{T: u, V: v})
	}
	return out, nil
}
