// Package netns creates, enters and destroys the network namespaces a rig
// runs in, and makes sure none of them outlive the run.
//
// Every namespace is named aeth-<pid>-<tag>, where pid is the process that
// owns it. `go test ./...` runs packages in parallel, so a sweeper may only
// remove namespaces whose owner is dead; a live run's namespaces are never
// touched. Namespaces are bind-mounted under /run/netns, so `ip netns list`
// shows them and a crashed run's leftovers are visible and sweepable.
package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Prefix starts the name of every namespace a rig creates.
const Prefix = "aeth-"

// BindDir is where named namespaces are bind-mounted (iproute2's location).
const BindDir = "/run/netns"

// NS is one named network namespace.
type NS struct {
	Name string
	// Path is the bind-mount path, usable as CNI_NETNS or as Envoy's
	// network_namespace_filepath.
	Path string
	// mnt is the namespace's own mount, held from creation so Delete can
	// unmount it wherever a later mount of BindDir has put it. Nil for a
	// namespace this process did not create (the sweeper's).
	mnt *os.File
}

// Owner returns the pid encoded in a rig namespace name, or false when the
// name is not a rig's.
func Owner(name string) (int, bool) {
	if !strings.HasPrefix(name, Prefix) {
		return 0, false
	}
	rest := strings.TrimPrefix(name, Prefix)
	pidPart, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(pidPart)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// Name builds the namespace name for tag, owned by this process.
func Name(tag string) string {
	return fmt.Sprintf("%s%d-%s", Prefix, os.Getpid(), tag)
}

var createMu sync.Mutex

// Create makes a new named namespace aeth-<pid>-<tag> with its loopback up.
// The calling goroutine's namespace is left unchanged.
func Create(tag string) (*NS, error) {
	return createNamed(Name(tag))
}

func createNamed(name string) (*NS, error) {
	createMu.Lock()
	defer createMu.Unlock()
	if err := prepareBindDir(); err != nil {
		return nil, fmt.Errorf("failed to create netns %q: %w", name, err)
	}

	// NewNamed unshares the calling thread into the new namespace. Lock the
	// thread first and restore it afterwards; if restoring fails the thread
	// stays locked so it dies with the goroutine instead of returning to the
	// scheduler in the wrong namespace.
	runtime.LockOSThread()
	orig, err := vnetns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("failed to read the current netns: %w", err)
	}
	defer orig.Close()
	h, err := vnetns.NewNamed(name)
	if err != nil {
		if rerr := vnetns.Set(orig); rerr != nil {
			return nil, fmt.Errorf("failed to create netns %q: %w (and failed to restore the thread: %v)", name, err, rerr)
		}
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("failed to create netns %q: %w", name, err)
	}
	h.Close()
	loErr := linkUp("lo")
	if err := vnetns.Set(orig); err != nil {
		return nil, fmt.Errorf("failed to return from netns %q: %w", name, err)
	}
	runtime.UnlockOSThread()
	ns := &NS{Name: name, Path: filepath.Join(BindDir, name)}
	fd, err := unix.Open(ns.Path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to open the mount of netns %q: %w", name, err), ns.Delete())
	}
	ns.mnt = os.NewFile(uintptr(fd), ns.Path)
	if loErr != nil {
		_ = ns.Delete()
		return nil, fmt.Errorf("failed to bring up lo in netns %q: %w", name, loErr)
	}
	track(ns)
	return ns, nil
}

// Do runs fn with the calling goroutine's OS thread inside the namespace.
// The thread is restored before it is unlocked; if that fails, the thread
// stays locked and is discarded when the goroutine ends.
//
// A socket's namespace is fixed at socket(), so a socket created inside fn
// stays in this namespace and may be used from anywhere afterwards.
func (n *NS) Do(fn func() error) error {
	target, err := vnetns.GetFromPath(n.Path)
	if err != nil {
		return fmt.Errorf("failed to open netns %q: %w", n.Path, err)
	}
	defer target.Close()

	errc := make(chan error, 1)
	// A fresh goroutine: if the restore fails we can let its thread die
	// without disturbing the caller's.
	go func() {
		runtime.LockOSThread()
		orig, err := vnetns.Get()
		if err != nil {
			errc <- fmt.Errorf("failed to read the current netns: %w", err)
			return // thread stays locked and dies
		}
		defer orig.Close()
		if err := vnetns.Set(target); err != nil {
			errc <- fmt.Errorf("failed to enter netns %q: %w", n.Name, err)
			return
		}
		ferr := fn()
		if err := vnetns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("failed to leave netns %q: %w", n.Name, err))
			return // thread stays locked and dies
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// Inode identifies the namespace; two paths naming the same namespace share
// it. It is how the sweeper finds processes still living in a namespace.
func (n *NS) Inode() (uint64, error) {
	// Through the held mount when there is one: Path may lead to another
	// mount by now.
	path := n.Path
	if n.mnt != nil {
		path = fmt.Sprintf("/proc/self/fd/%d", n.mnt.Fd())
	}
	var st unix.Stat_t
	var sf unix.Statfs_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("failed to stat netns %q: %w", n.Path, err)
	}
	if err := unix.Statfs(path, &sf); err != nil {
		return 0, fmt.Errorf("failed to stat netns %q: %w", n.Path, err)
	}
	// An entry whose mount is gone is a plain file: its inode number
	// belongs to another filesystem and may equal a namespace's.
	if sf.Type != unix.NSFS_MAGIC {
		return 0, fmt.Errorf("netns %q is not mounted (an entry with nothing mounted on it)", n.Path)
	}
	return st.Ino, nil
}

// Delete kills the processes that still live in the namespace, then
// unmounts and removes it. Deleting a namespace that is already gone is not
// an error.
//
// Its own mount is unmounted through the descriptor taken at creation, so a
// tool that mounted BindDir over itself since cannot hide it; then every
// mount still visible at Path goes. An entry that stays busy has a mount
// beneath a later mount of BindDir that no path reaches, and the error
// says how to get out of that.
func (n *NS) Delete() error {
	defer untrack(n)
	if _, err := os.Lstat(n.Path); errors.Is(err, os.ErrNotExist) && n.mnt == nil {
		return nil
	}
	var errs []error
	if ino, err := n.Inode(); err == nil {
		if err := killProcsInNetns(ino); err != nil {
			errs = append(errs, err)
		}
	}
	if n.mnt != nil {
		own := fmt.Sprintf("/proc/self/fd/%d", n.mnt.Fd())
		if err := unix.Unmount(own, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			errs = append(errs, fmt.Errorf("failed to unmount netns %q: %w", n.Path, err))
		}
		n.mnt.Close()
		n.mnt = nil
	}
	if err := unmountAll(n.Path); err != nil {
		errs = append(errs, fmt.Errorf("failed to unmount netns %q: %w", n.Path, err))
	}
	if err := os.Remove(n.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		if errors.Is(err, unix.EBUSY) {
			err = hiddenMountError(n.Path, err)
		} else {
			err = fmt.Errorf("failed to remove netns %q: %w", n.Path, err)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// List returns the names of every rig namespace on the machine.
func List() ([]string, error) {
	ents, err := os.ReadDir(BindDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to list %s: %w", BindDir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), Prefix) {
			out = append(out, e.Name())
		}
	}
	return out, nil
}
