package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The rig reads a scenario as the agent does, and refuses, before building
// anything, addresses outside its plan: each case is a one-word edit of a
// fixture that comes up as is.
func TestScenarioTyposAndOutOfPlanAddressesAreRefused(t *testing.T) {
	const fixture = "../../fixtures/scenarios/two-udp-services.yaml"
	orig, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := loadScenario(fixture); err != nil {
		t.Fatalf("the unedited fixture is refused: %v", err)
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"field in the wrong case", "clusterIP: 10.96.0.10", "clusterIp: 10.96.0.10",
			`service "demo/svc-a": field clusterIp: unknown field (did you mean clusterIP?)`},
		{"misspelt nested field", "protocol: UDP", "protocl: UDP",
			`service "demo/svc-a": field ports[0].protocl: unknown field`},
		{"pod outside the pod range", "ip: 10.244.1.10", "ip: 192.168.7.5",
			"pod demo/client-0: field ip: 192.168.7.5 is outside the rig's pod range 10.244.0.0/16"},
		{"clusterIP outside the service range", "clusterIP: 10.96.0.10", "clusterIP: 10.97.0.10",
			"service demo/svc-a: field clusterIP: 10.97.0.10 is outside the rig's service range 10.96.0.0/16"},
		{"clusterIP that is a pod's ip", "clusterIP: 10.96.0.10", "clusterIP: 10.244.2.10",
			`service "demo/svc-a": field clusterIP: 10.244.2.10 is the IP of pod demo/a-0`},
		{"pod ip used twice", "ip: 10.244.2.11", "ip: 10.244.2.10",
			`pod "demo/b-0": field ip: 10.244.2.10 already belongs to pod demo/a-0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := strings.Replace(string(orig), tc.from, tc.to, 1)
			if edited == string(orig) {
				t.Fatalf("the fixture holds no %q to edit", tc.from)
			}
			p := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			_, _, err := loadScenario(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("loadScenario = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
