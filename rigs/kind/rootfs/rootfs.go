// Package rootfs builds a Debian root filesystem with debootstrap and
// imports it into the container engine as an image, cached by content: the
// image's tag is a digest of everything that decides its files (suite,
// variant, packages, the commands run on it), so a second build with the
// same inputs finds the tag and does nothing. No image is pulled: the only
// things fetched are Debian's packages, through debootstrap's own mirror.
package rootfs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// EnvMirror overrides debootstrap's default Debian mirror.
const EnvMirror = "AETHER_DEBIAN_MIRROR"

// Spec is one root filesystem.
type Spec struct {
	// Repository is the image's name without tag, e.g. aether-kind-probe.
	Repository string
	// Suite is the Debian release, e.g. bookworm.
	Suite string
	// Packages are installed on top of the minbase variant.
	Packages []string
	// Changes are Dockerfile instructions `docker import --change` applies
	// (ENV, ENTRYPOINT, STOPSIGNAL).
	Changes []string
	// Setup runs in the finished tree (chroot'ed, with /bin/sh) before
	// it is imported, e.g. to remove units a container must not start.
	Setup string
}

// Key is the digest the image is tagged with: any change to what decides
// the tree's files gives a new tag.
func (s Spec) Key() string {
	pk := append([]string(nil), s.Packages...)
	sort.Strings(pk)
	h := sha256.New()
	fmt.Fprintf(h, "rootfs/v1\x00%s\x00minbase\x00%s\x00", s.Suite, strings.Join(pk, ","))
	fmt.Fprintf(h, "%s\x00%s\x00%s", strings.Join(s.Changes, "\n"), s.Setup, os.Getenv(EnvMirror))
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Ref is the image reference the spec builds.
func (s Spec) Ref() string { return s.Repository + ":" + s.Key() }

func (s Spec) validate() error {
	switch {
	case s.Repository == "" || strings.ContainsAny(s.Repository, ": @"):
		return fmt.Errorf("rootfs: repository %q must be a name without tag or digest", s.Repository)
	case s.Suite == "":
		return errors.New("rootfs: no Debian suite named")
	}
	for i, p := range s.Packages {
		if p == "" || strings.ContainsAny(p, ", \t\n") {
			return fmt.Errorf("rootfs %s: package %d (%q) is not a package name", s.Repository, i, p)
		}
	}
	return nil
}

// Progress receives one line per step, for a person watching a long build.
type Progress func(format string, args ...any)

// Build returns the image's reference, building it only when the engine
// does not already hold it. workDir receives the tree while it is built;
// it is removed afterwards, whatever happens.
func Build(ctx context.Context, s Spec, workDir string, say Progress) (string, error) {
	if err := s.validate(); err != nil {
		return "", err
	}
	ref := s.Ref()
	if HasImage(ctx, ref) {
		say("rootfs %s: cached (%d packages)", ref, len(s.Packages))
		return ref, nil
	}
	if _, err := exec.LookPath("debootstrap"); err != nil {
		return "", fmt.Errorf("rootfs %s: debootstrap is not installed (apt-get install debootstrap): %w", ref, err)
	}
	if err := os.MkdirAll(workDir, 0o755); err != nil {
		return "", fmt.Errorf("rootfs %s: %w", ref, err)
	}
	tree, err := os.MkdirTemp(workDir, "rootfs-")
	if err != nil {
		return "", fmt.Errorf("rootfs %s: %w", ref, err)
	}
	defer os.RemoveAll(tree)

	start := time.Now()
	say("rootfs %s: debootstrap %s with %d packages…", ref, s.Suite, len(s.Packages))
	args := []string{"--variant=minbase", "--include=" + strings.Join(s.Packages, ","), s.Suite, tree}
	if m := os.Getenv(EnvMirror); m != "" {
		args = append(args, m)
	}
	if out, err := run(ctx, nil, "debootstrap", args...); err != nil {
		return "", fmt.Errorf("rootfs %s: debootstrap %s failed: %w\n%s", ref, s.Suite, err, tail(out, 20))
	}
	say("rootfs %s: debootstrap done in %s", ref, time.Since(start).Round(time.Second))
	if s.Setup != "" {
		if out, err := run(ctx, nil, "chroot", tree, "/bin/sh", "-ec", s.Setup); err != nil {
			return "", fmt.Errorf("rootfs %s: setup in the tree failed: %w\n%s", ref, err, tail(out, 20))
		}
	}
	if err := importTree(ctx, tree, ref, s.Changes); err != nil {
		return "", err
	}
	say("rootfs %s: imported in %s", ref, time.Since(start).Round(time.Second))
	return ref, nil
}

// importTree streams the tree as a tar into `docker import`.
func importTree(ctx context.Context, tree, ref string, changes []string) error {
	tarCmd := exec.CommandContext(ctx, "tar", "-C", tree, "--numeric-owner", "--xattrs", "-cf", "-", ".")
	args := []string{"import"}
	for _, c := range changes {
		args = append(args, "--change", c)
	}
	args = append(args, "-", ref)
	imp := exec.CommandContext(ctx, "docker", args...)
	pipe, err := tarCmd.StdoutPipe()
	if err != nil {
		return err
	}
	imp.Stdin = pipe
	var tarErr, impOut bytes.Buffer
	tarCmd.Stderr = &tarErr
	imp.Stdout, imp.Stderr = &impOut, &impOut
	if err := tarCmd.Start(); err != nil {
		return fmt.Errorf("rootfs %s: tar: %w", ref, err)
	}
	impErr := imp.Run()
	tarWait := tarCmd.Wait()
	if impErr != nil {
		return fmt.Errorf("rootfs %s: docker import failed: %w\n%s", ref, impErr, tail(impOut.Bytes(), 10))
	}
	if tarWait != nil {
		return fmt.Errorf("rootfs %s: tar of %s failed: %w\n%s", ref, tree, tarWait, tail(tarErr.Bytes(), 10))
	}
	return nil
}

// HasImage reports whether the engine holds ref locally.
func HasImage(ctx context.Context, ref string) bool {
	_, err := run(ctx, nil, "docker", "image", "inspect", "--format", "{{.Id}}", ref)
	return err == nil
}

func run(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = stdin
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.Bytes(), err
}

// tail keeps the last n lines of a command's output for an error message.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// WorkDir is the default place trees are built in.
func WorkDir() string { return filepath.Join(os.TempDir(), "aether-rootfs") }
