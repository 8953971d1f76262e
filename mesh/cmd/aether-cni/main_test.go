package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
)

// envRunAsPlugin makes the test binary act as the plugin: libcni executes
// it as "aether-cni" through a symlink, so these tests drive the real
// binary's dispatch (skel, the wired commands) the way a runtime does.
const envRunAsPlugin = "AETHER_CNI_TEST_RUN_AS_PLUGIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunAsPlugin) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runtime returns a libcni runtime whose plugin path holds only this binary
// named aether-cni, and whose attachment cache is empty.
func runtime(t *testing.T) *libcni.CNIConfig {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(self, filepath.Join(dir, "aether-cni")); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envRunAsPlugin, "1")
	return libcni.NewCNIConfigWithCacheDir([]string{dir}, t.TempDir(), nil)
}

func confList(t *testing.T, cniVersion, plugin string) *libcni.NetworkConfigList {
	t.Helper()
	l, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"` + cniVersion + `","name":"aether-test","plugins":[` + plugin + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestAdvertisesSpec11(t *testing.T) {
	info, err := runtime(t).GetVersionInfo(context.Background(), "aether-cni")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(info.SupportedVersions(), ","); got != "1.0.0,1.1.0" {
		t.Fatalf("supported versions %s, want 1.0.0,1.1.0", got)
	}
}

// TestGC drives GC as libcni's GCNetworkList sends it: the configuration
// with cni.dev/valid-attachments (and its misspelt twin) injected.
func TestGC(t *testing.T) {
	valid := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "c1", IfName: "eth0"}}}
	for _, c := range []struct {
		name, plugin string
		args         *libcni.GCArgs
		code         uint   // 0: success
		msg          string // in the error
	}{
		{"valid attachments", `{"type":"aether-cni","captureMode":"redirect"}`, valid, 0, ""},
		{"no attachments", `{"type":"aether-cni"}`, &libcni.GCArgs{}, 0, ""},
		{"bad capture mode", `{"type":"aether-cni","captureMode":"ebpf"}`, valid, types.ErrInvalidNetworkConfig, `unknown capture mode "ebpf"`},
		{"misspelt key", `{"type":"aether-cni","captureMod":"redirect"}`, valid, types.ErrInvalidNetworkConfig, `unknown configuration key "captureMod"`},
		{"attachment without container ID", `{"type":"aether-cni"}`,
			&libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "c1", IfName: "eth0"}, {IfName: "eth0"}}},
			types.ErrInvalidNetworkConfig, `"cni.dev/valid-attachments[1].containerID"`},
		{"attachment without ifname", `{"type":"aether-cni"}`,
			&libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: "c1"}}},
			types.ErrInvalidNetworkConfig, `"cni.dev/valid-attachments[0].ifname"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The handoff records GC collects live beside a socket of the
			// test's own, not in the machine's /run/aether.
			plugin := strings.Replace(c.plugin, `{"type":"aether-cni"`, `{"type":"aether-cni","agentSocket":"`+filepath.Join(t.TempDir(), "cni.sock")+`"`, 1)
			err := runtime(t).GCNetworkList(context.Background(), confList(t, "1.1.0", plugin), c.args)
			if c.code == 0 {
				if err != nil {
					t.Fatalf("GC failed: %v", err)
				}
				return
			}
			var e *types.Error
			if !errors.As(err, &e) {
				t.Fatalf("GC answered %v, want CNI error %d containing %q", err, c.code, c.msg)
			}
			if e.Code != c.code || !strings.Contains(e.Msg, c.msg) {
				t.Fatalf("GC answered code %d %q, want code %d containing %q", e.Code, e.Msg, c.code, c.msg)
			}
		})
	}
}
