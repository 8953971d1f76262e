package results

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"

	"golang.org/x/sys/unix"
)

// The variables `make` sets for the processes that write results: `go test`
// binaries carry no VCS stamp, so the build's identity has to be passed in.
const (
	EnvRevision = "AETHER_BUILD_REVISION"
	EnvDirty    = "AETHER_BUILD_DIRTY"
)

// Build is the build a result judged.
type Build struct {
	// Revision is the full git commit; empty when none was known, and
	// Unknown then says why.
	Revision string `json:"revision"`
	// Dirty is set when the checkout had uncommitted changes, so Revision
	// does not name all the code that ran.
	Dirty   bool   `json:"dirty"`
	Unknown string `json:"unknown,omitempty"`
	Go      string `json:"go"`
	Kernel  string `json:"kernel"`
	// Binaries maps each mesh binary the run executed to its sha256.
	Binaries map[string]string `json:"binaries,omitempty"`
}

// Stamp describes the running build: the revision make passed in, else the
// binary's own VCS stamp (a `go build` from a checkout has one), plus the Go
// version, the kernel and the binaries the result judged, by name, as
// HashBinaries returned them (nil when the run executed none).
func Stamp(binaries map[string]string) Build {
	b := Build{Go: runtime.Version(), Kernel: kernel(), Binaries: copyOf(binaries)}
	if rev := os.Getenv(EnvRevision); rev != "" {
		b.Revision = rev
		// Anything but an explicit false is dirty: an unknown state must not
		// pass for a clean one.
		dirty, err := strconv.ParseBool(os.Getenv(EnvDirty))
		b.Dirty = err != nil || dirty
		return b
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Dirty = s.Value != "false"
			}
		}
	}
	if b.Revision == "" {
		b.Dirty = false
		b.Unknown = EnvRevision + " is unset and the binary has no VCS stamp: not built by make from a git checkout"
	}
	return b
}

func kernel() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown: " + err.Error()
	}
	return string(bytes.TrimRight(u.Release[:], "\x00"))
}

// HashBinaries returns the sha256 of each named binary in dir, by name, for
// the Stamp of a result that judged them. Callers hash when they start the
// binaries, not when they write the result: the files may be rebuilt or
// removed in between.
func HashBinaries(dir string, names ...string) (map[string]string, error) {
	out := make(map[string]string, len(names))
	for _, n := range names {
		sum, err := FileSHA256(filepath.Join(dir, n))
		if err != nil {
			return nil, fmt.Errorf("failed to record binary %s: %w", n, err)
		}
		out[n] = sum
	}
	return out, nil
}

func copyOf(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// FileSHA256 is the hex sha256 of the file at path: a binary's identity
// in a stamp, and an evidence file's in a soak grade's binding.
func FileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("failed to read %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
