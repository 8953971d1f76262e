package main

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aether-mesh/aether/rigs/results"
)

func row(name string, role results.Role, matched bool, observed, reason string) results.CaseResult {
	return results.CaseResult{Name: name, Role: role, Expected: "e", Observed: observed, Reason: reason,
		Witness: "the backends' own records", Facts: map[string]any{"n": 20}, Matched: matched}
}

// Each line as a person reads it, written out by hand: the clock, the
// suite, the role, the case, the row's verdict by the red-then-green rules
// and the fact that decided it, cut at the width.
func TestCaseLine(t *testing.T) {
	vacuous := row("C2", results.Control, true, "delivered, ipi_addr 127.0.0.1", "")
	vacuous.Witness, vacuous.Facts = "", nil
	for _, tc := range []struct {
		name, at, suite string
		row             results.CaseResult
		want            string
	}{
		{"a subject green shows what its witness saw", "3:07", "udproute",
			row("selection-tproxy", results.Subject, true, "svc-a -> a-0=20; svc-b -> b-0=20", ""),
			" 3:07  udproute     subject  selection-tproxy        PASS  svc-a -> a-0=20; svc-b -> b-0=20"},
		{"a control red as it must be passes", "12:40", "cni-capture",
			row("redirect-udp", results.Control, true, "ipi_addr=127.0.0.1", ""),
			"12:40  cni-capture  control  redirect-udp            PASS  ipi_addr=127.0.0.1"},
		{"a control that did not go red is a broken rig, and says why", "0:05", "udproute",
			row("selection-redirect", results.Control, false, "svc-a -> a-0=20; svc-b -> b-0=20", "the services landed on different backends"),
			" 0:05  udproute     control  selection-redirect      BROKEN_RIG  the services landed on different backends"},
		{"a subject that did not go green fails, with its reason's first line", "1:02:03", "mtls",
			row("per-source-identity", results.Subject, false, "x", "panic: boom\ngoroutine 1 [running]:"),
			"1:02:03  mtls         subject  per-source-identity     FAIL  panic: boom …"},
		{"a match nobody witnessed does not count", "", "phase0", vacuous,
			"       phase0       control  C2                      BROKEN_RIG  declared matched with no witness and no facts"},
		{"a long name pushes the rest right", "4:00", "lifecycle",
			row("agent-restart-during-hot-restart", results.Subject, true, "hot restart", ""),
			" 4:00  lifecycle    subject  agent-restart-during-hot-restart  PASS  hot restart"},
		{"a long fact is cut at the width", "4:00", "lifecycle",
			row("rev245-migration", results.Subject, true, "fan-out of 6 persisted; node-b saw [quic:api.demo@batch.demo quic:api.demo@web.demo] carry traffic; 8.2 s after", ""),
			" 4:00  lifecycle    subject  rev245-migration        PASS  fan-out of 6 persisted; node-b saw [quic:api.demo@batch.demo…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := caseLine(tc.at, tc.suite, tc.row)
			if got != tc.want {
				t.Errorf("caseLine:\n got %q\nwant %q", got, tc.want)
			}
			if n := utf8.RuneCountInString(got); n > width {
				t.Errorf("%d columns, more than %d", n, width)
			}
		})
	}
}

func TestSuiteLine(t *testing.T) {
	start := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	r := results.Result{Suite: "udproute", Started: start, Finished: start.Add(4*time.Minute + 12*time.Second), Cases: []results.CaseResult{
		row("selection-redirect", results.Control, true, "svc-a -> a-0=20; svc-b -> a-0=20", ""),
		row("selection-tproxy", results.Subject, true, "svc-a -> a-0=20; svc-b -> b-0=20", ""),
	}}
	if got, want := suiteLine("5:02", r), " 5:02  udproute     suite    2 cases, 4m12s          PASS  1 control(s) red, 1 subject(s) green"; got != want {
		t.Errorf("passing suite:\n got %q\nwant %q", got, want)
	}
	// The verdict is the rows', not the one the result declares.
	r.Verdict = results.Pass
	r.Cases[1].Matched = false
	r.Cases[1].Reason = "svc-b reached a-0"
	if got, want := suiteLine("5:02", r), " 5:02  udproute     suite    2 cases, 4m12s          FAIL  selection-tproxy: svc-b reached a-0"; got != want {
		t.Errorf("failing suite:\n got %q\nwant %q", got, want)
	}
	cns := results.Result{Suite: "mtls", Started: start, Finished: start, CouldNotStart: "skipped: not root"}
	if got, want := suiteLine("0:40", cns), " 0:40  mtls         suite    0 cases                 FAIL  could not start: skipped: not root"; got != want {
		t.Errorf("suite that could not start:\n got %q\nwant %q", got, want)
	}
}

func TestSoakLine(t *testing.T) {
	p := results.SoakProgress{Elapsed: 65 * time.Second, Planned: 2 * time.Minute, WindowsDone: 6, Windows: 12, Step: "s16-agent-restart-a",
		Requests: 9750, RequestsFail: 2, Probes: 650, ProbesFail: 1, NC: 3, ProxyExits: 0}
	want := " 6:12  soak 1:05/2:00  probes 650 (1 failed)  load 9750 (2 failed)  503 NC 3  exits 0  6/12 windows  s16-agent-restart-a"
	if got := soakLine("6:12", p); got != want {
		t.Errorf("soak line:\n got %q\nwant %q", got, want)
	}
	p.Requests, p.Probes, p.Step = 123456789, 98765432, "s21-agent-restart-in-hot-restart-a"
	if got := soakLine("6:12", p); utf8.RuneCountInString(got) != width || !strings.HasSuffix(got, "…") {
		t.Errorf("a soak line longer than the width is not cut to it: %d columns: %q", utf8.RuneCountInString(got), got)
	}
}

func TestClockAndSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0:00", 59*time.Second + 600*time.Millisecond: "1:00", 7*time.Minute + 48*time.Second: "7:48", time.Hour + 2*time.Minute + 3*time.Second: "1:02:03", -time.Second: "0:00"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%v) = %q, want %q", d, got, want)
		}
	}
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850ms", 41*time.Second + 400*time.Millisecond: "41s", 5*time.Minute + 12*time.Second: "5m12s"} {
		if got := span(d); got != want {
			t.Errorf("span(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestWrap(t *testing.T) {
	short := "aether-gate: FAIL: short"
	if got := wrap(short, 3, "(log)"); len(got) != 1 || got[0] != short {
		t.Errorf("a short line is wrapped: %q", got)
	}
	words := strings.Repeat("abcdefghi ", 30) // 300 columns
	got := wrap(words, 3, "(log)")
	if len(got) != 3 {
		t.Fatalf("300 columns in %d lines, want 3: %q", len(got), got)
	}
	if got[0] != strings.TrimSpace(strings.Repeat("abcdefghi ", 12)) {
		t.Errorf("first line not broken at the last space before the width: %q", got[0])
	}
	if !strings.HasPrefix(got[1], "    abcdefghi") {
		t.Errorf("a later line is not indented: %q", got[1])
	}
	long := strings.Repeat("abcdefghi ", 60) // 600 columns: more than 3 lines hold
	got = wrap(long, 3, "(in full: gate.log)")
	if len(got) != 3 || !strings.HasSuffix(got[2], " … (in full: gate.log)") {
		t.Errorf("a line too long for 3 lines does not end saying where it is whole: %q", got)
	}
	for _, l := range append(got, wrap(strings.Repeat("x", 500), 2, "(log)")...) {
		if n := utf8.RuneCountInString(l); n > width {
			t.Errorf("%d columns: %q", n, l)
		}
	}
}
