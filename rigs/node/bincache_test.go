package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestBinCacheDirWithoutHome(t *testing.T) {
	t.Setenv(EnvBinCache, "")
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "")
	if got, want := BinCacheDir(), filepath.Join(os.TempDir(), "aether", "bin"); got != want {
		t.Fatalf("BinCacheDir without a home = %q, want %q", got, want)
	}
	t.Setenv(EnvBinCache, "/somewhere")
	if got := BinCacheDir(); got != "/somewhere" {
		t.Fatalf("BinCacheDir with %s set = %q", EnvBinCache, got)
	}
}

// Two builds of the same content share one set: the second run gets the
// first run's files, not a copy, and leaves no build dir behind. A set idle
// for longer than binSetIdle goes; one used recently stays.
func TestBuildSharedReusesOneSet(t *testing.T) {
	cache := t.TempDir()
	t.Setenv(EnvBinCache, cache)
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	idle := filepath.Join(cache, strings.Repeat("a", setKeyLen))
	recent := filepath.Join(cache, strings.Repeat("b", setKeyLen))
	for _, d := range []string{idle, recent} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-binSetIdle - time.Hour)
	if err := os.Chtimes(idle, old, old); err != nil {
		t.Fatal(err)
	}

	first, err := BuildShared(root, "static")
	if err != nil {
		t.Fatal(err)
	}
	second, err := BuildShared(root, "static")
	if err != nil {
		t.Fatal(err)
	}
	if first.Dir != second.Dir || filepath.Dir(first.Dir) != cache {
		t.Fatalf("sets %s and %s, want one set in %s", first.Dir, second.Dir, cache)
	}
	info, err := os.Stat(first.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o755 {
		t.Fatalf("set %s has mode %v, want 0755 so every user can run it", first.Dir, info.Mode().Perm())
	}
	var st1, st2 unix.Stat_t
	if err := unix.Stat(filepath.Join(first.Dir, "static"), &st1); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(second.Dir, "static"), &st2); err != nil {
		t.Fatal(err)
	}
	if st1.Ino != st2.Ino {
		t.Fatal("the second build replaced the first one's binary")
	}
	ents, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	want := []string{filepath.Base(recent), filepath.Base(first.Dir)}
	if len(names) != 2 || !strings.Contains(strings.Join(names, ","), want[0]) || !strings.Contains(strings.Join(names, ","), want[1]) {
		t.Fatalf("cache holds %v, want exactly %v (the idle set pruned, no build dir left)", names, want)
	}
}
