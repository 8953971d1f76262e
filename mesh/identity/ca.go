package identity

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net/url"
	"strings"
	"time"

	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"k8s.io/apimachinery/pkg/util/validation"
)

const (
	// DefaultRootTTL is the root's lifetime when CAConfig.RootTTL is zero.
	// The embedded CA does not rotate its root; an SVID that would outlive
	// it is refused rather than issued unverifiable.
	DefaultRootTTL = 365 * 24 * time.Hour

	// clockSkew backdates NotBefore so that a peer whose clock runs a little
	// behind the issuer's does not reject a freshly issued certificate.
	clockSkew = time.Minute
)

// CAConfig configures an embedded CA.
type CAConfig struct {
	// TrustDomain is the SPIFFE trust domain the CA signs for, e.g.
	// "aether.test" (a name, not a spiffe:// URI).
	TrustDomain string
	// MeshDomain is the DNS suffix of the SVIDs' DNS SANs
	// <sa>.<ns>.<mesh-domain>, e.g. "mesh.local".
	MeshDomain string
	// RootTTL is the root's lifetime; zero means DefaultRootTTL.
	RootTTL time.Duration
}

// CA is an embedded certificate authority for one trust domain: a
// self-signed ECDSA P-256 root that issues X.509 SVIDs directly. A second
// trust domain is a second CA; its SVIDs do not verify under this one's
// bundle.
type CA struct {
	td         spiffeid.TrustDomain
	meshDomain string
	root       *x509.Certificate
	key        *ecdsa.PrivateKey
}

// NewCA makes a CA with a fresh root key, valid from now.
func NewCA(cfg CAConfig) (*CA, error) {
	td, err := parseTrustDomain(cfg.TrustDomain)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Subdomain(cfg.MeshDomain); len(errs) > 0 {
		return nil, fmt.Errorf("CA for %q: invalid mesh domain %q: %s",
			td, cfg.MeshDomain, strings.Join(errs, "; "))
	}
	ttl := cfg.RootTTL
	if ttl == 0 {
		ttl = DefaultRootTTL
	}
	if ttl < 0 {
		return nil, fmt.Errorf("CA for %q: root TTL %s is not positive", td, ttl)
	}
	key, root, err := newRoot(td, time.Now(), ttl)
	if err != nil {
		return nil, fmt.Errorf("CA for %q: %w", td, err)
	}
	return &CA{td: td, meshDomain: cfg.MeshDomain, root: root, key: key}, nil
}

// parseTrustDomain takes a trust domain name. go-spiffe also accepts a
// spiffe:// ID there; a mesh config that says "spiffe://x/y" meant something
// else, so only the bare name is taken.
func parseTrustDomain(name string) (spiffeid.TrustDomain, error) {
	if name == "" {
		return spiffeid.TrustDomain{}, errors.New("invalid trust domain: empty")
	}
	if strings.Contains(name, ":") {
		return spiffeid.TrustDomain{}, fmt.Errorf("invalid trust domain %q: want a name such as \"aether.test\", not a URI", name)
	}
	td, err := spiffeid.TrustDomainFromString(name)
	if err != nil {
		return spiffeid.TrustDomain{}, fmt.Errorf("invalid trust domain %q: %w", name, err)
	}
	return td, nil
}

// newRoot makes the self-signed root: CA:true, path length zero (it signs
// SVIDs only), URI SAN spiffe://<td> as the SPIFFE spec asks of signing
// certificates.
func newRoot(td spiffeid.TrustDomain, now time.Time, ttl time.Duration) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate root key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, nil, err
	}
	now = now.Truncate(time.Second)
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{Organization: []string{"aether"}, CommonName: td.Name()},
		URIs:                  []*url.URL{td.ID().URL()},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(ttl),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("sign root: %w", err)
	}
	root, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("parse root: %w", err)
	}
	return key, root, nil
}

func newSerial() (*big.Int, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("generate serial number: %w", err)
	}
	return serial, nil
}

// TrustDomain returns the trust domain the CA signs for.
func (ca *CA) TrustDomain() spiffeid.TrustDomain { return ca.td }

// Bundle returns the trust bundle that verifies this CA's SVIDs: its root.
// It is a fresh copy; changing it does not change the CA.
func (ca *CA) Bundle() *x509bundle.Bundle {
	return x509bundle.FromX509Authorities(ca.td, []*x509.Certificate{ca.root})
}

// Request asks the CA for one SVID.
type Request struct {
	Account
	// TTL is the SVID's lifetime from IssuedAt; it must be positive.
	TTL time.Duration
	// OmitDNSSANs issues the URI SAN alone, without <sa>.<ns>.<mesh-domain>
	// and its wildcard: the control that shows what the DNS SANs are for.
	OmitDNSSANs bool
	// IssuedAt is where the lifetime starts; zero means now. An instant more
	// than TTL ago yields an SVID that has already expired: the control that
	// shows expiry is enforced.
	IssuedAt time.Time
}

// Issue signs a new SVID with a fresh P-256 key. Its chain is the leaf
// alone; the root travels in the bundle. NotBefore is backdated by a minute
// for clock skew and NotAfter is IssuedAt + TTL, both at whole seconds
// (IssuedAt is truncated) because X.509 encodes no finer.
func (ca *CA) Issue(req Request) (*x509svid.SVID, error) {
	id, err := ID(ca.td, req.Account)
	if err != nil {
		return nil, err
	}
	if req.TTL <= 0 {
		return nil, fmt.Errorf("SVID for %s: TTL %s is not positive", id, req.TTL)
	}
	issuedAt := req.IssuedAt
	if issuedAt.IsZero() {
		issuedAt = time.Now()
	}
	issuedAt = issuedAt.Truncate(time.Second)
	notAfter := issuedAt.Add(req.TTL)
	if notAfter.After(ca.root.NotAfter) {
		return nil, fmt.Errorf("SVID for %s: expiry %s is after the %s root's %s",
			id, notAfter.UTC().Format(time.RFC3339), ca.td, ca.root.NotAfter.UTC().Format(time.RFC3339))
	}
	var dnsNames []string
	if !req.OmitDNSSANs {
		if dnsNames, err = ca.dnsNames(req.Account); err != nil {
			return nil, fmt.Errorf("SVID for %s: %w", id, err)
		}
	}
	svid, err := ca.sign(id, dnsNames, issuedAt.Add(-clockSkew), notAfter)
	if err != nil {
		return nil, fmt.Errorf("SVID for %s: %w", id, err)
	}
	return svid, nil
}

// dnsNames are the DNS SANs of the SVIDs ca issues.
func (ca *CA) dnsNames(a Account) ([]string, error) { return DNSNames(a, ca.meshDomain) }

// DNSNames are the DNS SANs an SVID for a carries under meshDomain (Q5):
// <sa>.<ns>.<mesh-domain> and *.<sa>.<ns>.<mesh-domain>. The labels are
// valid on their own; together with the mesh domain they can still exceed
// a DNS name's length.
func DNSNames(a Account, meshDomain string) ([]string, error) {
	name := a.ServiceAccount + "." + a.Namespace + "." + meshDomain
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("DNS SAN %q: %s", name, strings.Join(errs, "; "))
	}
	wildcard := "*." + name
	if errs := validation.IsWildcardDNS1123Subdomain(wildcard); len(errs) > 0 {
		return nil, fmt.Errorf("DNS SAN %q: %s", wildcard, strings.Join(errs, "; "))
	}
	return []string{name, wildcard}, nil
}

// sign makes the leaf: DigitalSignature only (no CertSign/CRLSign, which
// SPIFFE forbids on a leaf), both server and client auth because every
// workload is both ends of mTLS.
func (ca *CA) sign(id spiffeid.ID, dnsNames []string, notBefore, notAfter time.Time) (*x509svid.SVID, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate key: %w", err)
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		URIs:                  []*url.URL{id.URL()},
		DNSNames:              dnsNames,
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.root, &key.PublicKey, ca.key)
	if err != nil {
		return nil, fmt.Errorf("sign: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse signed leaf: %w", err)
	}
	return &x509svid.SVID{ID: id, Certificates: []*x509.Certificate{leaf}, PrivateKey: key}, nil
}

// NamesServer reports whether an SVID for a, with the DNS SANs the mesh
// gives it under meshDomain, passes a TLS client's hostname check for
// serverName, as Go's (and Envoy's QUIC client's, Q5) check runs it: the
// wildcard covers one label. A QUIC twin's SNI <port>.<svc>.<ns>.<domain>
// is named only by the account of the same name in the same namespace.
func NamesServer(a Account, meshDomain, serverName string) bool {
	names, err := DNSNames(a, meshDomain)
	if err != nil {
		return false
	}
	return (&x509.Certificate{DNSNames: names}).VerifyHostname(serverName) == nil
}
