package provider

import (
	"errors"
	"strings"
	"testing"

	"github.com/aether-mesh/aether/suites/cluster"
)

func TestGetFollowsTheSwitch(t *testing.T) {
	called := 0
	netns := func() (cluster.Provider, error) {
		called++
		return cluster.NetnsProvider{}, nil
	}
	for _, v := range []string{"", "netns"} {
		t.Setenv(cluster.EnvProvider, v)
		p, err := Get(netns)
		if err != nil || p.Name() != cluster.Netns {
			t.Fatalf("%s=%q: %v, %v", cluster.EnvProvider, v, p, err)
		}
	}
	if called != 2 {
		t.Fatalf("the netns constructor ran %d times, want 2", called)
	}

	// kind outside a kind TestMain: no cluster was set up, and Get says
	// so rather than fall back to netns.
	t.Setenv(cluster.EnvProvider, "kind")
	if _, err := Get(netns); err == nil || !strings.Contains(err.Error(), "no kind cluster was set up") {
		t.Fatalf("kind without a cluster: %v", err)
	}
	t.Setenv(cluster.EnvProvider, "docker")
	_, err := Get(netns)
	if err == nil || !strings.Contains(err.Error(), `"docker"`) || !strings.Contains(err.Error(), `"netns"`) || !strings.Contains(err.Error(), `"kind"`) {
		t.Fatalf("an unknown provider: %v", err)
	}
	if called != 2 {
		t.Fatal("the netns constructor ran for a provider that is not netns")
	}
	// A netns constructor's failure is the suite's, unchanged.
	t.Setenv(cluster.EnvProvider, "")
	want := errors.New("skipped: not root")
	if _, err := Get(func() (cluster.Provider, error) { return nil, want }); !errors.Is(err, want) {
		t.Fatalf("the netns constructor's error: %v", err)
	}
}

// A suite that needs the embedded cluster runs nothing on kind and says
// so; it never reaches its tests (m is nil here: reaching it would panic).
func TestEmbeddedSuiteRefusesKind(t *testing.T) {
	t.Setenv(cluster.EnvProvider, "kind")
	if rc := runEmbedded(nil, "lifecycle", "agent restarts"); rc != 2 {
		t.Fatalf("runEmbedded on kind = %d, want 2", rc)
	}
}
