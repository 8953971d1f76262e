package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/identity"
)

// extraRoots keeps the roots in file trusted for the mesh's trust domain
// beside the CA's own, re-reading file whenever it changes: a suite
// revokes every SVID a root signed by emptying the file, as the removal
// of a signing key from a trust bundle does. TEST ONLY.
type extraRoots struct {
	file  string
	store *identity.Store
	base  *x509bundle.Bundle
	log   *slog.Logger
	// loaded is the file's stamp when it was last read: a change made
	// between a load and the watch's start is not missed.
	loaded string
}

func newExtraRoots(file string, store *identity.Store, td spiffeid.TrustDomain, log *slog.Logger) (*extraRoots, error) {
	base, err := store.GetX509BundleForTrustDomain(td)
	if err != nil {
		return nil, fmt.Errorf("--test-only-extra-roots: %w", err)
	}
	e := &extraRoots{file: file, store: store, base: base.Clone(), log: log}
	return e, e.load()
}

// stamp is the file's size and modification time.
func (e *extraRoots) stamp() string {
	fi, err := os.Stat(e.file)
	if err != nil {
		return err.Error()
	}
	return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
}

// load puts the CA's bundle plus the file's roots into the store.
func (e *extraRoots) load() error {
	e.loaded = e.stamp()
	data, err := os.ReadFile(e.file)
	if err != nil {
		return fmt.Errorf("--test-only-extra-roots: %w", err)
	}
	b := e.base.Clone()
	n := 0
	for blk, rest := pem.Decode(data); blk != nil; blk, rest = pem.Decode(rest) {
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return fmt.Errorf("--test-only-extra-roots %s: %w", e.file, err)
		}
		b.AddX509Authority(c)
		n++
	}
	e.store.PutBundle(b)
	e.log.Warn("TEST ONLY: extra roots trusted", "file", e.file, "roots", n)
	return nil
}

// watch reloads the file when its size or modification time moves, until
// ctx ends.
func (e *extraRoots) watch(ctx context.Context) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if e.stamp() != e.loaded {
			if err := e.load(); err != nil {
				e.log.Error("TEST ONLY: extra roots not reloaded", "err", err)
			}
		}
	}
}
