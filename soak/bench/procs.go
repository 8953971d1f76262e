package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/procstat"
)

// ParsePPID reads the parent pid from the text of /proc/<pid>/stat (the
// field after the state, counted from the command's last ')').
func ParsePPID(stat []byte) (int, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no command name")
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 2 {
		return 0, fmt.Errorf("/proc stat: %d fields after the command, want at least 2", len(f))
	}
	return strconv.Atoi(string(f[1]))
}

// ParseRSS reads VmRSS, in bytes, from the text of /proc/<pid>/status.
func ParseRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("/proc status: VmRSS %q, want \"<n> kB\"", rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc status: VmRSS: %w", err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc status: no VmRSS line")
}

// Tree is every live process of a proxy: its root pid and all the
// descendants (nginx's workers), read afresh from /proc.
func Tree(proc string, root int) ([]int, error) {
	ents, err := os.ReadDir(proc)
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", proc, err)
	}
	children := map[int][]int{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(proc, e.Name(), "stat"))
		if err != nil {
			continue // exited while listed
		}
		ppid, err := ParsePPID(b)
		if err != nil {
			continue
		}
		children[ppid] = append(children[ppid], pid)
	}
	if _, err := os.Stat(filepath.Join(proc, strconv.Itoa(root))); err != nil {
		return nil, fmt.Errorf("proxy process %d: %w", root, err)
	}
	out := []int{root}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	slices.Sort(out)
	return out, nil
}

// Usage is a proxy's CPU time and resident memory, over all its processes.
type Usage struct {
	CPU time.Duration
	RSS int64
	// Procs is how many processes were read.
	Procs int
}

// ReadUsage sums the CPU time and RSS of root's process tree. A process
// that exits between listing and reading is skipped, so a proxy's CPU is
// read from its long-lived processes only.
func ReadUsage(proc string, root int) (Usage, error) {
	pids, err := Tree(proc, root)
	if err != nil {
		return Usage{}, err
	}
	var u Usage
	for _, pid := range pids {
		dir := filepath.Join(proc, strconv.Itoa(pid))
		stat, err := os.ReadFile(filepath.Join(dir, "stat"))
		if err != nil {
			continue
		}
		cpu, err := procstat.ParseProcStat(stat)
		if err != nil {
			return Usage{}, fmt.Errorf("process %d: %w", pid, err)
		}
		status, err := os.ReadFile(filepath.Join(dir, "status"))
		if err != nil {
			continue
		}
		rss, err := ParseRSS(status)
		if err != nil {
			return Usage{}, fmt.Errorf("process %d: %w", pid, err)
		}
		u.CPU += cpu
		u.RSS += rss
		u.Procs++
	}
	return u, nil
}

// LoadAverage reads /proc/loadavg's three averages.
func LoadAverage(proc string) ([3]float64, error) {
	var l [3]float64
	b, err := os.ReadFile(filepath.Join(proc, "loadavg"))
	if err != nil {
		return l, fmt.Errorf("load average: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return l, fmt.Errorf("load average: %q has fewer than 3 fields", b)
	}
	for i := range l {
		if l[i], err = strconv.ParseFloat(f[i], 64); err != nil {
			return l, fmt.Errorf("load average: field %d: %w", i+1, err)
		}
	}
	return l, nil
}
