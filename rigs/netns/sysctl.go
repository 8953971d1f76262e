package netns

import (
	"fmt"
	"os"
	"path/filepath"
)

func writeSysctl(key, value string) error {
	p := filepath.Join("/proc/sys", key)
	if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
		return fmt.Errorf("failed to set sysctl %s=%s: %w", key, value, err)
	}
	return nil
}
