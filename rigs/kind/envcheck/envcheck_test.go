package envcheck

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/rigs/kind/rootfs"
	"github.com/aether-mesh/aether/rigs/privileged"
)

func TestMissingAndDockerCaps(t *testing.T) {
	// This machine's daemon: every capability but CAP_SYS_RESOURCE (bit 24).
	const bnd = 0x1fffeffffff
	if got := MissingCaps(bnd); !slices.Equal(got, []string{"CAP_SYS_RESOURCE"}) {
		t.Errorf("MissingCaps(%#x) = %v, want [CAP_SYS_RESOURCE]", uint64(bnd), got)
	}
	caps := DockerCaps(bnd)
	if slices.Contains(caps, "SYS_RESOURCE") || slices.Contains(caps, "BPF") {
		t.Errorf("DockerCaps(%#x) = %v: names a capability the daemon lacks or Docker 20.10 cannot name", uint64(bnd), caps)
	}
	if len(caps) != dockerKnown-1 || !slices.Contains(caps, "SYS_ADMIN") || !slices.Contains(caps, "NET_ADMIN") {
		t.Errorf("DockerCaps(%#x) = %d capabilities %v, want %d with SYS_ADMIN and NET_ADMIN", uint64(bnd), len(caps), caps, dockerKnown-1)
	}
}

// TestKindNodeArgsAreKinds reads the docker provider of the kind module this
// repository builds against: a kind bump that changes a node's flags must
// change KindNodeArgs too, or the check asks about containers kind does not
// make.
func TestKindNodeArgsAreKinds(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-json", "sigs.k8s.io/kind").Output()
	if err != nil {
		t.Fatalf("go list -m sigs.k8s.io/kind: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go list -m sigs.k8s.io/kind: no module directory in %s (%v)", out, err)
	}
	files, _ := filepath.Glob(filepath.Join(m.Dir, "pkg/cluster/internal/providers/docker/*.go"))
	var src strings.Builder
	for _, f := range files {
		if b, err := os.ReadFile(f); err == nil && !strings.HasSuffix(f, "_test.go") {
			src.Write(b)
		}
	}
	if src.Len() == 0 {
		t.Fatalf("no docker provider source under %s", m.Dir)
	}
	for _, a := range KindNodeArgs(true) {
		if !strings.Contains(src.String(), strconv.Quote(a)) {
			t.Errorf("kind's docker provider does not pass %q", a)
		}
	}
	if !strings.Contains(src.String(), strconv.Quote(PrivilegedAsEnv)) {
		t.Errorf("kind's docker provider does not read %s: the patch of third_party/kind is gone", PrivilegedAsEnv)
	}
	within := WithinArgs(true, []string{"SYS_ADMIN"})
	if slices.Contains(within, "--privileged") || !slices.Contains(within, "--cap-add") {
		t.Errorf("WithinArgs = %v: want --privileged replaced by --cap-add", within)
	}
}

// TestEngine runs the check where a container engine answers, and holds its
// classification of kind's own flags to what the daemon's version and
// capabilities say, read here apart from the check: Docker before 23 asks
// for every capability under --privileged, and runc refuses any the daemon
// does not hold.
func TestEngine(t *testing.T) {
	if err := exec.Command("docker", "version").Run(); err != nil {
		t.Skipf("no container engine answers (docker version: %v)", err)
	}
	privileged.Require(t, privileged.SysAdmin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	img, err := rootfs.Build(ctx, ProbeSpec(), t.TempDir(), t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run(ctx, Options{Image: img, Say: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", r.Table())

	major, _ := strconv.Atoi(strings.SplitN(r.Server, ".", 2)[0])
	bnd, err := capBnd(dockerdStatus(t))
	if err != nil {
		t.Fatal(err)
	}
	refuses := major < 23 && len(MissingCaps(bnd)) > 0
	if RefusesPrivileged(r.Server, bnd) != refuses {
		t.Errorf("RefusesPrivileged(%s, %#x) = %v, want %v", r.Server, bnd, !refuses, refuses)
	}
	start := r.Exact[0]
	switch {
	case refuses && (start.Status != Fail || !strings.Contains(start.Evidence, "apply caps")):
		t.Errorf("Docker %s whose daemon lacks %v must refuse --privileged with 'apply caps'; the check says %s: %s", r.Server, MissingCaps(bnd), start.Status, start.Evidence)
	case !refuses && start.Status != Pass:
		t.Errorf("Docker %s with daemon bounding set %#x should start kind's node; the check says: %s", r.Server, bnd, start.Evidence)
	}
	// Every check is conclusive: pass or fail with evidence. Only a node
	// that did not start or boot leaves the checks inside it not reached.
	for _, cs := range [][]Check{r.Exact, r.Within} {
		stopped := false
		for i, c := range cs {
			switch {
			case stopped && c.Status != NotReached:
				t.Errorf("%s: %s, although the node did not start or boot", c.Name, c.Status)
			case !stopped && (c.Status == NotReached || c.Evidence == ""):
				t.Errorf("%s: %s with evidence %q: inconclusive", c.Name, c.Status, c.Evidence)
			}
			stopped = stopped || (i < 2 && c.Status == Fail)
		}
	}
	if left, _ := exec.Command("docker", "ps", "--all", "--quiet", "--filter", "label="+label+"="+strconv.Itoa(os.Getpid())).Output(); len(strings.TrimSpace(string(left))) > 0 {
		t.Errorf("the check left containers behind: %s", left)
	}
}

// dockerdStatus is the daemon's /proc status file, found by name.
func dockerdStatus(t *testing.T) string {
	dirs, _ := filepath.Glob("/proc/[0-9]*/comm")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && strings.TrimSpace(string(b)) == "dockerd" {
			return filepath.Join(filepath.Dir(d), "status")
		}
	}
	t.Skip("the engine's daemon does not run on this machine (remote engine): its capabilities cannot be read here")
	return ""
}
