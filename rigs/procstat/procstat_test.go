package procstat

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	// A command name holding ") " must not shift the fields: utime 250,
	// stime 70 ticks.
	stat := "4242 (aether) proxy) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 70 0 0 20 0 9 0 12345 0 0\n"
	got, err := ParseProcStat([]byte(stat))
	if err != nil || got != 3200*time.Millisecond {
		t.Fatalf("ParseProcStat = %v, %v; want 3.2s", got, err)
	}
	for _, bad := range []string{"4242 aether-proxy S 1", "4242 (aether-proxy) S 1 2 3", "4242 (p) S 1 4242 4242 0 -1 4194560 900 0 0 0 x 70 0"} {
		if _, err := ParseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q was parsed", bad)
		}
	}
	// The kernel's own line for this process parses.
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	if _, err := ParseProcStat(b); err != nil {
		t.Fatal(err)
	}
}
