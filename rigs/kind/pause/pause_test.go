package main

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestPauseHoldsUntilTerminated runs the built program: it must still be
// running after its start, and exit 0 on SIGTERM as the kubelet's stop of
// a sandbox expects.
func TestPauseHoldsUntilTerminated(t *testing.T) {
	bin := t.TempDir() + "/pause"
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Fatalf("pause exited by itself: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("pause on SIGTERM: %v, want exit status 0", err)
	}
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit code %d", cmd.ProcessState.ExitCode())
	}
	_ = os.Remove(bin)
}
