// Package cniinstall puts aether-cni on a Kubernetes node, as the CNI
// DaemonSet's installer: it copies the plugin binary into the node's CNI
// bin dir and chains the plugin at the end of the node's active conflist,
// after whatever plugin gives pods their network (kindnet's ptp on kind),
// so aether-cni sees that plugin's prevResult as it does on the embedded
// netns cluster.
package cniinstall

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// PluginType is the "type" of aether-cni's conflist entry, which is also
// the binary's name in the CNI bin dir.
const PluginType = "aether-cni"

// Config says what to install where.
type Config struct {
	// Binary is the aether-cni binary inside the installer's image.
	Binary string
	// BinDir and ConfDir are the node's CNI dirs as mounted into the
	// installer (hostPath).
	BinDir  string
	ConfDir string
	// Plugin is aether-cni's conflist entry without "type" (captureMode,
	// excludeNamespaces, ...).
	Plugin map[string]any
}

// Chain returns conflist with aether-cni as its last plugin, replacing any
// earlier aether-cni entry, and whether that changed anything.
func Chain(conflist []byte, plugin map[string]any) ([]byte, bool, error) {
	doc, plugins, err := parse(conflist)
	if err != nil {
		return nil, false, err
	}
	entry := map[string]any{"type": PluginType}
	for k, v := range plugin {
		if k == "type" {
			return nil, false, fmt.Errorf("aether-cni's entry sets \"type\" itself; got %q", v)
		}
		entry[k] = v
	}
	kept := withoutAether(plugins)
	doc["plugins"] = append(kept, entry)
	return encode(doc, conflist)
}

// Unchain returns conflist without any aether-cni entry.
func Unchain(conflist []byte) ([]byte, bool, error) {
	doc, plugins, err := parse(conflist)
	if err != nil {
		return nil, false, err
	}
	doc["plugins"] = withoutAether(plugins)
	return encode(doc, conflist)
}

func parse(conflist []byte) (map[string]any, []any, error) {
	var doc map[string]any
	if err := json.Unmarshal(conflist, &doc); err != nil {
		return nil, nil, fmt.Errorf("conflist is not a JSON object: %w", err)
	}
	plugins, ok := doc["plugins"].([]any)
	if !ok || len(plugins) == 0 {
		return nil, nil, errors.New(`conflist has no "plugins" list to chain onto`)
	}
	return doc, plugins, nil
}

func withoutAether(plugins []any) []any {
	return slices.DeleteFunc(slices.Clone(plugins), func(p any) bool {
		m, ok := p.(map[string]any)
		return ok && m["type"] == PluginType
	})
}

// encode renders doc and reports whether it differs from the old bytes as
// JSON (key order and spacing aside).
func encode(doc map[string]any, old []byte) ([]byte, bool, error) {
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, false, fmt.Errorf("failed to encode the conflist: %w", err)
	}
	var prev map[string]any
	_ = json.Unmarshal(old, &prev)
	prevOut, _ := json.MarshalIndent(prev, "", "  ")
	return append(out, '\n'), !bytes.Equal(out, prevOut), nil
}

// ActiveConflist is the file the kubelet's runtime uses: the lexically first
// .conflist, .conf or .json in dir. Only a .conflist can be chained onto.
func ActiveConflist(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("failed to read CNI conf dir %q: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".conflist":
			return filepath.Join(dir, name), nil
		case ".conf", ".json":
			return "", fmt.Errorf("the active CNI config %q is a single-plugin file; aether-cni chains only onto a .conflist", filepath.Join(dir, name))
		}
	}
	return "", fmt.Errorf("no CNI config in %q yet (the pod network plugin writes it)", dir)
}

// Install copies the binary and chains the plugin into the active conflist.
// The conflist is read and the new one built before anything is written, so
// a node whose config cannot be chained onto gets nothing; the binary goes
// in before the entry that names it. It is idempotent: a node already
// carrying the same entry is not rewritten.
func Install(c Config) (changed bool, err error) {
	path, err := ActiveConflist(c.ConfDir)
	if err != nil {
		return false, err
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("failed to read CNI config %q: %w", path, err)
	}
	out, changed, err := Chain(old, c.Plugin)
	if err != nil {
		return false, fmt.Errorf("CNI config %q: %w", path, err)
	}
	if err := copyBinary(c.Binary, filepath.Join(c.BinDir, PluginType)); err != nil {
		return false, err
	}
	if !changed {
		return false, nil
	}
	return true, writeAtomic(path, out, 0o644)
}

// Installed reports whether the node carries the plugin as c would install
// it: the binary in place and, in the active conflist, aether-cni as the
// last plugin with c's entry. It is the installer's readiness: a pod
// created once the installer is ready is captured.
func Installed(c Config) error {
	if _, err := os.Stat(filepath.Join(c.BinDir, PluginType)); err != nil {
		return fmt.Errorf("no %s in %q: %w", PluginType, c.BinDir, err)
	}
	path, err := ActiveConflist(c.ConfDir)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("failed to read CNI config %q: %w", path, err)
	}
	if _, changed, err := Chain(b, c.Plugin); err != nil || changed {
		return errors.Join(fmt.Errorf("CNI config %q does not end with this installer's %s entry", path, PluginType), err)
	}
	return nil
}

// Uninstall removes the plugin's entry and its binary, so a node whose
// installer is gone does not call a plugin that may no longer be current.
func Uninstall(c Config) error {
	var errs []error
	if path, err := ActiveConflist(c.ConfDir); err == nil {
		_, err = rewrite(path, Unchain)
		errs = append(errs, err)
	}
	if err := os.Remove(filepath.Join(c.BinDir, PluginType)); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("failed to remove %s from %q: %w", PluginType, c.BinDir, err))
	}
	return errors.Join(errs...)
}

func rewrite(path string, edit func([]byte) ([]byte, bool, error)) (bool, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("failed to read CNI config %q: %w", path, err)
	}
	out, changed, err := edit(old)
	if err != nil {
		return false, fmt.Errorf("CNI config %q: %w", path, err)
	}
	if !changed {
		return false, nil
	}
	return true, writeAtomic(path, out, 0o644)
}

func copyBinary(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("failed to open the plugin binary %q: %w", src, err)
	}
	defer in.Close()
	var b bytes.Buffer
	if _, err := io.Copy(&b, in); err != nil {
		return fmt.Errorf("failed to read the plugin binary %q: %w", src, err)
	}
	return writeAtomic(dst, b.Bytes(), 0o755)
}

// writeAtomic renames a finished file into place: the runtime may exec the
// plugin or read the conflist at any moment and must never see half of it.
func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return fmt.Errorf("failed to write %q: %w", path, err)
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr, os.Chmod(tmp.Name(), mode)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("failed to write %q: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("failed to replace %q: %w", path, err)
	}
	return nil
}
