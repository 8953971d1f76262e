// Package nodeimage assembles a kind node image offline, as kind's own
// `build node-image` assembles one, from the project's files alone: a
// Debian root filesystem (rigs/kind/rootfs), the Kubernetes programs, etcd,
// containerd, runc, crictl, the CNI plugins and a pause program built from
// the Go module proxy (binaries.go), the node's entrypoint, units and
// containerd config (files/), and the control-plane images, built with
// go-containerregistry and preloaded into the node's containerd under the
// exact references kubeadm asks for, so that nothing is ever pulled.
//
// The image's tag is a digest of every input; a second build with the
// same inputs finds the tag and rebuilds nothing.
package nodeimage

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aether-mesh/aether/rigs/images"
	"github.com/aether-mesh/aether/rigs/kind/envcheck"
	"github.com/aether-mesh/aether/rigs/kind/rootfs"
)

// Repository is the node image's name; its tag is the inputs' digest.
const Repository = "aether-kind-node"

// ImageRepository is kubeadm's imageRepository for the control-plane
// images: a name no registry answers, so a missing image fails loudly
// instead of being fetched from somewhere.
const ImageRepository = "aether-kind.local"

//go:embed all:files
var files embed.FS

// RootfsSpec is the node's Debian: what kind's base image installs that
// a node of this mesh uses (systemd, netfilter tools, conntrack, mount
// tools, libseccomp for runc).
func RootfsSpec() rootfs.Spec {
	return rootfs.Spec{
		Repository: "aether-kind-rootfs",
		Suite:      "bookworm",
		Packages: []string{"systemd", "systemd-sysv", "dbus", "iptables", "nftables", "conntrack", "iproute2",
			"ethtool", "util-linux", "mount", "kmod", "libseccomp2", "ca-certificates", "procps", "socat", "bash"},
		Changes: []string{"ENV container=docker"},
		// Units a container must not start (kind's base image masks the
		// same kind: consoles, binfmt).
		Setup: "systemctl mask getty@tty1.service console-getty.service systemd-binfmt.service >/dev/null 2>&1",
	}
}

// KubeadmConfig is the ClusterConfiguration patch every cluster gets, and
// that the build checks its images against: the project's image
// repository, no CoreDNS (nothing in the mesh resolves cluster names) and
// no kube-proxy (the mesh captures every service port it serves).
func KubeadmConfig() string {
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %s
imageRepository: %s
dns:
  disabled: true
proxy:
  disabled: true
`, Kubernetes, ImageRepository)
}

// KubeletConfig is the KubeletConfiguration patch: kubelet 1.37 refuses a
// cgroup v1 host unless told otherwise, and this machine's kind is v1.
const KubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
`

// Options configure a build.
type Options struct {
	// Root is the repository's root.
	Root string
	// Cache keeps built programs between runs (DefaultCache()).
	Cache string
	// WorkDir receives trees and build contexts while they are built.
	WorkDir string
	Say     func(format string, args ...any)
}

// Build returns the node image's reference, building what the engine and
// the cache lack.
func Build(ctx context.Context, o Options) (string, error) {
	start := time.Now()
	if o.Say == nil {
		o.Say = func(string, ...any) {}
	}
	b := Builder{Root: o.Root, Cache: o.Cache, Say: o.Say}
	key, err := imageKey(b)
	if err != nil {
		return "", err
	}
	ref := Repository + ":" + key
	if rootfs.HasImage(ctx, ref) {
		o.Say("node image %s: cached", ref)
		return ref, nil
	}
	// What a build needs from the machine is checked before anything is
	// built: runc's libseccomp is otherwise found missing twenty minutes
	// in, after the Kubernetes programs.
	for _, g := range Groups() {
		if err := needs(ctx, g); err != nil {
			return "", err
		}
	}
	base, err := rootfs.Build(ctx, RootfsSpec(), o.WorkDir, o.Say)
	if err != nil {
		return "", err
	}
	dirs := map[string]string{}
	for _, g := range Groups() {
		if dirs[g.Name], err = b.Build(ctx, g); err != nil {
			return "", err
		}
	}
	bctx, err := os.MkdirTemp(o.WorkDir, "node-image-")
	if err != nil {
		return "", fmt.Errorf("nodeimage: %w", err)
	}
	defer os.RemoveAll(bctx)
	refs, err := componentImages(ctx, dirs, filepath.Join(bctx, "images"), o.Say)
	if err != nil {
		return "", err
	}
	if err := writeContext(bctx, dirs); err != nil {
		return "", err
	}
	staged := ref + "-staged"
	if out, err := dockerOut(ctx, "build", "--network", "none", "--tag", staged, "--file", filepath.Join(bctx, "Dockerfile"), "--build-arg", "BASE="+base, bctx); err != nil {
		return "", fmt.Errorf("nodeimage: docker build of %s failed: %w\n%s", staged, err, tailLines(out, 30))
	}
	defer dockerOut(context.WithoutCancel(ctx), "image", "rm", staged)
	o.Say("node image %s: binaries and files added (%s)", ref, time.Since(start).Round(time.Second))
	if err := preload(ctx, staged, ref, refs, o.Say); err != nil {
		return "", err
	}
	o.Say("node image %s: built in %s", ref, time.Since(start).Round(time.Second))
	return ref, nil
}

// imageKey digests every input of the image: the rootfs spec, each group's
// key, the files and the kubeadm configuration.
func imageKey(b Builder) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "node/v1\x00%s\x00%s\x00%s\x00", RootfsSpec().Ref(), KubeadmConfig(), KubeletConfig)
	for _, g := range Groups() {
		k, err := b.Key(g)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s=%s\x00", g.Name, k)
	}
	err := fs.WalkDir(files, "files", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
		h.Write(data)
		return err
	})
	return hex.EncodeToString(h.Sum(nil))[:16], err
}

// Where each program goes in the node (kind's layout).
var placement = map[string]string{
	"kubeadm": "/usr/bin", "kubelet": "/usr/bin", "kubectl": "/usr/bin",
	"containerd": "/usr/local/bin", "containerd-shim-runc-v2": "/usr/local/bin", "ctr": "/usr/local/bin",
	"crictl": "/usr/local/bin", "runc": "/usr/local/sbin",
	"ptp": "/opt/cni/bin", "bridge": "/opt/cni/bin", "loopback": "/opt/cni/bin", "host-local": "/opt/cni/bin", "portmap": "/opt/cni/bin",
}

// writeContext lays out the docker build context: the node's programs,
// its files and a Dockerfile that adds them to the rootfs.
func writeContext(dir string, groups map[string]string) error {
	var copies []string
	for _, g := range Groups() {
		entries, err := os.ReadDir(groups[g.Name])
		if err != nil {
			return err
		}
		for _, e := range entries {
			dest, ok := placement[e.Name()]
			if !ok {
				continue // a control-plane program: it runs from its image
			}
			if err := copyFile(filepath.Join(groups[g.Name], e.Name()), filepath.Join(dir, "root", dest, e.Name()), 0o755); err != nil {
				return err
			}
			copies = append(copies, dest+"/"+e.Name())
		}
	}
	for name := range placement {
		if !contains(copies, placement[name]+"/"+name) {
			return fmt.Errorf("nodeimage: no group built %s", name)
		}
	}
	err := fs.WalkDir(files, "files", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if strings.Contains(p, "/bin/") {
			mode = 0o755
		}
		target := filepath.Join(dir, "root", strings.TrimPrefix(p, "files/"))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, mode)
	})
	if err != nil {
		return fmt.Errorf("nodeimage: %w", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "root", "kind"), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "root", "kind", "version"), []byte(Kubernetes+"\n"), 0o644); err != nil {
		return err
	}
	dockerfile := `ARG BASE
FROM ${BASE}
COPY root/ /
RUN systemctl enable containerd.service kubelet.service >/dev/null 2>&1 \
 && mkdir -p /etc/kubernetes/manifests /etc/cni/net.d /var/lib/kubelet \
 && update-alternatives --set iptables /usr/sbin/iptables-nft >/dev/null \
 && update-alternatives --set ip6tables /usr/sbin/ip6tables-nft >/dev/null
ENV container=docker
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]
`
	return os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(dockerfile), 0o644)
}

// componentImages builds one image per reference kubeadm asks for, from
// the built programs, and fails naming any reference it cannot build.
func componentImages(ctx context.Context, groups map[string]string, out string, say func(string, ...any)) (map[string]string, error) {
	wanted, err := kubeadmImages(ctx, groups["kubernetes"])
	if err != nil {
		return nil, err
	}
	sources := map[string]string{
		"kube-apiserver": "kubernetes", "kube-controller-manager": "kubernetes", "kube-scheduler": "kubernetes",
		"etcd": "etcd", "pause": "pause",
	}
	refs := map[string]string{}
	var missing []string
	for _, ref := range wanted {
		name := strings.TrimPrefix(ref, ImageRepository+"/")
		prog, _, _ := strings.Cut(name, ":")
		group, ok := sources[prog]
		if !ok || !strings.HasPrefix(ref, ImageRepository+"/") {
			missing = append(missing, ref)
			continue
		}
		img := images.Image{Ref: ref, Binaries: []string{prog}, Entrypoint: []string{images.BinDir + "/" + prog}, File: prog + ".tar"}
		path, err := images.Build(img, groups[group], out)
		if err != nil {
			return nil, fmt.Errorf("nodeimage: %w", err)
		}
		refs[ref] = path
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("nodeimage: kubeadm %s will ask for %s, which the project does not build: the node would pull them", Kubernetes, strings.Join(missing, ", "))
	}
	say("node image: %d control-plane images for %s", len(refs), strings.Join(sortedKeys(refs), ", "))
	return refs, nil
}

// kubeadmImages asks the built kubeadm which images a cluster with
// KubeadmConfig needs (its `config images list`), so the list is
// kubeadm's own, not a copy of its constants.
func kubeadmImages(ctx context.Context, kubeDir string) ([]string, error) {
	cfg, err := os.CreateTemp("", "aether-kubeadm-*.yaml")
	if err != nil {
		return nil, err
	}
	defer os.Remove(cfg.Name())
	if _, err := cfg.WriteString(KubeadmConfig()); err != nil {
		return nil, err
	}
	cfg.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(kubeDir, "kubeadm"), "config", "images", "list", "--config", cfg.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("nodeimage: kubeadm config images list: %w\n%s", err, out)
	}
	var refs []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			refs = append(refs, l)
		}
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("nodeimage: kubeadm config images list printed no image")
	}
	return refs, nil
}

// preload imports the control-plane images into the staged node's
// containerd content store, pinned and unpacked later by the node itself,
// as kind's node-image build does (ctr images import --no-unpack), checks
// that each reference is present, and commits the result as ref.
func preload(ctx context.Context, staged, ref string, refs map[string]string, say func(string, ...any)) error {
	name := fmt.Sprintf("aether-node-image-%d", os.Getpid())
	args := []string{"run", "--detach", "--name", name, "--network", "none", "--entrypoint", "/usr/local/bin/containerd"}
	server, bnd, err := envcheck.Engine(ctx)
	if err != nil {
		return err
	}
	if envcheck.RefusesPrivileged(server, bnd) {
		args = append(args, envcheck.PrivilegedAs(envcheck.DockerCaps(bnd))...)
	} else {
		args = append(args, "--privileged")
	}
	if out, err := dockerOut(ctx, append(args, staged)...); err != nil {
		return fmt.Errorf("nodeimage: starting %s to preload images: %w\n%s", staged, err, out)
	}
	defer dockerOut(context.WithoutCancel(ctx), "rm", "--force", name)
	for ref, path := range refs {
		if out, err := dockerOut(ctx, "cp", path, name+":/"+filepath.Base(path)); err != nil {
			return fmt.Errorf("nodeimage: copying %s into %s: %w\n%s", ref, name, err, out)
		}
	}
	var script strings.Builder
	script.WriteString("set -e; for i in $(seq 50); do ctr version >/dev/null 2>&1 && break; sleep 0.2; done\n")
	for _, path := range refs {
		fmt.Fprintf(&script, "ctr --namespace=k8s.io images import --label=io.cri-containerd.pinned=pinned --all-platforms --no-unpack --digests /%s\nrm /%s\n", filepath.Base(path), filepath.Base(path))
	}
	script.WriteString("ctr --namespace=k8s.io images list --quiet\n")
	out, err := dockerOut(ctx, "exec", name, "/bin/sh", "-c", script.String())
	if err != nil {
		return fmt.Errorf("nodeimage: importing images into %s: %w\n%s", name, err, tailLines(out, 20))
	}
	var missing []string
	for ref := range refs {
		if !strings.Contains(out, ref+"\n") && !strings.HasSuffix(strings.TrimSpace(out), ref) {
			missing = append(missing, ref)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("nodeimage: after import the node's containerd lacks %s (it lists:\n%s)", strings.Join(missing, ", "), out)
	}
	say("node image: preloaded %d images", len(refs))
	if out, err := dockerOut(ctx, "stop", "--time", "10", name); err != nil {
		return fmt.Errorf("nodeimage: stopping %s: %w\n%s", name, err, out)
	}
	// The staged image's STOPSIGNAL and ENV carry over; the entrypoint was
	// replaced for the import and is set back.
	if out, err := dockerOut(ctx, "commit", "--change", `ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]`, name, ref); err != nil {
		return fmt.Errorf("nodeimage: committing %s: %w\n%s", ref, err, out)
	}
	return nil
}

func dockerOut(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return string(out), err
}

func copyFile(from, to string, mode os.FileMode) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, data, mode)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
