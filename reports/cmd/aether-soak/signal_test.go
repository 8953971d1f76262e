package main

import (
	"syscall"
	"testing"
	"time"
)

// A hang-up stops the run as Ctrl-C does, so the cluster is torn down and
// what was measured is graded; unhandled, it would kill this process.
func TestHangUpStopsTheRun(t *testing.T) {
	ctx, stop := stopContext()
	defer stop()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGHUP did not end the run's context")
	}
}
