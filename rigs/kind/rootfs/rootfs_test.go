package rootfs

import (
	"context"
	"strings"
	"testing"
)

func TestKeyFollowsWhatDecidesTheFiles(t *testing.T) {
	base := Spec{Repository: "r", Suite: "bookworm", Packages: []string{"b", "a"}, Changes: []string{"ENV x=1"}, Setup: "true"}
	same := base
	same.Packages = []string{"a", "b"}
	if base.Key() != same.Key() {
		t.Errorf("package order changed the key: %s vs %s", base.Key(), same.Key())
	}
	for name, mutate := range map[string]func(*Spec){
		"suite":    func(s *Spec) { s.Suite = "trixie" },
		"packages": func(s *Spec) { s.Packages = append([]string{"c"}, s.Packages...) },
		"changes":  func(s *Spec) { s.Changes = []string{"ENV x=2"} },
		"setup":    func(s *Spec) { s.Setup = "false" },
	} {
		s := base
		mutate(&s)
		if s.Key() == base.Key() {
			t.Errorf("a change of %s kept the key %s: a stale image would be reused", name, s.Key())
		}
	}
}

func TestBadSpecsAreRefusedBeforeAnythingRuns(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Repository: "r:tag", Suite: "bookworm"}, "without tag"},
		{Spec{Repository: "r"}, "no Debian suite"},
		{Spec{Repository: "r", Suite: "bookworm", Packages: []string{"systemd", "a,b"}}, `package 1 ("a,b")`},
	} {
		_, err := Build(context.Background(), tc.spec, t.TempDir(), t.Logf)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%+v) = %v, want an error naming %q", tc.spec, err, tc.want)
		}
	}
}
