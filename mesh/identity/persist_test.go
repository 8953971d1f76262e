package identity

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
)

// Two agents sharing a CA directory, started at once, sign under one root:
// an SVID from either verifies with the other's bundle.
func TestCADirIsSharedByConcurrentAgents(t *testing.T) {
	dir := t.TempDir()
	cfg := CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"}
	cas := make([]*CA, 4)
	var wg sync.WaitGroup
	for i := range cas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ca, err := LoadOrCreateCA(dir, cfg)
			if err != nil {
				t.Error(err)
			}
			cas[i] = ca
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	svid, err := cas[1].Issue(Request{Account: Account{Namespace: "demo", ServiceAccount: "a"}, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i, ca := range cas {
		if _, _, err := x509svid.Verify(svid.Certificates, ca.Bundle()); err != nil {
			t.Errorf("CA %d does not verify an SVID of CA 1: %v", i, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".ca-*")); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

func TestCAFileOfAnotherTrustDomainIsRefused(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir, CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"}); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreateCA(dir, CAConfig{TrustDomain: "other.test", MeshDomain: "mesh.test"})
	if err == nil || !strings.Contains(err.Error(), `not trust domain "other.test"`) {
		t.Errorf("error %v, want the file's trust domain named", err)
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir, CAConfig{TrustDomain: "aether.test", MeshDomain: "mesh.test"}); err == nil {
		t.Error("a CA file without PEM blocks was accepted")
	}
}
