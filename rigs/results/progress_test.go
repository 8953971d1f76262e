package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Without the variable nothing is written anywhere.
func TestAnnounceWithoutAFileDoesNothing(t *testing.T) {
	t.Setenv(EnvProgress, "")
	if err := Announce(Event{Suite: "s", Written: "x"}); err != nil {
		t.Fatal(err)
	}
}

// The reader returns each event once, keeps a line still being written for
// the next call, starts at Offset, and names a line that is no event
// without losing the lines after it.
func TestProgressReaderReadsAsTheFileGrows(t *testing.T) {
	p := filepath.Join(t.TempDir(), "progress.jsonl")
	r := &ProgressReader{Path: p}
	if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("a file not yet created: %v, %v", got, err)
	}
	t.Setenv(EnvProgress, p)
	at := time.Date(2026, 12, 1, 18, 0, 0, 0, time.UTC)
	c := row("C1", Subject, true)
	if err := Announce(Event{At: at, Suite: "phase0", Case: &c}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Next()
	if err != nil || len(got) != 1 || got[0].Case == nil || got[0].Case.Name != "C1" || !got[0].At.Equal(at) || got[0].Suite != "phase0" {
		t.Fatalf("one case: %+v, %v", got, err)
	}
	if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("nothing new: %+v, %v", got, err)
	}
	// Half a line, then the rest, then a line that is not an event and one
	// that is.
	appendTo(t, p, `{"suite":"phase0","written":"/r/ph`)
	if got, err := r.Next(); err != nil || len(got) != 0 {
		t.Fatalf("half a line: %+v, %v", got, err)
	}
	appendTo(t, p, "ase0.json\"}\nnot json\n")
	if err := Announce(Event{Suite: "udproute", Written: "/r/udproute.json"}); err != nil {
		t.Fatal(err)
	}
	got, err = r.Next()
	if len(got) != 2 || got[0].Written != "/r/phase0.json" || got[1].Written != "/r/udproute.json" || got[1].At.IsZero() {
		t.Errorf("after the rest of the line: %+v", got)
	}
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not a progress event") {
		t.Errorf("the bad line: %v", err)
	}
	// A reader that starts at the file's end sees only what follows.
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	late := &ProgressReader{Path: p, Offset: fi.Size()}
	if err := Announce(Event{Soak: &SoakProgress{Probes: 7}}); err != nil {
		t.Fatal(err)
	}
	if got, err := late.Next(); err != nil || len(got) != 1 || got[0].Soak == nil || got[0].Soak.Probes != 7 {
		t.Errorf("from the end: %+v, %v", got, err)
	}
}

// Write announces the file it wrote, by its absolute path.
func TestWriteAnnouncesTheResult(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "progress.jsonl")
	t.Setenv(EnvProgress, p)
	r := Result{Suite: "udproute", Cases: []CaseResult{row("C2", Control, true)}}
	if err := r.Write(filepath.Join(dir, "suites")); err != nil {
		t.Fatal(err)
	}
	got, err := (&ProgressReader{Path: p}).Next()
	if err != nil || len(got) != 1 || got[0].Suite != "udproute" || got[0].Written != filepath.Join(dir, "suites", "udproute.json") {
		t.Fatalf("events after Write: %+v, %v", got, err)
	}
	if _, err := Load(got[0].Written); err != nil {
		t.Errorf("the announced file: %v", err)
	}
	// A progress file that cannot be written is Write's error, naming it.
	t.Setenv(EnvProgress, filepath.Join(dir, "no-such-dir", "progress.jsonl"))
	if err := r.Write(filepath.Join(dir, "suites")); err == nil || !strings.Contains(err.Error(), "progress file") {
		t.Errorf("an unwritable progress file: %v", err)
	}
}

func appendTo(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}
