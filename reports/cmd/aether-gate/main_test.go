package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/reports/render"
	"github.com/aether-mesh/aether/rigs/redgreen"
	"github.com/aether-mesh/aether/soak/grade"
	"github.com/aether-mesh/aether/soak/manifest"
)

func suite(name string, v redgreen.Verdict) redgreen.Result {
	return redgreen.Result{Suite: name, Subject: "s", Verdict: v, Reason: "r", Started: time.Unix(0, 0).UTC(),
		Cases: []redgreen.CaseResult{
			{Name: "redirect-control", Role: redgreen.Control, Expected: "ipi_addr is 127.0.0.1", Observed: "ipi_addr 127.0.0.1", Matched: true},
			{Name: "tproxy", Role: redgreen.Subject, Expected: "ipi_addr is the ClusterIP", Observed: "ipi_addr 10.96.0.10", Matched: v == redgreen.Pass},
		}}
}

func soak(t *testing.T, dir, fixture string) {
	t.Helper()
	m, err := manifest.Load(filepath.Join("../../../fixtures/soaks", fixture, "manifest.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := grade.Run(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := render.WriteSoak(filepath.Join(dir, "soaks", m.Name), g, nil); err != nil {
		t.Fatal(err)
	}
}

func gate(t *testing.T, dir string, requireSoak bool, required ...string) (int, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(dir, requireSoak, required, &out, &errb)
	return code, out.String() + errb.String()
}

func TestGate(t *testing.T) {
	dir := t.TempDir()
	if code, out := gate(t, dir, false); code != 1 || !strings.Contains(out, "nothing was proven") {
		t.Errorf("no suites: exit %d\n%s", code, out)
	}
	if err := suite("udproute-selection", redgreen.Pass).Write(filepath.Join(dir, "suites")); err != nil {
		t.Fatal(err)
	}
	code, out := gate(t, dir, false)
	if code != 0 || !strings.Contains(out, "redirect-control") || !strings.Contains(out, "PASS: 1 suite(s) and 0 soak(s) passed") {
		t.Errorf("one passing suite: exit %d\n%s", code, out)
	}
	// A required suite that wrote nothing (its bring-up failed before the
	// result) fails the gate, even though every result present passed.
	if code, out := gate(t, dir, false, "udproute-selection", "phase0"); code != 1 ||
		!strings.Contains(out, "suite phase0 wrote no result") || !strings.Contains(out, "1 of 2 suite(s)") {
		t.Errorf("required suite missing: exit %d\n%s", code, out)
	}
	if code, out := gate(t, dir, false, "udproute-selection"); code != 0 {
		t.Errorf("required suite present: exit %d\n%s", code, out)
	}
	if code, out := gate(t, dir, true); code != 1 || !strings.Contains(out, "-require-soak") {
		t.Errorf("-require-soak without a soak: exit %d\n%s", code, out)
	}

	soak(t, dir, "2026-09-28-rev247-same-build-ab")
	code, out = gate(t, dir, true)
	if code != 0 || !strings.Contains(out, "1.18× [1.14, 1.21]") || !strings.Contains(out, "PASS: 1 suite(s) and 1 soak(s) passed") {
		t.Errorf("passing suite and soak: exit %d\n%s", code, out)
	}

	soak(t, dir, "2026-09-30-resoak-1.0.13-84fb413")
	code, out = gate(t, dir, false)
	if code != 1 || !strings.Contains(out, "9 / 719,984 failed, SLO 99.999% allows 7") || !strings.Contains(out, "0 of 1 suite(s) and 1 of 2 soak(s) did not pass") {
		t.Errorf("failing soak: exit %d\n%s", code, out)
	}

	// A grade whose verdict was edited to PASS still carries its failing
	// gate; the gate re-derives the verdict.
	p := filepath.Join(dir, "soaks", "resoak-2026-09-30-1.0.13-84fb413", render.GradeFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), `"verdict": "FAIL",`, `"verdict": "PASS",`, 1)
	if edited == string(b) {
		t.Fatal("test is stale: no soak verdict to edit")
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := gate(t, dir, false); code != 1 {
		t.Errorf("edited grade passed: exit %d\n%s", code, out)
	}
	if err := os.RemoveAll(filepath.Join(dir, "soaks", "resoak-2026-09-30-1.0.13-84fb413")); err != nil {
		t.Fatal(err)
	}

	if err := suite("quic-resumption", redgreen.Fail).Write(filepath.Join(dir, "suites")); err != nil {
		t.Fatal(err)
	}
	code, out = gate(t, dir, false)
	if code != 1 || !strings.Contains(out, "1 of 2 suite(s) and 0 of 1 soak(s) did not pass") {
		t.Errorf("failing suite: exit %d\n%s", code, out)
	}
}
