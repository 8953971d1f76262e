package pairstate

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aether-mesh/aether/mesh/xdsnames"
)

var (
	webToAPI  = xdsnames.Twin{Service: "api", Namespace: "shop", SA: "web", SANamespace: "shop"}
	jobToCart = xdsnames.Twin{Service: "cart", Namespace: "shop", SA: "batch", SANamespace: "jobs"}
)

func TestWriteThenLoad(t *testing.T) {
	dir := t.TempDir()
	want := State{Live: []xdsnames.Twin{webToAPI}, Dormant: []xdsnames.Twin{jobToCart}}
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	const file = `{
  "quic_pairs": [
    "quic:api.shop@web.shop"
  ],
  "dormant_quic_pairs": [
    "quic:cart.shop@batch.jobs"
  ]
}
`
	if string(raw) != file {
		t.Fatalf("file =\n%s\nwant\n%s", raw, file)
	}
	got, err := Load(dir, time.Now())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("Load = %+v, %v; want %+v", got, err, want)
	}
	// Rewritten: the old content is replaced whole, and no temporary
	// file is left beside it.
	if err := Write(dir, State{}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 || entries[0].Name() != File {
		t.Fatalf("state dir holds %v (%v), want %s alone", entries, err, File)
	}
	if got, err := Load(dir, time.Now()); err != nil || len(got.Live)+len(got.Dormant) != 0 {
		t.Fatalf("Load after writing an empty state = %+v, %v", got, err)
	}
}

func TestLoadWithoutFileIsEmpty(t *testing.T) {
	got, err := Load(t.TempDir(), time.Now())
	if err != nil || len(got.Live)+len(got.Dormant) != 0 {
		t.Fatalf("Load = %+v, %v; want an empty state", got, err)
	}
}

// TestDecodeRefuses: whatever the decoder does not fully understand is
// refused, and the error names the field and the entry.
func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"unknown field", `{"quic_pairs":[],"pairs":[]}`, `unknown field "pairs"`},
		{"not json", `quic:api.shop@web.shop`, "not an observed-upstreams object"},
		{"not a twin", `{"quic_pairs":["quic:api.shop@web.shop","tcp:api.shop"]}`, `quic_pairs[1]: cluster "tcp:api.shop": not a twin`},
		{"bad label", `{"dormant_quic_pairs":["quic:api.shop@Web.shop"]}`, `dormant_quic_pairs[0]: twin "quic:api.shop@Web.shop": "Web" is not a DNS label`},
		{"listed twice", `{"quic_pairs":["quic:api.shop@web.shop"],"dormant_quic_pairs":["quic:api.shop@web.shop"]}`, `dormant_quic_pairs[0]: "quic:api.shop@web.shop" is already listed in quic_pairs[0]`},
		{"trailing data", `{"quic_pairs":[]} {}`, "trailing data"},
		{"wrong type", `{"quic_pairs":"quic:api.shop@web.shop"}`, "not an observed-upstreams object"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Decode(%s) = %v, want an error containing %q", c.data, err, c.want)
			}
		})
	}
}

// TestCorruptFileMovedAside: a file that cannot be decoded, or read, is
// reported naming it and the cause, moved aside with its content intact,
// and the state is empty; the next Write does not touch the moved file.
func TestCorruptFileMovedAside(t *testing.T) {
	now := time.Unix(1700000000, 0)
	for _, c := range []struct {
		name  string
		plant func(path string) error
		cause string
	}{
		{"undecodable", func(p string) error { return os.WriteFile(p, []byte(`{"quic_pairs":["quic:api"]}`), 0o600) }, `quic_pairs[0]`},
		// A directory in the file's place cannot be read as one.
		{"unreadable", func(p string) error { return os.Mkdir(p, 0o755) }, "is a directory"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, File)
			if err := c.plant(path); err != nil {
				t.Fatal(err)
			}
			before, _ := os.ReadFile(path)
			got, err := Load(dir, now)
			var ce *CorruptError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.cause) {
				t.Fatalf("Load = %v, want a CorruptError naming %s and %q", err, path, c.cause)
			}
			if len(got.Live)+len(got.Dormant) != 0 {
				t.Fatalf("Load of a corrupt file = %+v, want an empty state", got)
			}
			aside := path + ".corrupt-1700000000"
			if ce.MovedTo != aside {
				t.Fatalf("moved to %q, want %q", ce.MovedTo, aside)
			}
			if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s still in place after Load: %v", path, err)
			}
			if err := Write(dir, State{Live: []xdsnames.Twin{webToAPI}}); err != nil {
				t.Fatal(err)
			}
			after, _ := os.ReadFile(aside)
			if string(after) != string(before) {
				t.Fatalf("moved-aside file = %q, want its content kept: %q", after, before)
			}
		})
	}
}
