package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"

	"github.com/aether-mesh/aether/mesh/agent"
	"github.com/aether-mesh/aether/mesh/identity"
)

// mtlsFlags turn on the mTLS HTTP/2 path, with the embedded CA as the
// identity source.
type mtlsFlags struct {
	trustDomain, meshDomain, caDir, accessLogDir, upstreamCert *string
	svidTTL                                                    *time.Duration
	// ca is the embedded CA once apply made the path; nil when off.
	ca *identity.CA
}

func (f *mtlsFlags) register() {
	f.trustDomain = flag.String("trust-domain", "", "SPIFFE trust domain of the mesh's identities; with --ca-dir, turns on the mTLS HTTP/2 path (18008 in, 18081 out)")
	f.meshDomain = flag.String("mesh-domain", "mesh.local", "DNS suffix of service authorities (<svc>.<ns>.<mesh-domain>) and SVID DNS SANs")
	f.caDir = flag.String("ca-dir", "", "directory of the embedded CA, made on first use and shared by every node's agent")
	f.svidTTL = flag.Duration("svid-ttl", time.Hour, "SVID lifetime; each is re-issued at half of it")
	f.accessLogDir = flag.String("access-log-dir", "/var/log/aether", "directory of the proxy's JSON access log, access-<node>.log")
	f.upstreamCert = flag.String("upstream-cert", "per-source", "how h2 clusters choose their certificate: "+upstreamCertModes)
}

// apply fills opts' mTLS path and returns the rotator to run, or nil when
// the path is off.
func (f *mtlsFlags) apply(opts *agent.Options) (*identity.Rotator, error) {
	if *f.trustDomain == "" && *f.caDir == "" {
		return nil, nil
	}
	if *f.trustDomain == "" || *f.caDir == "" {
		return nil, errors.New("--trust-domain and --ca-dir go together")
	}
	var static, unhashed bool
	switch *f.upstreamCert {
	case "per-source":
	case "static", "unhashed-identity":
		if !controlsBuilt {
			return nil, fmt.Errorf("--upstream-cert: %q is a #831 control, built only into aether-agent -tags aethercontrols; this build has per-source alone", *f.upstreamCert)
		}
		static, unhashed = *f.upstreamCert == "static", *f.upstreamCert == "unhashed-identity"
	default:
		return nil, fmt.Errorf("--upstream-cert: %q, want per-source, static or unhashed-identity", *f.upstreamCert)
	}
	ca, err := identity.LoadOrCreateCA(*f.caDir, identity.CAConfig{TrustDomain: *f.trustDomain, MeshDomain: *f.meshDomain})
	if err != nil {
		return nil, fmt.Errorf("--ca-dir: %w", err)
	}
	store := identity.NewStore()
	rot, err := identity.NewRotator(ca, store, identity.RotatorConfig{TTL: *f.svidTTL, OmitDNSSANs: opts.Controls.OmitDNSSANs})
	if err != nil {
		return nil, fmt.Errorf("--svid-ttl: %w", err)
	}
	td, err := spiffeid.TrustDomainFromString(*f.trustDomain)
	if err != nil {
		return nil, fmt.Errorf("--trust-domain: %w", err)
	}
	opts.HTTP = &agent.HTTPPath{
		TrustDomain: td, MeshDomain: *f.meshDomain, StaticCert: static, UnhashedIdentity: unhashed, Identities: store,
		AccessLog: filepath.Join(*f.accessLogDir, "access-"+opts.Node+".log"),
	}
	opts.Issuer = rot
	f.ca = ca
	return rot, nil
}
