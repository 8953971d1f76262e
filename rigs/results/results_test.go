package results

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func row(name string, role Role, matched bool) CaseResult {
	return CaseResult{Name: name, Role: role, Expected: "e", Observed: "o", Witness: "the backend's record",
		Facts: map[string]any{"delivered": 1}, Matched: matched, Reason: "r"}
}

func TestDecideFollowsTheRows(t *testing.T) {
	vacuous := row("C2", Control, true)
	vacuous.Witness, vacuous.Facts = "", nil
	noFacts := row("C1", Subject, true)
	noFacts.Facts = nil
	for _, c := range []struct {
		name string
		r    Result
		want Verdict
		why  string
	}{
		{"red then green", Result{Cases: []CaseResult{row("C2", Control, true), row("C1", Subject, true)}}, Pass, "1 control(s) red"},
		{"control unmatched", Result{Cases: []CaseResult{row("C2", Control, false), row("C1", Subject, true)}}, BrokenRig, "control C2 did not show"},
		{"vacuous control", Result{Cases: []CaseResult{vacuous, row("C1", Subject, true)}}, BrokenRig, "declared matched with no witness and no facts"},
		{"subject without facts", Result{Cases: []CaseResult{row("C2", Control, true), noFacts}}, Fail, "C1: declared matched with no facts"},
		{"no control", Result{Cases: []CaseResult{row("C1", Subject, true)}}, BrokenRig, "no control"},
		{"no subject", Result{Cases: []CaseResult{row("C2", Control, true)}}, Fail, "no subject"},
		{"could not start", Result{CouldNotStart: "sweep failed: EPERM"}, Fail, "could not start: sweep failed"},
	} {
		if v, why := Decide(c.r); v != c.want || !strings.Contains(why, c.why) {
			t.Errorf("%s: got %s (%s), want %s containing %q", c.name, v, why, c.want, c.why)
		}
	}
}

func TestCheckSuiteRefusesAForgedVerdict(t *testing.T) {
	r := Result{Suite: "phase0", Verdict: Pass, Cases: []CaseResult{row("C2", Control, false), row("C1", Subject, false)}}
	got := strings.Join(CheckSuite("x/phase0.json", r), "\n")
	if !strings.Contains(got, "x/phase0.json: declares PASS but its rows decide BROKEN_RIG: control C2 did not show its signature") {
		t.Fatalf("forged verdict not named:\n%s", got)
	}
	r.Verdict, _ = Decide(r)
	if got := CheckSuite("x/phase0.json", r); len(got) != 0 {
		t.Fatalf("an honest BROKEN_RIG result has problems: %v", got)
	}
}

func TestCheckSuiteRefusesAVacuousControl(t *testing.T) {
	vacuous := row("C2", Control, true)
	vacuous.Witness, vacuous.Facts = "", nil
	r := Result{Suite: "phase0", Verdict: Pass, Cases: []CaseResult{vacuous, row("C1", Subject, true)}}
	got := strings.Join(CheckSuite("x/phase0.json", r), "\n")
	for _, want := range []string{
		"x/phase0.json: row C2 (control) declares matched with no witness and no facts",
		"declares PASS but its rows decide BROKEN_RIG",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
	if !strings.Contains(r.Table(), "VACUOUS (no witness and no facts)") {
		t.Errorf("the table shows a vacuous row as matched:\n%s", r.Table())
	}
}

func TestStamp(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	t.Setenv(EnvRevision, rev)
	for dirty, want := range map[string]bool{"false": false, "true": true, "": true, "maybe": true} {
		t.Setenv(EnvDirty, dirty)
		if b := Stamp(nil); b.Revision != rev || b.Dirty != want || b.Unknown != "" {
			t.Errorf("%s=%q: got %+v, want dirty %v", EnvDirty, dirty, b, want)
		}
	}
	// A test binary has no VCS stamp, so without make nothing names the
	// revision, and the stamp says so.
	t.Setenv(EnvRevision, "")
	b := Stamp(nil)
	if b.Revision != "" || !strings.Contains(b.Unknown, EnvRevision+" is unset") {
		t.Errorf("unstamped: got %+v", b)
	}
	if b.Go == "" || b.Kernel == "" || strings.HasPrefix(b.Kernel, "unknown") {
		t.Errorf("no Go version or kernel: %+v", b)
	}
}

func TestHashBinaries(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "aether-agent"), []byte("abc"), 0o755); err != nil {
		t.Fatal(err)
	}
	sums, err := HashBinaries(dir, "aether-agent")
	if err != nil {
		t.Fatal(err)
	}
	// sha256("abc"), computed independently.
	const want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if got := Stamp(sums).Binaries["aether-agent"]; got != want {
		t.Errorf("sha256 %q, want %q", got, want)
	}
	// A stamp names only the binaries it is given: nothing carries over
	// from another result's.
	if got := Stamp(nil).Binaries; got != nil {
		t.Errorf("Stamp(nil).Binaries = %v, want none", got)
	}
	_, err = HashBinaries(dir, "aether-agent", "aether-proxy")
	if err == nil || !strings.Contains(err.Error(), "aether-proxy") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing binary: %v", err)
	}
}

func TestJudges(t *testing.T) {
	const rev = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, c := range []struct {
		name       string
		b          Build
		allowDirty bool
		want       string
	}{
		{"same clean build", Build{Revision: rev}, false, ""},
		{"stale revision", Build{Revision: "bbbb"}, false, "judged build bbbb, not " + rev},
		{"missing revision", Build{Unknown: "not a checkout"}, false, "records no build (not a checkout)"},
		{"dirty refused", Build{Revision: rev, Dirty: true}, false, "uncommitted changes"},
		{"dirty allowed", Build{Revision: rev, Dirty: true}, true, ""},
	} {
		if got := c.b.Judges(rev, c.allowDirty); (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestSoakCovers(t *testing.T) {
	const rev = "84fb413c0ffee0000000000000000000000000ab"
	for _, c := range []struct {
		builds []string
		want   bool
	}{
		{[]string{rev}, true},
		{[]string{"84fb413"}, true},
		{[]string{"1.0.13-84fb413"}, true},
		{[]string{"rev247"}, false},
		{[]string{"84fb41"}, false}, // too short to name a commit
		{[]string{"rev239", "1.0.13-84fb414"}, false},
	} {
		if got := SoakCovers(c.builds, rev); got != c.want {
			t.Errorf("%v covers %s: %v, want %v", c.builds, rev, got, c.want)
		}
	}
}

func TestGateInputsDecide(t *testing.T) {
	for _, c := range []struct {
		name string
		in   GateInputs
		want Verdict
	}{
		{"ratio under", GateInputs{Ratio: &RatioInputs{Estimate: 1.18, Lower: f(1.14), Upper: f(1.21), Bounded: true, Max: 1.5}}, Pass},
		{"ratio over", GateInputs{Ratio: &RatioInputs{Estimate: 1.7, Lower: f(1.6), Upper: f(1.8), Bounded: true, Max: 1.5}}, Fail},
		{"ratio straddles", GateInputs{Ratio: &RatioInputs{Estimate: 1.45, Lower: f(1.4), Upper: f(1.6), Bounded: true, Max: 1.5}}, Inconclusive},
		{"ratio bounded without its interval", GateInputs{Ratio: &RatioInputs{Estimate: 1.1, Bounded: true, Max: 1.5}}, Fail},
		{"ratio unbounded", GateInputs{Ratio: &RatioInputs{Estimate: 1.1, Max: 1.5}}, Inconclusive},
		{"ratio refused", GateInputs{Ratio: &RatioInputs{Refused: "two builds", Upper: f(1), Bounded: true, Max: 1.5}}, Refused},
		{"count at limit", GateInputs{Count: &CountInputs{Count: 0, Limit: 0}}, Pass},
		{"count over", GateInputs{Count: &CountInputs{Count: 1060, Limit: 0}}, Fail},
		// 99.999% of 719,984 allows floor(7.19984) = 7 failures.
		{"liveness 7 of 719,984", GateInputs{Liveness: &LivenessInputs{Failed: 7, Total: 719984, SLO: "99.999"}}, Pass},
		{"liveness 9 of 719,984", GateInputs{Liveness: &LivenessInputs{Failed: 9, Total: 719984, SLO: "99.999"}}, Fail},
		{"liveness no probes", GateInputs{Liveness: &LivenessInputs{SLO: "99.9"}}, Inconclusive},
	} {
		if v, err := c.in.Decide(); err != nil || v != c.want {
			t.Errorf("%s: got %s, %v; want %s", c.name, v, err, c.want)
		}
	}
	for name, in := range map[string]GateInputs{
		"no inputs":  {},
		"two kinds":  {Count: &CountInputs{}, Liveness: &LivenessInputs{Total: 1, SLO: "99"}},
		"bad SLO":    {Liveness: &LivenessInputs{Total: 1, SLO: "120"}},
		"bad counts": {Liveness: &LivenessInputs{Failed: 2, Total: 1, SLO: "99"}},
	} {
		if v, err := in.Decide(); err == nil || v == Pass {
			t.Errorf("%s: got %s, %v; want an error and no pass", name, v, err)
		}
	}
}

func TestCheckSoakRefusesAnEditedGate(t *testing.T) {
	g := SoakGrade{Soak: "resoak", Verdict: Pass, Gates: []Gate{
		{Name: "liveness SLO", Verdict: Pass, Inputs: GateInputs{Liveness: &LivenessInputs{Failed: 9, Total: 719984, SLO: "99.999"}}},
		{Name: "503 NC", Verdict: Pass, Inputs: GateInputs{Count: &CountInputs{Count: 0}}},
		{Name: "hand-added", Verdict: Pass},
	}}
	got := strings.Join(CheckSoak("s/grade.json", g), "\n")
	for _, want := range []string{
		`s/grade.json: gate "liveness SLO" declares PASS but its inputs decide FAIL`,
		`s/grade.json: gate "hand-added": the gate carries no inputs`,
		"s/grade.json: declares PASS but its gates decide FAIL (fail: liveness SLO, hand-added)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in:\n%s", want, got)
		}
	}
}

func f(v float64) *float64 { return &v }

// A row that is unmatched and records no reason still gets one in the
// verdict, so the gate never prints a bare "name: ".
func TestDecideNamesWhyAnUnmatchedRowHasNoReason(t *testing.T) {
	silent := row("C1", Subject, false)
	silent.Reason = ""
	_, why := Decide(Result{Cases: []CaseResult{row("C2", Control, true), silent}})
	if want := "C1: not matched, and the row records no reason"; why != want {
		t.Errorf("got %q, want %q", why, want)
	}
}

// The table's verdict line is the rows' verdict: a result that declares
// PASS over a red row must not print "PASS" under it.
func TestTableShowsTheRowsVerdictNotTheDeclaredOne(t *testing.T) {
	r := Result{Suite: "udproute", Verdict: Pass, Reason: "1 control(s) red, 1 subject(s) green",
		Cases: []CaseResult{row("C2", Control, true), row("C1", Subject, false)}}
	last := strings.TrimSpace(r.Table())
	last = last[strings.LastIndex(last, "\n")+1:]
	if want := "udproute: FAIL (C1: r); the result declares PASS"; last != want {
		t.Errorf("verdict line %q, want %q", last, want)
	}
	r.Verdict, r.Reason = Decide(r)
	if !strings.HasSuffix(r.Table(), "udproute: FAIL (C1: r)\n") {
		t.Errorf("an honest FAIL result's table:\n%s", r.Table())
	}
}
