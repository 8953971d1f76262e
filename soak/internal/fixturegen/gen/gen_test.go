package gen

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// The committed fixtures are exactly what the generator writes: nobody
// hand-edits a recorded soak to make a verdict come out.
func TestFixturesAreGenerated(t *testing.T) {
	const committed = "../../../../fixtures/soaks"
	dir := t.TempDir()
	if err := WriteAll(dir); err != nil {
		t.Fatal(err)
	}
	seen := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		want, err := os.ReadFile(filepath.Join(committed, rel))
		if err != nil {
			t.Errorf("generated %s is not committed (go run ./soak/internal/fixturegen): %v", rel, err)
			return nil
		}
		got, _ := os.ReadFile(p)
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes (go run ./soak/internal/fixturegen)", rel)
		}
		seen++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var committedFiles int
	filepath.WalkDir(committed, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Base(p) != "README.md" {
			committedFiles++
		}
		return nil
	})
	if seen == 0 || committedFiles != seen {
		t.Errorf("generator writes %d files, %d are committed", seen, committedFiles)
	}
}
