package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// alive reports whether pid names a running process.
func alive(pid int) bool {
	err := unix.Kill(pid, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}

// Sweep removes rig namespaces left by runs that crashed: those whose owning
// process is dead. A live run's namespaces, including this process's, are
// never touched. It returns the names it removed.
func Sweep() ([]string, error) {
	names, err := List()
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, name := range names {
		pid, ok := Owner(name)
		if !ok || pid == os.Getpid() || alive(pid) {
			continue
		}
		ns := &NS{Name: name, Path: filepath.Join(BindDir, name)}
		if err := ns.Delete(); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, name)
	}
	return removed, errors.Join(errs...)
}

// killProcsInNetns kills every process whose network namespace has the given
// inode and waits briefly for them to go. The rig's own process is skipped.
func killProcsInNetns(ino uint64) error {
	pids := procsInNetns(ino)
	for _, pid := range pids {
		_ = unix.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		left := 0
		for _, pid := range pids {
			if alive(pid) && !zombie(pid) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("processes %v in netns inode %d did not die", pids, ino)
}

func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// Field 3, after the parenthesised command name.
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' && i+2 < len(b) {
			return b[i+2] == 'Z' || b[i+2] == 'X'
		}
	}
	return false
}

func procsInNetns(ino uint64) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		var st unix.Stat_t
		if unix.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) != nil {
			continue
		}
		if st.Ino == ino {
			out = append(out, pid)
		}
	}
	return out
}

// The set of namespaces and processes this process made and has not yet
// cleaned up; LeakCheck reads it.
var (
	trackMu sync.Mutex
	tracked = map[string]*NS{}
	procs   = map[int]string{}
)

func track(n *NS) {
	trackMu.Lock()
	tracked[n.Name] = n
	trackMu.Unlock()
}

func untrack(n *NS) {
	trackMu.Lock()
	delete(tracked, n.Name)
	trackMu.Unlock()
}

// TrackProcess records a process a rig started so LeakCheck can tell
// whether it outlived the run. what names it in the leak report.
func TrackProcess(pid int, what string) {
	trackMu.Lock()
	procs[pid] = what
	trackMu.Unlock()
}

// LeakCheck fails when anything this process made is still there: a
// namespace named for this process (whether or not it was made through
// Create), or a tracked process that is still running.
func LeakCheck() error {
	names, err := List()
	if err != nil {
		return err
	}
	var leaks []string
	for _, name := range names {
		if pid, ok := Owner(name); ok && pid == os.Getpid() {
			leaks = append(leaks, "netns "+name)
		}
	}
	trackMu.Lock()
	for pid, what := range procs {
		if alive(pid) && !zombie(pid) {
			leaks = append(leaks, fmt.Sprintf("process %d (%s)", pid, what))
		} else {
			delete(procs, pid)
		}
	}
	trackMu.Unlock()
	if len(leaks) > 0 {
		sort.Strings(leaks)
		return fmt.Errorf("rig leaked %d object(s): %v", len(leaks), leaks)
	}
	return nil
}

// Cleanup deletes every namespace this process still tracks. Rigs defer it
// so that a failing test still leaves nothing behind.
func Cleanup() error {
	trackMu.Lock()
	var all []*NS
	for _, n := range tracked {
		all = append(all, n)
	}
	trackMu.Unlock()
	var errs []error
	for _, n := range all {
		if err := n.Delete(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
