package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// prepareBindDir makes BindDir a mount point with shared propagation, as
// iproute2's `ip netns add` does, before a namespace is mounted in it.
//
// Were it a plain directory, the first `ip netns add` anyone ran would
// bind-mount it over itself (recursively) and cover the rig's namespace
// mounts: their entries would show the copies, and removing an entry would
// fail with EBUSY on the original still mounted beneath. Once BindDir is a
// shared mount point, iproute2 finds it so and mounts nothing over it, and a
// tool that still bind-mounts it over itself makes a peer: an unmount in one
// copy propagates to the other.
func prepareBindDir() error {
	if err := os.MkdirAll(BindDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", BindDir, err)
	}
	// Opened before the test below: if that finds no mount point, none
	// existed when this was opened either, so it leads beneath any cover,
	// even one another process puts in place meanwhile.
	below, err := unix.Open(BindDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("failed to open %s: %w", BindDir, err)
	}
	defer unix.Close(below)
	err = unix.Mount("", BindDir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) { // EINVAL: not a mount point yet
		return fmt.Errorf("failed to make %s a shared mount: %w", BindDir, err)
	}
	return coverBindDir(below)
}

// coverBindDir bind-mounts BindDir over itself and makes it shared. The
// recursive bind copies the namespace mounts already in the directory (other
// tools' or other runs'); the originals would stay beneath the cover, out of
// reach of any path, keeping their entries busy. They are unmounted through
// below, a descriptor of the directory taken before the cover, which still
// leads beneath it.
func coverBindDir(below int) error {
	if err := unix.Mount(BindDir, BindDir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("failed to bind-mount %s over itself: %w", BindDir, err)
	}
	if err := unix.Mount("", BindDir, "none", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("failed to make %s a shared mount: %w", BindDir, err)
	}
	dir := fmt.Sprintf("/proc/self/fd/%d", below)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("failed to list %s beneath its new mount: %w", BindDir, err)
	}
	var errs []error
	for _, e := range ents {
		if err := unmountAll(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, fmt.Errorf("failed to unmount the original of %s beneath its copy: %w", filepath.Join(BindDir, e.Name()), err))
		}
	}
	return errors.Join(errs...)
}

// maxStacked bounds how many mounts unmountAll expects stacked on one path.
const maxStacked = 8

// unmountAll lazily unmounts every mount stacked on path (a process may
// still hold one open) and reports success once path is not a mount point.
func unmountAll(path string) error {
	for range maxStacked {
		err := unix.Unmount(path, unix.MNT_DETACH)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("failed to unmount %s: %w", path, err)
		}
	}
	return fmt.Errorf("%s is still a mount point after %d unmounts", path, maxStacked)
}

// hiddenMountError explains an entry of BindDir that cannot be removed
// because a mount of it sits beneath a later mount of BindDir itself.
func hiddenMountError(path string, err error) error {
	return fmt.Errorf("failed to remove netns %s: %w: it is still mounted beneath a later mount of %s "+
		"(a tool bind-mounted %s over itself while the namespace was in it; `findmnt -R %s` shows both). "+
		"Way out: `umount --lazy %s` (namespaces mounted in it since are detached too); then the next rig run's sweep, or `aether-node down`, removes it",
		path, err, BindDir, BindDir, BindDir, BindDir)
}
