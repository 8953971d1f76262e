package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/identity"
)

// The extra roots are trusted beside the CA's, and a change of the file
// reaches the store (and so the agent's trust bundle) without a restart:
// emptying it revokes them.
func TestExtraRootsFollowTheFile(t *testing.T) {
	td := spiffeid.RequireTrustDomainFromString("aether.test")
	ca, err := identity.NewCA(identity.CAConfig{TrustDomain: td.Name(), MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	extra, err := identity.NewCA(identity.CAConfig{TrustDomain: td.Name(), MeshDomain: "mesh.test"})
	if err != nil {
		t.Fatal(err)
	}
	store := identity.NewStore()
	store.PutBundle(ca.Bundle())
	file := filepath.Join(t.TempDir(), "roots.pem")
	pem, err := extra.Bundle().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, pem, 0o644); err != nil {
		t.Fatal(err)
	}
	roots := func() int {
		b, err := store.GetX509BundleForTrustDomain(td)
		if err != nil {
			t.Fatal(err)
		}
		return len(b.X509Authorities())
	}
	e, err := newExtraRoots(file, store, td, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if n := roots(); n != 2 {
		t.Fatalf("%d roots trusted with the extra one, want 2", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go e.watch(ctx)
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for roots() != 1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := roots(); n != 1 {
		t.Fatalf("%d roots trusted after the file was emptied, want the CA's alone", n)
	}
}
