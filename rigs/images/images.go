// Package images builds the mesh's container images offline, with
// go-containerregistry: each image is one layer holding the project's own
// static binaries (CGO_ENABLED=0) on an empty base, so no base image is
// pulled and no container engine is needed. The images are written as
// docker-archive tarballs, which `kind load image-archive` (and kind's Go
// API, nodeutils.LoadImageArchive) import into every node's containerd.
package images

import (
	"archive/tar"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// BinDir is where every image keeps its binaries.
const BinDir = "/usr/local/bin"

// Image is one image to build.
type Image struct {
	// Ref is the image's tag, e.g. aether-mesh.io/agent:e2e.
	Ref string
	// Binaries are names of the programs (keys of Packages) it holds.
	Binaries []string
	// Entrypoint is the config's entrypoint; manifests may override the
	// command per container.
	Entrypoint []string
	// File is the tarball's name in the output dir.
	File string
}

// Packages maps each binary the images hold to its Go package.
var Packages = map[string]string{
	"aether-cni":         "github.com/aether-mesh/aether/mesh/cmd/aether-cni",
	"aether-cni-install": "github.com/aether-mesh/aether/mesh/cmd/aether-cni-install",
	"aether-agent":       "github.com/aether-mesh/aether/mesh/cmd/aether-agent",
	"aether-proxy":       "github.com/aether-mesh/aether/mesh/cmd/aether-proxy",
	"aether-node":        "github.com/aether-mesh/aether/rigs/cmd/aether-node",
	"aether-relay":       "github.com/aether-mesh/aether/rigs/cmd/aether-relay",
}

// Tag is the tag every image carries in a run; the manifests pin it and
// pull nothing (imagePullPolicy: Never).
const Tag = "e2e"

// The images of an e2e run.
var (
	// CNI is the aether-cni installer: the plugin and the program that
	// chains it into the node's conflist.
	CNI = Image{Ref: "aether-mesh.io/cni:" + Tag, File: "aether-cni.tar",
		Binaries:   []string{"aether-cni-install", "aether-cni"},
		Entrypoint: []string{BinDir + "/aether-cni-install"}}
	// Agent holds the node agent and the data plane, which run as two
	// containers of one DaemonSet pod.
	Agent = Image{Ref: "aether-mesh.io/agent:" + Tag, File: "aether-agent.tar",
		Binaries:   []string{"aether-agent", "aether-proxy"},
		Entrypoint: []string{BinDir + "/aether-agent"}}
	// TestApp is every test pod: the echo backend that records what it
	// receives (aether-node backend, the embedded cluster's own) and the
	// relay a suite drives a client socket through.
	TestApp = Image{Ref: "aether-mesh.io/testapp:" + Tag, File: "aether-testapp.tar",
		Binaries:   []string{"aether-node", "aether-relay"},
		Entrypoint: []string{BinDir + "/aether-node", "backend"}}
)

// All is every image an e2e run loads.
func All() []Image { return []Image{CNI, Agent, TestApp} }

// ControlsTag is the build tag that compiles aether-agent's test-only
// controls in (rigs/node.ControlsTag): the images are the suites', and
// their controls run on kind too.
const ControlsTag = "aethercontrols"

// BuildBinaries compiles the named binaries from the module at root into
// dir as static executables for the host's architecture (kind's nodes run
// on the host's kernel), with the controls (ControlsTag), in one go
// invocation so the build cache is shared.
func BuildBinaries(root, dir string, names ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create bin dir %q: %w", dir, err)
	}
	args := []string{"build", "-trimpath", "-tags", ControlsTag, "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		pkg, ok := Packages[n]
		if !ok {
			return fmt.Errorf("no package known for binary %q", n)
		}
		args = append(args, pkg)
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to build %s: %w\n%s", strings.Join(names, ", "), err, out.String())
	}
	return nil
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// Build assembles img from the binaries in binDir and writes it to
// outDir/img.File, returning the tarball's path.
func Build(img Image, binDir, outDir string) (string, error) {
	tag, err := name.NewTag(img.Ref, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("image %q: bad reference: %w", img.Ref, err)
	}
	layer, err := binaryLayer(binDir, img.Binaries)
	if err != nil {
		return "", fmt.Errorf("image %s: %w", img.Ref, err)
	}
	i, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return "", fmt.Errorf("image %s: failed to add its layer: %w", img.Ref, err)
	}
	cf, err := i.ConfigFile()
	if err != nil {
		return "", fmt.Errorf("image %s: failed to read its config: %w", img.Ref, err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.Entrypoint = img.Entrypoint
	cf.Config.Env = []string{"PATH=" + BinDir}
	if i, err = mutate.ConfigFile(i, cf); err != nil {
		return "", fmt.Errorf("image %s: failed to set its config: %w", img.Ref, err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("failed to create image dir %q: %w", outDir, err)
	}
	path := filepath.Join(outDir, img.File)
	if err := tarball.WriteToFile(path, tag, i); err != nil {
		return "", fmt.Errorf("image %s: failed to write %q: %w", img.Ref, path, err)
	}
	return path, nil
}

// binaryLayer is one uncompressed layer holding each binary under BinDir
// with mode 0755, its parent directories first, so a container runtime can
// exec them as any user.
func binaryLayer(binDir string, binaries []string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// A fixed time keeps the layer's digest a function of the binaries.
	epoch := time.Unix(0, 0)
	dir := strings.TrimPrefix(BinDir, "/")
	for _, d := range parents(dir) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, b := range binaries {
		data, err := os.ReadFile(filepath.Join(binDir, b))
		if err != nil {
			return nil, fmt.Errorf("failed to read binary %s: %w", b, err)
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: dir + "/" + b, Mode: 0o755, Size: int64(len(data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("failed to make a layer of %v: %w", binaries, err)
	}
	return layer, nil
}

// parents returns "usr", "usr/local", "usr/local/bin" for "usr/local/bin".
func parents(dir string) []string {
	var out []string
	parts := strings.Split(dir, "/")
	for i := range parts {
		out = append(out, strings.Join(parts[:i+1], "/"))
	}
	return out
}
