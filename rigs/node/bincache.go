package node

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

// EnvBinCache names the variable that overrides where built binaries are kept.
const EnvBinCache = "AETHER_BIN_CACHE"

// setKeyLen is the length of a set's name, a prefix of its hex hash.
const setKeyLen = 20

// binSetIdle is how long a set of binaries no run has used is kept.
const binSetIdle = 7 * 24 * time.Hour

// BinCacheDir is where BuildShared keeps its sets: $AETHER_BIN_CACHE, or
// aether/bin under the user's cache dir, or under the temp dir when the
// user has none (no $HOME, as on some CI runners).
func BinCacheDir() string {
	if d := os.Getenv(EnvBinCache); d != "" {
		return d
	}
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "aether", "bin")
}

// BuildShared builds the named binaries and returns where they are, in a set
// shared by every run that builds the same content: a run does not get its
// own 30 MB copy of each program. A set's directory is named for the hash
// of its files and never changes once in place, so a cluster may run from
// it while another run builds. Sets no run has used for a week are removed.
func BuildShared(root string, names ...string) (Binaries, error) {
	cache := BinCacheDir()
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("failed to create the binary cache %q: %w", cache, err)
	}
	tmp, err := os.MkdirTemp(cache, ".build-")
	if err != nil {
		return Binaries{}, fmt.Errorf("failed to create a build dir in %q: %w", cache, err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed into place
	if err := os.Chmod(tmp, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("failed to open up build dir %q: %w", tmp, err)
	}
	if err := Build(root, tmp, names...); err != nil {
		return Binaries{}, err
	}
	key, err := hashSet(tmp, names)
	if err != nil {
		return Binaries{}, err
	}
	dir := filepath.Join(cache, key)
	// Another run may have put the same set in place first; either copy
	// serves, and the rename fails on the existing non-empty directory.
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(dir); serr != nil {
			return Binaries{}, fmt.Errorf("failed to put built binaries in %q: %w", dir, err)
		}
	}
	now := time.Now()
	if err := os.Chtimes(dir, now, now); err != nil {
		return Binaries{}, fmt.Errorf("failed to mark %q used: %w", dir, err)
	}
	pruneBinSets(cache, now.Add(-binSetIdle))
	bin := Binaries{Dir: dir}
	if slices.Contains(names, "aether-node") {
		bin.Node = filepath.Join(dir, "aether-node")
	}
	return bin, nil
}

// hashSet names a set by the names and contents of its files.
func hashSet(dir string, names []string) (string, error) {
	sorted := append([]string(nil), names...)
	sort.Strings(sorted)
	h := sha256.New()
	for _, n := range sorted {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return "", fmt.Errorf("failed to hash built binary: %w", err)
		}
		fmt.Fprintf(h, "%s\x00", n)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return "", fmt.Errorf("failed to hash built binary %q: %w", n, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:setKeyLen], nil
}

// pruneBinSets removes sets last used before cutoff, and build dirs left by
// runs that died mid-build. Failures are ignored: pruning is housekeeping.
func pruneBinSets(cache string, cutoff time.Time) {
	ents, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !e.IsDir() || !info.ModTime().Before(cutoff) {
			continue
		}
		if strings.HasPrefix(e.Name(), ".") || len(e.Name()) == setKeyLen {
			_ = os.RemoveAll(filepath.Join(cache, e.Name()))
		}
	}
}
