package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/identity"
)

// quicControlFlags are the TEST ONLY flags of the QUIC security controls
// (agent.Controls): each makes the agent emit a configuration the mesh
// must never run, so that a suite can show what it breaks.
type quicControlFlags struct {
	sharedCert, extraRoots            *string
	perDownstream, resumption, noSANs *bool
	wildcard                          *bool
}

func (f *quicControlFlags) register() {
	f.sharedCert = flag.String("test-only-twin-shared-cert", "", "TEST ONLY: every twin presents this SPIFFE ID's SVID, whatever its source account (sources arrive as one)")
	f.perDownstream = flag.Bool("test-only-twin-pool-per-downstream", false, "TEST ONLY: twins set connection_pool_per_downstream_connection, past the twin_pooling_pinned_off gate (#1021)")
	f.resumption = flag.Bool("test-only-quic-resumption", false, "TEST ONLY: QUIC chains state enable_resumption and enable_early_data true, past the quic_r4_pinned gate (R4)")
	f.extraRoots = flag.String("test-only-extra-roots", "", "TEST ONLY: also trust the roots in this PEM file for the mesh's trust domain, re-read when it changes (emptying it revokes what they signed)")
	f.wildcard = flag.Bool("test-only-quic-inbound-wildcard", false, "TEST ONLY: QUIC inbounds bind 0.0.0.0 with IP_TRANSPARENT, so a pod's own dial of a peer's 18008 lands in its own inbound")
	f.noSANs = flag.Bool("test-only-svid-omit-dns-sans", false, "TEST ONLY: issue SVIDs without their DNS SANs (Q5: twins' name checks fail)")
}

// roots is the extra-roots control over the agent's identity store, or
// nil when it is off.
func (f *quicControlFlags) roots(opts *agent.Options, log *slog.Logger) (*extraRoots, error) {
	if *f.extraRoots == "" {
		return nil, nil
	}
	store, ok := func() (*identity.Store, bool) {
		if opts.HTTP == nil {
			return nil, false
		}
		s, ok := opts.HTTP.Identities.(*identity.Store)
		return s, ok
	}()
	if !ok {
		return nil, fmt.Errorf("--test-only-extra-roots needs the mTLS path with the embedded CA (--trust-domain, --ca-dir)")
	}
	return newExtraRoots(*f.extraRoots, store, opts.HTTP.TrustDomain, log)
}

func (f *quicControlFlags) apply(c *agent.Controls) {
	c.TwinSharedCert = *f.sharedCert
	c.TwinPoolPerDownstream = *f.perDownstream
	c.QUICResumption = *f.resumption
	c.OmitDNSSANs = *f.noSANs
	c.QUICInboundWildcard = *f.wildcard
}

// extraRoots keeps the roots in file trusted for the mesh's trust domain
// beside the CA's own, re-reading file whenever it changes: a suite
// revokes every SVID a root signed by emptying the file, as the removal
// of a signing key from a trust bundle does. TEST ONLY.
type extraRoots struct {
	file  string
	store *identity.Store
	base  *x509bundle.Bundle
	log   *slog.Logger
}

func newExtraRoots(file string, store *identity.Store, td spiffeid.TrustDomain, log *slog.Logger) (*extraRoots, error) {
	base, err := store.GetX509BundleForTrustDomain(td)
	if err != nil {
		return nil, fmt.Errorf("--test-only-extra-roots: %w", err)
	}
	e := &extraRoots{file: file, store: store, base: base.Clone(), log: log}
	return e, e.load()
}

// load puts the CA's bundle plus the file's roots into the store.
func (e *extraRoots) load() error {
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
	stamp := func() string {
		fi, err := os.Stat(e.file)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(fi.Size(), fi.ModTime().UnixNano())
	}
	last := stamp()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s := stamp(); s != last {
			last = s
			if err := e.load(); err != nil {
				e.log.Error("TEST ONLY: extra roots not reloaded", "err", err)
			}
		}
	}
}
