package handoff

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// NetnsInode returns the inode of the namespace at path, and an error when
// path is not a namespace (a bind mount under /run/netns or a
// /proc/<pid>/ns/net link both are).
func NetnsInode(path string) (uint64, error) {
	var fs unix.Statfs_t
	if err := unix.Statfs(path, &fs); err != nil {
		return 0, fmt.Errorf("failed to stat netns %q: %w", path, err)
	}
	if fs.Type != unix.NSFS_MAGIC {
		return 0, fmt.Errorf("%q is not a namespace (filesystem magic %#x)", path, fs.Type)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("failed to stat netns %q: %w", path, err)
	}
	return st.Ino, nil
}

// stillThere answers why p's netns no longer names the pod's namespace, or
// nil when it does.
func stillThere(p *Pod) error {
	ino, err := NetnsInode(p.Netns)
	if err != nil {
		return err
	}
	if p.NetnsInode != 0 && ino != p.NetnsInode {
		return fmt.Errorf("netns %q is now namespace %d, the pod's was %d", p.Netns, ino, p.NetnsInode)
	}
	return nil
}
