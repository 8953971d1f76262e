package main

import (
	"bytes"
	"testing"
)

// A directory given without -report is refused, naming the flag, rather
// than ignored while the run writes no result.
func TestArgumentWithoutReportIsRefused(t *testing.T) {
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"/tmp/p0"}, &stderr); err == nil ||
		err.Error() != `unexpected argument "/tmp/p0": give the report directory as -report /tmp/p0` {
		t.Errorf("got %v", err)
	}
	if dir, err := parseFlags([]string{"-report", "/tmp/p0"}, &stderr); err != nil || dir != "/tmp/p0" {
		t.Errorf("-report /tmp/p0: got %q, %v", dir, err)
	}
}
