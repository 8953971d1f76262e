package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent given a mistyped flag logs the error, then its whole usage: the
// excerpt in the error keeps that first line.
func TestTailKeepsTheFirstLine(t *testing.T) {
	log := filepath.Join(t.TempDir(), "agent.log")
	lines := []string{"flag provided but not defined: -test-only-nope", "Usage of aether-agent:"}
	for i := 0; i < 40; i++ {
		lines = append(lines, "  -flag-"+string(rune('a'+i%26)))
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(tail(log, 3), "\n")
	want := []string{lines[0], "…", lines[39], lines[40], lines[41]}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("tail = %q, want %q", got, want)
	}
	short := filepath.Join(t.TempDir(), "short.log")
	os.WriteFile(short, []byte("a\nb\nc\n"), 0o644)
	if got := tail(short, 3); got != "a\nb\nc" {
		t.Fatalf("a log of n lines is cut: %q", got)
	}
}
