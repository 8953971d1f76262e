// Package evidence holds what a soak produced, read from the tools that
// produced it (k6, vegeta, Prometheus, pprof) into one model the graders use.
//
// Every importer rejects input it does not understand with an error naming
// the file, the field and the reason: a grade built on a silently skipped
// field would be a verdict nobody measured.
package evidence

import (
	"fmt"
	"time"
)

// FieldError says which file and field of an input was rejected, and why.
type FieldError struct {
	File   string
	Line   int // 0 when the input is not line-oriented
	Field  string
	Reason string
	Err    error
}

func (e *FieldError) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	msg := fmt.Sprintf("%s: field %q: %s", loc, e.Field, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(file string, line int, field, reason string, err error) error {
	return &FieldError{File: file, Line: line, Field: field, Reason: reason, Err: err}
}

// Failure is one failed request a load generator recorded.
type Failure struct {
	Time time.Time `json:"time"`
	// Status is the HTTP status, 0 when the request got no response.
	Status int    `json:"status"`
	Error  string `json:"error,omitempty"`
}

// LoadRun is a load generator's account of a run.
type LoadRun struct {
	Source string `json:"source"`
	// Shape names the input format, for the report.
	Shape string `json:"shape"`
	// Total and Failed count requests. A failed request is one the
	// generator itself marked failed (k6's http_req_failed, vegeta's
	// non-2xx/3xx or error).
	Total  int64 `json:"total"`
	Failed int64 `json:"failed"`
	// Timed is true when Failures lists every failed request with its
	// time; a summary alone cannot say when its failures happened.
	Timed    bool      `json:"timed"`
	Failures []Failure `json:"-"`
}

// WithTimeline combines a run's end-of-test totals with a time-resolved
// record of its failures (a k6 --out json file filtered to failed
// requests, as a soak keeps it: the full per-request file of an 8 h run is
// tens of gigabytes). The two must tell the same story.
func (s LoadRun) WithTimeline(t LoadRun) (LoadRun, error) {
	if int64(len(t.Failures)) != s.Failed {
		return LoadRun{}, fmt.Errorf("load-generator records disagree: %s lists %d failed request(s), %s counts %d",
			t.Source, len(t.Failures), s.Source, s.Failed)
	}
	out := s
	out.Source = s.Source + " + " + t.Source
	out.Shape = s.Shape + " + " + t.Shape
	out.Timed = true
	out.Failures = t.Failures
	return out, nil
}
