package node

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ModulePath is the module the rig builds its mesh binaries from.
const ModulePath = "github.com/aether-mesh/aether"

// The binaries a cluster runs. ptp and static are the real reference plugins
// from containernetworking/plugins: the rig does not hand-make pod
// networking, it asks the same plugins a kubelet's runtime would, and chains
// aether-cni after them so the mesh plugin sees a genuine prevResult.
var binaryPackages = map[string]string{
	"ptp":          "github.com/containernetworking/plugins/plugins/main/ptp",
	"static":       "github.com/containernetworking/plugins/plugins/ipam/static",
	"aether-cni":   ModulePath + "/mesh/cmd/aether-cni",
	"aether-agent": ModulePath + "/mesh/cmd/aether-agent",
	"aether-proxy": ModulePath + "/mesh/cmd/aether-proxy",
	"aether-node":  ModulePath + "/rigs/cmd/aether-node",
}

// ModuleRoot finds the repository root by walking up from dir to the go.mod
// that declares ModulePath.
func ModuleRoot(dir string) (string, error) {
	d, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("failed to resolve %q: %w", dir, err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module "+ModulePath)) {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", fmt.Errorf("no go.mod for module %s above %q", ModulePath, dir)
		}
		d = parent
	}
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// ControlsTag is the build tag that compiles aether-agent's test-only
// controls (its --test-only-* flags and the #831 modes of --upstream-cert)
// in. The product's default build has none; every binary the rigs build
// has them, so every suite and soak can run its controls.
const ControlsTag = "aethercontrols"

// Build compiles the named binaries (keys of the package table: ptp, static,
// aether-cni, aether-agent, aether-proxy, aether-node) from the module at
// root into dir, with the controls (ControlsTag), in one go invocation so
// the build cache is shared.
func Build(root, dir string, names ...string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("failed to create bin dir %q: %w", dir, err)
	}
	args := []string{"build", "-tags", ControlsTag, "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		pkg, ok := binaryPackages[n]
		if !ok {
			return fmt.Errorf("no package known for binary %q", n)
		}
		args = append(args, pkg)
	}
	cmd := exec.Command(goTool(), args...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("failed to build %s: %w\n%s", strings.Join(names, ", "), err, out.String())
	}
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("build of %s produced no binary: %w", n, err)
		}
	}
	return nil
}

// Binaries says where a cluster finds its programs. Missing ones are built
// from source into the shared cache (BuildShared).
type Binaries struct {
	// Dir holds ptp, static, aether-cni, aether-agent and aether-proxy; the
	// CNI plugins are looked up here as CNI_PATH.
	Dir string
	// Node is the aether-node binary whose hidden "backend" command runs a
	// pod's echo backend.
	Node string
}

func (b Binaries) need(names ...string) []string {
	var missing []string
	for _, n := range names {
		if b.Dir == "" {
			missing = append(missing, n)
			continue
		}
		if _, err := os.Stat(filepath.Join(b.Dir, n)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, n)
		}
	}
	return missing
}
