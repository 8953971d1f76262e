package images

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/aether-mesh/aether/rigs/wait"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// Every image is built from freshly compiled binaries and read back from
// its tarball: the tag it is loaded under, one layer holding exactly its
// binaries (executable, static, byte for byte what was built) and the
// entrypoint.
func TestImagesReadBackFromTheirTarballs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: compiles every image binary")
	}
	binDir, outDir := t.TempDir(), t.TempDir()
	var names []string
	for _, img := range All() {
		names = append(names, img.Binaries...)
	}
	if err := BuildBinaries(moduleRoot(t), binDir, names...); err != nil {
		t.Fatal(err)
	}
	// The agent image is the suites': its controls are built in.
	if out, _ := exec.Command(filepath.Join(binDir, "aether-agent"), "-h").CombinedOutput(); !strings.Contains(string(out), "-test-only-quic-resumption") {
		t.Errorf("the image's aether-agent -h lists no test-only control:\n%s", out)
	}
	for _, img := range All() {
		t.Run(img.File, func(t *testing.T) {
			path, err := Build(img, binDir, outDir)
			if err != nil {
				t.Fatal(err)
			}
			checkTags(t, path, img.Ref)
			tag, err := name.NewTag(img.Ref)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tarball.ImageFromPath(path, &tag)
			if err != nil {
				t.Fatalf("reading %s back under %s: %v", path, img.Ref, err)
			}
			cf, err := got.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cf.Config.Entrypoint, img.Entrypoint) || cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
				t.Fatalf("config: entrypoint %q, %s/%s; want %q, linux/%s", cf.Config.Entrypoint, cf.OS, cf.Architecture, img.Entrypoint, runtime.GOARCH)
			}
			layers, err := got.Layers()
			if err != nil || len(layers) != 1 {
				t.Fatalf("layers: %d, %v; want exactly one", len(layers), err)
			}
			rc, err := layers[0].Uncompressed()
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			files := readLayer(t, rc)
			var want []string
			for _, b := range img.Binaries {
				want = append(want, "usr/local/bin/"+b)
			}
			slices.Sort(want)
			if !slices.Equal(keys(files), want) {
				t.Fatalf("layer files %v, want %v", keys(files), want)
			}
			for _, b := range img.Binaries {
				f := files["usr/local/bin/"+b]
				built, err := os.ReadFile(filepath.Join(binDir, b))
				if err != nil {
					t.Fatal(err)
				}
				if f.mode&0o111 != 0o111 || !bytes.Equal(f.data, built) {
					t.Errorf("%s: mode %o, %d bytes; want executable by all, the %d bytes built", b, f.mode, len(f.data), len(built))
				}
				checkStatic(t, b, f.data)
			}
			if img.Ref == TestApp.Ref {
				checkHTTPEcho(t, files["usr/local/bin/aether-node"].data)
			}
		})
	}
}

// checkHTTPEcho runs the test app's aether-node, as read back from the
// image, as the mTLS scenario's pods run it (backend --http), and asks it
// one request carrying an XFCC header: the image holds the HTTP echo
// when its record shows the request with that XFCC.
func checkHTTPEcho(t *testing.T, binary []byte) {
	t.Helper()
	dir := t.TempDir()
	bin, record := filepath.Join(dir, "aether-node"), filepath.Join(dir, "record")
	if err := os.WriteFile(bin, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "backend", "--name", "dst-0", "--record", record, "--http", strconv.Itoa(port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	const xfcc = "By=spiffe://aether.test/ns/demo/sa/sa-dst;URI=spiffe://aether.test/ns/demo/sa/sa-a"
	var resp *http.Response
	// The image's aether-node listens once it has started: ask until it
	// answers.
	if _, werr := wait.Until(context.Background(), 10*time.Second, 50*time.Millisecond, func() (bool, error) {
		req, _ := http.NewRequest("GET", fmt.Sprintf("http://127.0.0.1:%d/image-check", port), nil)
		req.Header.Set("X-Forwarded-Client-Cert", xfcc)
		resp, err = http.DefaultClient.Do(req)
		return err == nil, nil
	}); werr != nil {
		t.Fatal(werr)
	}
	if err != nil {
		t.Fatalf("the image's aether-node serves no HTTP echo on %d: %v\n%s", port, err, out.String())
	}
	resp.Body.Close()
	b, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct{ Event, Payload, XFCC string }
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		if rec.Event == "http" {
			break
		}
	}
	if rec.Event != "http" || rec.Payload != fmt.Sprintf("127.0.0.1:%d/image-check", port) || rec.XFCC != xfcc {
		t.Fatalf("the image's HTTP echo recorded %+v, want the request with XFCC %q\n%s", rec, xfcc, b)
	}
}

// checkTags reads the docker-archive's manifest.json, which is what kind's
// image load (containerd's import) takes the image's name from.
func checkTags(t *testing.T, path, ref string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no manifest.json", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name != "manifest.json" {
			continue
		}
		var m []struct{ RepoTags []string }
		if err := json.NewDecoder(tr).Decode(&m); err != nil {
			t.Fatal(err)
		}
		if len(m) != 1 || !slices.Equal(m[0].RepoTags, []string{ref}) {
			t.Fatalf("manifest.json: %+v, want one image tagged %s", m, ref)
		}
		return
	}
}

type file struct {
	mode int64
	data []byte
}

func readLayer(t *testing.T, r io.Reader) map[string]file {
	t.Helper()
	out := map[string]file{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			if h.Mode&0o755 != 0o755 {
				t.Errorf("dir %s: mode %o", h.Name, h.Mode)
			}
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = file{mode: h.Mode, data: data}
	}
}

func keys(m map[string]file) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkStatic: an empty base has no dynamic loader, so a binary with an
// interpreter could not start in these images.
func checkStatic(t *testing.T, name string, data []byte) {
	t.Helper()
	ef, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		t.Errorf("%s is not an ELF executable: %v", name, err)
		return
	}
	for _, p := range ef.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s asks for a dynamic loader; the image has none", name)
		}
	}
}

func TestBuildNamesAMissingBinary(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "aether-agent"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Build(Agent, dir, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "aether-proxy") {
		t.Fatalf("Build without aether-proxy: %v", err)
	}
	if _, err := Build(Image{Ref: "Not A Ref", File: "x.tar"}, dir, t.TempDir()); err == nil {
		t.Fatal("a bad reference was accepted")
	}
	if err := BuildBinaries(moduleRoot(t), t.TempDir(), "aether-nothing"); err == nil || !strings.Contains(err.Error(), "aether-nothing") {
		t.Fatalf("an unknown binary: %v", err)
	}
}
