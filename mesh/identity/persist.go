package identity

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// CAFile is the file, in a CA directory, holding the root certificate and
// its key as PEM.
const CAFile = "ca.pem"

// LoadOrCreateCA returns the CA kept in dir, making it on first use. Every
// agent of a mesh that shares dir signs under one root, so SVIDs issued on
// one node verify on another. Two agents starting at once agree: the file
// appears whole (written aside, then linked into place, which fails if it
// exists) and the one that loses the race loads the winner's.
func LoadOrCreateCA(dir string, cfg CAConfig) (*CA, error) {
	path := filepath.Join(dir, CAFile)
	ca, err := loadCA(path, cfg)
	if !errors.Is(err, fs.ErrNotExist) {
		return ca, err
	}
	ca, err = NewCA(cfg)
	if err != nil {
		return nil, err
	}
	if err := ca.store(dir, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return loadCA(path, cfg)
		}
		return nil, err
	}
	return ca, nil
}

func (ca *CA) store(dir, path string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("CA directory %q: %w", dir, err)
	}
	der, err := x509.MarshalECPrivateKey(ca.key)
	if err != nil {
		return fmt.Errorf("CA for %q: marshal key: %w", ca.td, err)
	}
	data := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.root.Raw}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})...)
	tmp, err := os.CreateTemp(dir, ".ca-*.pem")
	if err != nil {
		return fmt.Errorf("CA file in %q: %w", dir, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("CA file %q: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("CA file %q: %w", tmp.Name(), err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("CA file %q: %w", path, err)
	}
	return nil
}

func loadCA(path string, cfg CAConfig) (*CA, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA file: %w", err)
	}
	var root *x509.Certificate
	var key *ecdsa.PrivateKey
	for b, rest := pem.Decode(data); b != nil; b, rest = pem.Decode(rest) {
		switch b.Type {
		case "CERTIFICATE":
			root, err = x509.ParseCertificate(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("CA file %q: %s block: %w", path, b.Type, err)
		}
	}
	if root == nil || key == nil {
		return nil, fmt.Errorf("CA file %q: want a CERTIFICATE and an EC PRIVATE KEY block", path)
	}
	td, err := parseTrustDomain(cfg.TrustDomain)
	if err != nil {
		return nil, err
	}
	if len(root.URIs) != 1 || root.URIs[0].String() != td.IDString() {
		return nil, fmt.Errorf("CA file %q: root is for %v, not trust domain %q", path, root.URIs, td)
	}
	if !key.PublicKey.Equal(root.PublicKey) {
		return nil, fmt.Errorf("CA file %q: the key does not match the root certificate", path)
	}
	return &CA{td: td, meshDomain: cfg.MeshDomain, root: root, key: key}, nil
}
