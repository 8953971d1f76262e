package envcheck

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// capNames are the kernel's capabilities by bit (linux/capability.h).
var capNames = []string{
	"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID",
	"SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW",
	"IPC_LOCK", "IPC_OWNER", "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
	"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD",
	"LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG",
	"WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
}

// dockerKnown is how many of them (by bit, from 0) Docker 20.10 can name
// in --cap-add: it refuses CAP_PERFMON and later ("unknown capability").
const dockerKnown = 38

// MissingCaps names the capabilities the kernel has that bnd lacks.
func MissingCaps(bnd uint64) []string {
	var out []string
	for bit, n := range capNames {
		if bnd&(1<<bit) == 0 {
			out = append(out, "CAP_"+n)
		}
	}
	return out
}

// DockerCaps are the capabilities in bnd that docker run --cap-add can
// name: what a privileged container gets from a daemon holding bnd.
func DockerCaps(bnd uint64) []string {
	var out []string
	for bit := 0; bit < dockerKnown; bit++ {
		if bnd&(1<<bit) != 0 {
			out = append(out, capNames[bit])
		}
	}
	return out
}

// daemonCapBnd reads dockerd's capability bounding set from /proc: the
// daemon, not this process, is what a container's capabilities come from.
// A remote engine (no dockerd here) is answered with this process's own.
func daemonCapBnd() (uint64, error) {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		comm, err := os.ReadFile(filepath.Join(d, "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "dockerd" {
			continue
		}
		return capBnd(filepath.Join(d, "status"))
	}
	return capBnd("/proc/self/status")
}

func capBnd(status string) (uint64, error) {
	b, err := os.ReadFile(status)
	if err != nil {
		return 0, fmt.Errorf("envcheck: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0, fmt.Errorf("envcheck: %s: CapBnd %q: %w", status, v, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("envcheck: %s has no CapBnd line", status)
}
