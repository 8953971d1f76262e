package nodeimage

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEveryPlacedProgramIsBuilt holds the image's layout to the groups: a
// program placed in the node that no group builds would fail the build
// late, and a built node program with no place would be left out.
func TestEveryPlacedProgramIsBuilt(t *testing.T) {
	built := map[string]bool{}
	for _, g := range Groups() {
		for _, p := range g.Packages {
			name := binaryName(p)
			if to, ok := g.Rename[name]; ok {
				name = to
			}
			built[name] = true
		}
	}
	for name := range placement {
		if !built[name] {
			t.Errorf("%s is placed in the node but no group builds it", name)
		}
	}
	for _, cp := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd", "pause"} {
		if !built[cp] {
			t.Errorf("no group builds %s, which a control-plane image holds", cp)
		}
	}
}

func TestBinaryNameIsGoBuilds(t *testing.T) {
	for pkg, want := range map[string]string{"go.etcd.io/etcd/server/v3": "server", "k8s.io/kubernetes/cmd/kubelet": "kubelet",
		"github.com/opencontainers/runc": "runc"} {
		if got := binaryName(pkg); got != want {
			t.Errorf("binaryName(%s) = %s, want %s", pkg, got, want)
		}
	}
}

func TestKubeadmConfigTurnsOffWhatIsNotBuilt(t *testing.T) {
	var cfg struct {
		APIVersion, Kind, KubernetesVersion, ImageRepository string
		DNS                                                  struct{ Disabled bool } `json:"dns"`
		Proxy                                                struct{ Disabled bool }
	}
	if err := yaml.UnmarshalStrict([]byte(KubeadmConfig()), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.APIVersion != "kubeadm.k8s.io/v1beta4" || cfg.Kind != "ClusterConfiguration" || cfg.KubernetesVersion != Kubernetes ||
		cfg.ImageRepository != ImageRepository || !cfg.DNS.Disabled || !cfg.Proxy.Disabled {
		t.Errorf("KubeadmConfig decodes to %+v", cfg)
	}
}

func TestVersionStampNamesTheRelease(t *testing.T) {
	f := versionLDFlags()
	for _, want := range []string{"k8s.io/component-base/version.gitVersion=" + Kubernetes, "k8s.io/client-go/pkg/version.gitVersion=" + Kubernetes,
		"k8s.io/component-base/version.gitMinor=37", "gitTreeState=clean"} {
		if !strings.Contains(f, want) {
			t.Errorf("ldflags %q lack %q", f, want)
		}
	}
}

func TestKeyFollowsTheFiles(t *testing.T) {
	b := Builder{Root: "../../.."}
	k1, err := imageKey(b)
	if err != nil {
		t.Fatal(err)
	}
	g := Groups()[0]
	kg, err := b.Key(g)
	if err != nil {
		t.Fatal(err)
	}
	g.LDFlags += " -X x.y=z"
	kg2, _ := b.Key(g)
	if kg == kg2 {
		t.Error("a group's key ignores its ldflags")
	}
	if k2, _ := imageKey(b); k1 != k2 {
		t.Errorf("the image key is not stable: %s then %s", k1, k2)
	}
}
