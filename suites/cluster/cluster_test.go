package cluster

import (
	"strings"
	"testing"
)

func TestProviderSwitch(t *testing.T) {
	for v, want := range map[string]string{"": Netns, "netns": Netns, "kind": Kind} {
		got, err := parseProvider(v)
		if err != nil || got != want {
			t.Errorf("%s=%q: %q, %v; want %q", EnvProvider, v, got, err, want)
		}
	}
	for _, v := range []string{"kinD", "k3d", " netns"} {
		_, err := parseProvider(v)
		if err == nil {
			t.Errorf("%s=%q was accepted", EnvProvider, v)
			continue
		}
		for _, part := range []string{EnvProvider, `"` + v + `"`, `"netns"`, `"kind"`} {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%s=%q: error %q does not name %s", EnvProvider, v, err, part)
			}
		}
	}
}

func TestSelectedReadsTheEnvironment(t *testing.T) {
	t.Setenv(EnvProvider, "kind")
	if got, err := Selected(); err != nil || got != Kind {
		t.Fatalf("Selected() = %q, %v", got, err)
	}
	t.Setenv(EnvProvider, "minikube")
	if _, err := Selected(); err == nil || !strings.Contains(err.Error(), "minikube") {
		t.Fatalf("Selected() with minikube: %v", err)
	}
}
