// Package procstat reads a process's CPU time from /proc/<pid>/stat, for
// the suites' and the soak's samplers alike.
package procstat

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// ClockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on
// every Linux architecture the rigs run on.
const ClockTick = 10 * time.Millisecond

// ParseProcStat reads a process's user and system CPU time from the text of
// its /proc/<pid>/stat. The command name, in parentheses, may hold spaces
// and parentheses itself, so the fields are counted from the last ')'.
func ParseProcStat(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat %q: no command name", short(stat))
	}
	f := bytes.Fields(stat[i+1:])
	// utime and stime are the 14th and 15th fields of the line; after the
	// command (the 2nd) they are the 12th and 13th.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat %q: %d fields after the command, want at least 13", short(stat), len(f))
	}
	var total time.Duration
	for _, j := range []int{11, 12} {
		v, err := strconv.ParseInt(string(f[j]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat: field %d: %w", j+3, err)
		}
		total += time.Duration(v) * ClockTick
	}
	return total, nil
}

func short(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "…"
	}
	return string(b)
}
