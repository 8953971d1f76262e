package node

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// freshDirs hold what one run wrote about itself: process logs, backend
// records and the proxies' access logs.
var freshDirs = []string{"logs", "records", "access"}

// prepareRunDir makes the run dir's folders for a new cluster. What a
// previous cluster in the same run dir logged and recorded is moved to
// previous/ (replacing the one before it), so a count of the deliveries in
// records/ is this run's alone. Within a run, files are opened for append:
// a process restarted while the cluster is up (an agent restart) continues
// its log.
func prepareRunDir(dir string) error {
	prev := filepath.Join(dir, "previous")
	for _, d := range freshDirs {
		cur := filepath.Join(dir, d)
		if _, err := os.Stat(cur); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err := os.MkdirAll(prev, 0o755); err != nil {
			return fmt.Errorf("failed to create %s in run dir %q: %w", "previous", dir, err)
		}
		if err := os.RemoveAll(filepath.Join(prev, d)); err != nil {
			return fmt.Errorf("failed to remove the run before last's %s in run dir %q: %w", d, dir, err)
		}
		if err := os.Rename(cur, filepath.Join(prev, d)); err != nil {
			return fmt.Errorf("failed to move the previous run's %s aside in run dir %q: %w", d, dir, err)
		}
	}
	for _, d := range append(freshDirs, "cni-cache", "nodes") {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return fmt.Errorf("failed to create %s in run dir %q: %w", d, dir, err)
		}
	}
	return nil
}
