package workflows

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const root = "../.."

// workflow is the part of a GitHub Actions workflow these checks read;
// anything else in a file is an error, so a misspelt key (`step:`) is not
// read as a workflow without steps.
type workflow struct {
	Name string         `json:"name"`
	On   any            `json:"on"`
	Jobs map[string]job `json:"jobs"`
}

type job struct {
	RunsOn         string `json:"runs-on"`
	TimeoutMinutes int    `json:"timeout-minutes"`
	Steps          []step `json:"steps"`
}

type step struct {
	Name string            `json:"name"`
	Uses string            `json:"uses"`
	Run  string            `json:"run"`
	If   string            `json:"if"`
	With map[string]any    `json:"with"`
	Env  map[string]string `json:"env"`
}

func load(path string) (workflow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return workflow{}, err
	}
	// YAML 1.1 reads a bare `on` key as true; the workflow syntax means the
	// word.
	js, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return workflow{}, fmt.Errorf("%s: %w", path, err)
	}
	js = []byte(strings.Replace(string(js), `"true":`, `"on":`, 1))
	var w workflow
	strict, err := kjson.UnmarshalStrict(js, &w)
	if err == nil && len(strict) > 0 {
		err = strict[0]
	}
	if err != nil {
		return workflow{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(w.Jobs) == 0 {
		return workflow{}, fmt.Errorf("%s: no jobs", path)
	}
	for name, j := range w.Jobs {
		if j.RunsOn == "" || len(j.Steps) == 0 {
			return workflow{}, fmt.Errorf("%s: job %s: needs runs-on and steps", path, name)
		}
		for i, s := range j.Steps {
			if (s.Uses == "") == (s.Run == "") {
				return workflow{}, fmt.Errorf("%s: job %s: step %d (%s): needs exactly one of uses and run", path, name, i, s.Name)
			}
		}
	}
	return w, nil
}

// triggers reads `on` in any of its three spellings: an event, a list of
// events, or events with their settings.
func triggers(w workflow) map[string]any {
	out := map[string]any{}
	switch on := w.On.(type) {
	case string:
		out[on] = nil
	case []any:
		for _, e := range on {
			out[fmt.Sprint(e)] = nil
		}
	case map[string]any:
		out = on
	}
	return out
}

// makeTargets reads the targets the Makefile defines.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	targets := map[string]bool{}
	rule := regexp.MustCompile(`^([a-z][a-z0-9 -]*):`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := rule.FindStringSubmatch(sc.Text()); m != nil && !strings.Contains(sc.Text(), ":=") {
			for _, name := range strings.Fields(m[1]) {
				targets[name] = true
			}
		}
	}
	return targets
}

var makeCall = regexp.MustCompile(`\bmake\s+([a-z][a-z0-9-]*)`)

// unknownTargets names every `make X` in w's steps that the Makefile lacks.
func unknownTargets(w workflow, targets map[string]bool) []string {
	var bad []string
	for name, j := range w.Jobs {
		for _, s := range j.Steps {
			for _, m := range makeCall.FindAllStringSubmatch(s.Run, -1) {
				if !targets[m[1]] {
					bad = append(bad, fmt.Sprintf("job %s step %q: make %s", name, s.Name, m[1]))
				}
			}
		}
	}
	return bad
}

// runs returns the run lines of w's steps.
func runs(w workflow) []string {
	var out []string
	for _, j := range w.Jobs {
		for _, s := range j.Steps {
			out = append(out, s.Run)
		}
	}
	return out
}

func uses(w workflow) []step {
	var out []step
	for _, j := range w.Jobs {
		out = append(out, j.Steps...)
	}
	return out
}

func TestEveryWorkflowDecodesAndCallsMakeTargetsThatExist(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(root, ".github", "workflows", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows under .github/workflows (%v)", err)
	}
	targets := makeTargets(t)
	for _, f := range files {
		w, err := load(f)
		if err != nil {
			t.Error(err)
			continue
		}
		if bad := unknownTargets(w, targets); len(bad) > 0 {
			t.Errorf("%s calls targets the Makefile lacks: %v", f, bad)
		}
	}
}

func TestTheChecksCatchAMissingTargetAndAMisspeltKey(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.yml")
	os.WriteFile(p, []byte("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n      - run: make soak-nightly\n"), 0o644)
	w, err := load(p)
	if err != nil {
		t.Fatal(err)
	}
	if bad := unknownTargets(w, makeTargets(t)); len(bad) != 1 || !strings.Contains(bad[0], "make soak-nightly") {
		t.Fatalf("a call of a target the Makefile lacks went unseen: %v", bad)
	}
	os.WriteFile(p, []byte("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    step:\n      - run: make test\n"), 0o644)
	if _, err := load(p); err == nil || !strings.Contains(err.Error(), "step") {
		t.Fatalf("a misspelt steps key was read: %v", err)
	}
}

func TestCIRunsMakeTestAsRootOnEveryPush(t *testing.T) {
	w, err := load(filepath.Join(root, ".github", "workflows", "ci.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := triggers(w)["push"]; !ok {
		t.Fatalf("ci.yml runs on %v, not on push", w.On)
	}
	if !slices.ContainsFunc(runs(w), func(r string) bool {
		return strings.HasPrefix(r, "sudo -E ") && strings.Contains(r, "AETHER_REQUIRE_PRIVILEGED=1") && strings.HasSuffix(r, "make test")
	}) {
		t.Fatalf("ci.yml has no step running make test as root with AETHER_REQUIRE_PRIVILEGED=1: %q", runs(w))
	}
}

func TestNightlySoaksOnAScheduleAndKeepsItsReports(t *testing.T) {
	w, err := load(filepath.Join(root, ".github", "workflows", "nightly.yml"))
	if err != nil {
		t.Fatal(err)
	}
	sched, ok := triggers(w)["schedule"].([]any)
	if !ok || len(sched) == 0 {
		t.Fatalf("nightly.yml has no schedule: %v", w.On)
	}
	if !slices.ContainsFunc(runs(w), func(r string) bool { return strings.HasPrefix(r, "sudo -E ") && strings.Contains(r, "make soak-run") }) {
		t.Fatalf("nightly.yml does not run make soak-run as root: %q", runs(w))
	}
	if bad := readsRootsFiles(w); len(bad) > 0 {
		t.Errorf("nightly.yml reads what make soak-run wrote as root before handing it to the runner's user (sudo chown -R … reports, if always()): %v", bad)
	}
	var uploaded string
	for _, s := range uses(w) {
		if strings.HasPrefix(s.Uses, "actions/upload-artifact@") {
			uploaded, _ = s.With["path"].(string)
			if s.If != "always()" {
				t.Errorf("the upload runs only on success (if %q): a failed soak's report is the one most needed", s.If)
			}
		}
	}
	for _, want := range []string{"reports/runs", "reports/index.html"} {
		if !strings.Contains(uploaded, want) {
			t.Errorf("nightly.yml uploads %q, not %s", uploaded, want)
		}
	}
}

// readsRootsFiles names each cache or upload step that reads reports/
// after a step ran make as root and before any always-run step gave
// reports/ back to the runner's user: a run folder holds root-only files
// (0600 state files, 0700 directories), which those actions, running as
// the runner's user, cannot read.
func readsRootsFiles(w workflow) []string {
	var bad []string
	for name, j := range w.Jobs {
		rootOwned := false
		for _, s := range j.Steps {
			switch {
			case strings.HasPrefix(s.Run, "sudo ") && strings.Contains(s.Run, "make "):
				rootOwned = true
			case strings.HasPrefix(s.Run, "sudo chown -R ") && strings.HasSuffix(strings.TrimSpace(s.Run), " reports") && s.If == "always()":
				rootOwned = false
			case rootOwned && (strings.HasPrefix(s.Uses, "actions/upload-artifact@") || strings.HasPrefix(s.Uses, "actions/cache/save@")):
				bad = append(bad, fmt.Sprintf("job %s step %q", name, s.Name))
			}
		}
	}
	return bad
}

func TestTheChecksCatchAnUploadOfRootsFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "bad.yml")
	os.WriteFile(p, []byte("name: x\non: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"+
		"      - run: sudo -E make soak-run\n      - uses: actions/upload-artifact@v4\n        name: up\n        if: always()\n"), 0o644)
	w, err := load(p)
	if err != nil {
		t.Fatal(err)
	}
	if bad := readsRootsFiles(w); len(bad) != 1 || !strings.Contains(bad[0], `"up"`) {
		t.Fatalf("an upload of root-owned files went unseen: %v", bad)
	}
}

func TestE2ERunsOnARunnerWithAContainerEngine(t *testing.T) {
	w, err := load(filepath.Join(root, ".github", "workflows", "e2e.yml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, j := range w.Jobs {
		if !strings.HasPrefix(j.RunsOn, "ubuntu-") {
			t.Errorf("job %s runs on %s: GitHub's Ubuntu runners are the ones with Docker", name, j.RunsOn)
		}
	}
	if !slices.Contains(runs(w), "make e2e") {
		t.Fatalf("e2e.yml does not run make e2e: %q", runs(w))
	}
}
