package nodeimage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Kubernetes is the version the node image runs; kind reads it from
// /kind/version and picks kubeadm's config API by it.
const Kubernetes = "v1.37.2"

// A Group is programs built by one go command, cached together.
type Group struct {
	// Name names the group in progress lines and the cache.
	Name string
	// Module is "tools" (rigs/kind/tools, the Kubernetes and etcd pins),
	// "main" (this repository's module), or path@version for a module
	// built on its own, with its own go.sum (go install).
	Module string
	// Packages are the main packages; with go install, relative to no
	// module (full paths).
	Packages []string
	// Rename maps a package's default binary name (binaryName) to the
	// one the image needs (etcd's main package is go.etcd.io/etcd/server/v3,
	// which go build names "server").
	Rename map[string]string
	CGO    bool
	Tags   []string
	// LDFlags are passed as -ldflags.
	LDFlags string
	// Needs are pkg-config names a cgo build links against.
	Needs []string
}

// versionLDFlags stamp the Kubernetes programs as hack/lib/version.sh does:
// without them kubeadm reads a placeholder version and asks for images of
// no release.
func versionLDFlags() string {
	minor := strings.Split(strings.TrimPrefix(Kubernetes, "v"), ".")[1]
	var b strings.Builder
	b.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=1 -X %s.gitMinor=%s -X %s.gitTreeState=clean -X %s.buildDate=1970-01-01T00:00:00Z",
			pkg, Kubernetes, pkg, pkg, minor, pkg, pkg)
	}
	return b.String()
}

// Groups are the node's programs: the Kubernetes binaries and etcd pinned
// by the tools module; containerd, runc and crictl at the versions
// Kubernetes 1.37 is tested with, each with its own go.sum; the CNI
// plugins at the version the mesh's own tests use, with their own go.sum
// (the main module requires only the two its tests run).
func Groups() []Group {
	return []Group{
		{Name: "kubernetes", Module: "tools", LDFlags: versionLDFlags(), Packages: []string{
			"k8s.io/kubernetes/cmd/kubeadm", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kubectl",
			"k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-controller-manager",
			"k8s.io/kubernetes/cmd/kube-scheduler"}},
		{Name: "etcd", Module: "tools", LDFlags: "-s -w", Packages: []string{"go.etcd.io/etcd/server/v3"},
			Rename: map[string]string{"server": "etcd"}},
		{Name: "containerd", Module: "github.com/containerd/containerd/v2@v2.4.2", LDFlags: "-s -w",
			Tags: []string{"no_aufs", "no_zfs", "no_btrfs", "no_devmapper"},
			Packages: []string{"github.com/containerd/containerd/v2/cmd/containerd",
				"github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2", "github.com/containerd/containerd/v2/cmd/ctr"}},
		// runc links libseccomp: kubeadm's static pods ask for the
		// RuntimeDefault seccomp profile.
		{Name: "runc", Module: "github.com/opencontainers/runc@v1.5.2", CGO: true, Tags: []string{"seccomp"},
			LDFlags: "-s -w", Needs: []string{"libseccomp"}, Packages: []string{"github.com/opencontainers/runc"}},
		{Name: "crictl", Module: "sigs.k8s.io/cri-tools@v1.37.0", LDFlags: "-s -w",
			Packages: []string{"sigs.k8s.io/cri-tools/cmd/crictl"}},
		{Name: "cni-plugins", Module: "github.com/containernetworking/plugins@v1.10.0", LDFlags: "-s -w", Packages: []string{
			"github.com/containernetworking/plugins/plugins/main/ptp", "github.com/containernetworking/plugins/plugins/main/bridge",
			"github.com/containernetworking/plugins/plugins/main/loopback", "github.com/containernetworking/plugins/plugins/ipam/host-local",
			"github.com/containernetworking/plugins/plugins/meta/portmap"}},
		{Name: "pause", Module: "main", LDFlags: "-s -w", Packages: []string{"github.com/aether-mesh/aether/rigs/kind/pause"}},
	}
}

// binaryName is the file go build writes for a main package: its last
// path element, or the one before a major-version suffix (/v3).
func binaryName(pkg string) string {
	elems := strings.Split(pkg, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		return elems[len(elems)-2]
	}
	return last
}

// Builder builds groups into a cache keyed by content.
type Builder struct {
	// Root is this repository's root (the main module).
	Root string
	// Cache holds one directory per built group and key.
	Cache string
	Say   func(format string, args ...any)
}

// DefaultCache is where built programs are kept between runs.
func DefaultCache() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "aether", "kind")
	}
	return filepath.Join(os.TempDir(), "aether-kind-cache")
}

// Key is a digest of everything that decides g's binaries: the group, the
// Go toolchain, and the module's go.sum where the group builds in one.
func (b Builder) Key(g Group) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "group/v1\x00%s\x00%s\x00%s\x00%v\x00%s\x00%s\x00%v\x00", g.Name, g.Module, strings.Join(g.Packages, ","), g.CGO,
		strings.Join(g.Tags, ","), g.LDFlags, sortedMap(g.Rename))
	fmt.Fprintf(h, "%s\x00%s/%s\x00", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if dir := b.moduleDir(g); dir != "" {
		for _, f := range []string{"go.mod", "go.sum"} {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				return "", fmt.Errorf("nodeimage: group %s: %w", g.Name, err)
			}
			h.Write(data)
		}
		if g.Module == "main" {
			// The pause program is this repository's own source.
			for _, p := range g.Packages {
				if rel, ok := strings.CutPrefix(p, "github.com/aether-mesh/aether/"); ok {
					files, _ := filepath.Glob(filepath.Join(dir, rel, "*.go"))
					for _, f := range files {
						data, err := os.ReadFile(f)
						if err != nil {
							return "", err
						}
						h.Write(data)
					}
				}
			}
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

func sortedMap(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

func (b Builder) moduleDir(g Group) string {
	switch g.Module {
	case "tools":
		return filepath.Join(b.Root, "rigs", "kind", "tools")
	case "main":
		return b.Root
	}
	return ""
}

// Build returns the directory holding g's binaries, building them only
// when the cache lacks them. A build goes to a temporary directory renamed
// into place when complete, so an interrupted build leaves no half entry.
func (b Builder) Build(ctx context.Context, g Group) (string, error) {
	key, err := b.Key(g)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(b.Cache, g.Name+"-"+key)
	if _, err := os.Stat(dir); err == nil {
		b.Say("binaries %s: cached (%s)", g.Name, dir)
		return dir, nil
	}
	if err := needs(ctx, g); err != nil {
		return "", err
	}
	if err := os.MkdirAll(b.Cache, 0o755); err != nil {
		return "", fmt.Errorf("nodeimage: %w", err)
	}
	tmp, err := os.MkdirTemp(b.Cache, ".build-"+g.Name+"-")
	if err != nil {
		return "", fmt.Errorf("nodeimage: %w", err)
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	b.Say("binaries %s: building %d program(s) from %s", g.Name, len(g.Packages), g.Module)
	if err := b.goBuild(ctx, g, tmp); err != nil {
		return "", err
	}
	for from, to := range g.Rename {
		if from != to {
			if err := os.Rename(filepath.Join(tmp, from), filepath.Join(tmp, to)); err != nil {
				return "", fmt.Errorf("nodeimage: group %s: %w", g.Name, err)
			}
		}
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("nodeimage: group %s: %w", g.Name, err)
	}
	b.Say("binaries %s: built in %s", g.Name, time.Since(start).Round(time.Second))
	return dir, nil
}

// needs checks that the libraries a cgo group links are installed.
func needs(ctx context.Context, g Group) error {
	for _, n := range g.Needs {
		if err := exec.CommandContext(ctx, "pkg-config", "--exists", n).Run(); err != nil {
			return fmt.Errorf("nodeimage: group %s links %s, which pkg-config does not find (apt-get install %s-dev pkg-config): %w", g.Name, n, n, err)
		}
	}
	return nil
}

func (b Builder) goBuild(ctx context.Context, g Group, out string) error {
	args := []string{"build", "-trimpath"}
	if len(g.Tags) > 0 {
		args = append(args, "-tags", strings.Join(g.Tags, ","))
	}
	if g.LDFlags != "" {
		args = append(args, "-ldflags", g.LDFlags)
	}
	env := append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH)
	if g.CGO {
		env = append(env, "CGO_ENABLED=1")
	} else {
		env = append(env, "CGO_ENABLED=0")
	}
	dir := b.moduleDir(g)
	var cmd *exec.Cmd
	if dir != "" {
		cmd = exec.CommandContext(ctx, "go", append(append(args, "-o", out+string(filepath.Separator)), g.Packages...)...)
		cmd.Dir = dir
	} else {
		// A module with its own go.sum: go install pkg@version, one
		// package at a time (install takes one version per command line).
		_, version, _ := strings.Cut(g.Module, "@")
		for _, p := range g.Packages {
			c := exec.CommandContext(ctx, "go", append([]string{"install"}, append(args[1:], p+"@"+version)...)...)
			c.Env = append(env, "GOBIN="+out)
			if err := runLogged(c, g.Name); err != nil {
				return err
			}
		}
		return nil
	}
	cmd.Env = env
	return runLogged(cmd, g.Name)
}

func runLogged(cmd *exec.Cmd, name string) error {
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("nodeimage: building %s failed (%s): %w\n%s", name, strings.Join(cmd.Args, " "), err, buf.String())
	}
	return nil
}
